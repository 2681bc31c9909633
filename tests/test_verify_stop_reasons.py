"""Which failure of a run is its cause, read from the events the ranks recorded (no run: the records are written here
as the harness writes them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pitfall_lint.harness.reasons import stop_point
from pitfall_lint.harness.record import RunRecord

_LAUNCHER_REPORT = (
    "============================================================\ntrain.py FAILED\n----\nRoot Cause (first observed "
    "failure):\n[0]:\n  time      : 2026-11-25_22:58:01\n  host      : localhost\n  rank      : 0 (local_rank: 0)\n"
    "  exitcode  : -11 (pid: 41)\n  error_file: <N/A>\n  traceback : Signal 11 (SIGSEGV) received by PID 41\n"
)
_PEER_GONE = ("Gloo connectFullMesh failed with [third_party/gloo/gloo/transport/tcp/pair.cc:144] no error: typically "
              "caused by a remote worker crashing. Check the logs of the remote worker before reporting an error.")


def _run(*errors: dict) -> RunRecord:
    return RunRecord("/p/train.py", [{"event": "error", **e} for e in errors], "", 1, False)


def test_a_peer_that_lost_its_connection_to_a_rank_killed_by_a_signal_is_not_the_cause() -> None:
    """Rank 1, still connecting when rank 0 crashed in native code, fails with gloo's 'remote worker crashing': rank
    0's crash is what the report names, whichever of the two the events list first."""
    peer = {"type": "RuntimeError", "message": _PEER_GONE, "rank": 1, "pid": 42,
            "user_frame": {"file": "/p/train.py", "line": 21, "function": "main", "code": "dist.init_process_group()"}}
    killed = {"type": "ChildFailedError", "message": _LAUNCHER_REPORT, "rank": None, "pid": 40}
    for errors in ((peer, killed), (killed, peer)):
        stop = stop_point(_run(*errors), "/p/train.py", "/p")
        assert stop is not None
        assert stop.text == "rank 0 was killed by SIGSEGV: a crash in native code, with no Python error"


def test_a_folder_a_message_says_was_not_found_is_missing_data_only_when_it_is_absent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama2.c asserts its shards are there (`No bin files found in data/TinyStories_all_data`): the folder, relative to
    the run's working folder, is the data to give, checked on disk; a folder that is there but empty is not."""
    monkeypatch.chdir(tmp_path)
    error = {"type": "AssertionError", "message": "No bin files found in data/shards", "rank": None, "pid": 40,
             "user_frame": {"file": "/p/tokens.py", "line": 22, "function": "__iter__", "code": "assert shards, msg"}}
    stop = stop_point(_run(error), "/p/train.py", "/p")
    assert stop is not None
    assert stop.sentence() == ("the run failed at /p/tokens.py:22: AssertionError: No bin files found in data/shards; the "
                               "data or file it reads is missing here: data/shards; give its location with the script's "
                               "own options after `--`")
    (tmp_path / "data" / "shards").mkdir(parents=True)
    stop = stop_point(_run(error), "/p/train.py", "/p")
    assert stop is not None
    assert stop.hint == ""
    assert stop.text == "the run failed at /p/tokens.py:22: AssertionError: No bin files found in data/shards"


def test_a_loader_over_an_iterable_dataset_is_no_missing_sampler_confirmed() -> None:
    """An IterableDataset's loader has torch's _InfiniteConstantSampler on every rank, and takes no DistributedSampler:
    the probe once confirmed PFL401 there with 'each iterated all None samples'."""
    from pitfall_lint.diagnostic import Diagnostic
    from pitfall_lint.harness.probes.data import MissingSamplerProbe

    finding = Diagnostic("/p/train.py", 30, 1, "PFL401", "missing-distributed-sampler", 30, 9, "warning", "no sampler")
    loaders = [{"event": "loader", "file": "/p/train.py", "line": 30, "rank": rank, "sampler": "_InfiniteConstantSampler",
                "dataset_size": None} for rank in (0, 1)]
    judgement = MissingSamplerProbe().judge(finding, RunRecord("/p/train.py", loaders, "", 2, False))
    assert judgement is not None and (judgement.status, judgement.evidence.mechanism) == (
        "not-reproduced", "the loader reads an IterableDataset (its sampler is torch's _InfiniteConstantSampler, and it "
        "takes no DistributedSampler): what each rank reads is decided by the dataset's own code")
