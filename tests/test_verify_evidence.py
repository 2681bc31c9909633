"""verify turns what a run shows into verdicts: a failure that is a rule's signature confirms the rule at the user's
frame (found at run time where the static check flagged nothing), a flagged class that the script wrapped and never
called gets a run of its own, and a helper with no entry point runs through the script that calls it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from test_verify_realistic import project, run_verify
from verify_outcome import assert_finished

_SCRIPT_MODE = "script: the script, with nn.DataParallel 2-way; 2 virtual CUDA devices on the CPU (no real GPU visible)"


# --- a failure that is a rule's signature --------------------------------------------------------------------------


def test_lengths_given_as_a_list_to_data_parallel_are_pfl103_found_at_run_time(tmp_path: Path) -> None:
    """The collate function returns the lengths as a list, which the static check cannot see: the replica's error is
    PFL103's own, reported at the user's line with the real error, as a finding of the run."""
    folder = project(tmp_path, "sequence_dp")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    (finding,) = report["findings"]
    assert (finding["code"], finding["path"], finding["line"], finding["status"], finding["found_at_run_time"]) == (
        "PFL103", str(folder / "train.py"), 19, "confirmed", True)
    assert finding["evidence"] == {
        "mechanism": "the error is the failure PFL103 predicts, on a stack where the static check flagged nothing",
        "error_type": "RuntimeError",
        "message": "Expected `len(lengths)` to be equal to batch_size, but got 2 (batch_size=1)",
        "user_frame": {"file": str(folder / "train.py"), "line": 19, "function": "forward", "code": None},
    }


def test_lengths_found_at_run_time_read_in_the_text_report(tmp_path: Path) -> None:
    folder = project(tmp_path, "sequence_dp")
    completed = subprocess.run([sys.executable, "-m", "pitfall_lint", "verify", "train.py"], cwd=folder,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 1, completed.stderr
    lines = completed.stdout.splitlines()
    start = lines.index(f"{folder / 'train.py'}:19: PFL103 confirmed (found at run time)")
    assert lines[start + 1:] == [
        "    nn.DataParallel split the batch along dim 0 and gave a replica lengths that are not those of its slice (a "
        "list of lengths is copied whole to every replica, not split); pass the lengths as a tensor, so that they are "
        "split with the batch",
        "    RuntimeError: Expected `len(lengths)` to be equal to batch_size, but got 2 (batch_size=1)",
        f"    at {folder / 'train.py'}:19 in forward: packed = pack_padded_sequence(self.embed(tokens), lengths, "
        "batch_first=True)",
        "    the error is the failure PFL103 predicts, on a stack where the static check flagged nothing",
        "1 confirmed, 0 not-reproduced, 0 not-run.",
    ]


@pytest.mark.parametrize(
    ("script", "line", "error", "mechanism", "frame"),
    [
        ("train_dict.py", 21, ("AttributeError", {"'str' object has no attribute 'world_size'"}),
         "`args` was not a tuple: spawn unpacked the dict given as args, so the function got its keys, strings, as its "
         "arguments", (12, "main")),
        # Python 3.11 and later say "Value after *", older ones name the function.
        ("train_namespace.py", 23, ("TypeError", {"Value after * must be an iterable, not Namespace",
                                                  "main() argument after * must be an iterable, not Namespace"}),
         "`args` was not a tuple: spawn called fn(index, *args) on an object that cannot be unpacked", (23, "<module>")),
    ],
)
def test_spawn_args_that_are_not_a_tuple_confirm_pfl302_from_the_real_error(
        tmp_path: Path, script: str, line: int, error: tuple[str, set[str]], mechanism: str,
        frame: tuple[int, str]) -> None:
    folder = project(tmp_path, "spawn_config")
    returncode, report, stderr = run_verify(folder / script, cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    (finding,) = report["findings"]
    assert (finding["code"], finding["path"], finding["line"], finding["status"], finding["found_at_run_time"]) == (
        "PFL302", script, line, "confirmed", False)
    evidence = finding["evidence"]
    assert (evidence["error_type"], evidence["mechanism"]) == (error[0], mechanism)
    assert evidence["message"] in error[1]
    assert (evidence["user_frame"]["file"], evidence["user_frame"]["line"], evidence["user_frame"]["function"]) == (
        str(folder / script), *frame)


# --- a flagged class the script never called -----------------------------------------------------------------------


def test_a_model_wrapped_and_never_called_is_confirmed_by_a_direct_run(tmp_path: Path) -> None:
    folder = project(tmp_path, "model_report")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"], report["mode"]) == (1, [], None, _SCRIPT_MODE), stderr
    assert_finished(report)
    (finding,) = report["findings"]
    assert (finding["code"], finding["path"], finding["line"], finding["status"]) == ("PFL101", "train.py", 15, "confirmed")
    assert finding["mode"] == ("a direct run after the script: 2-way DataParallel around GaussianSmoother(8, width=32) as "
                               "called at train.py:28; 2 virtual CUDA devices on the CPU (no real GPU visible)")
    evidence = finding["evidence"]
    assert evidence["mechanism"] == ("replica 1 ran `_gaussian` (stored in `op`), bound to the original GaussianSmoother, "
                                     "on the original's parameters")
    assert (evidence["error_type"], evidence["message"].split(" [")[0]) == (
        "RuntimeError", "Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!")
    assert (evidence["user_frame"]["file"], evidence["user_frame"]["line"]) == (str(folder / "train.py"), 18)
    assert report["notes"] == ["the script wrapped GaussianSmoother in nn.DataParallel at train.py:30 and never called "
                               "it: verify ran it directly after the script"]
    # The fixed twin calls the method by name in forward: nothing to confirm, a clean exit.
    returncode, report, stderr = run_verify(folder / "train_fixed.py", cwd=folder)
    assert (returncode, report["findings"], report["unexplained"], report["stop"]) == (0, [], [], None), stderr


# --- a helper with no entry point ----------------------------------------------------------------------------------


def test_a_helper_runs_through_the_training_script_that_calls_it(tmp_path: Path) -> None:
    folder = project(tmp_path, "ddp_helper_port")
    # PFL306 is a preview rule: --preview runs it.
    returncode, report, stderr = run_verify(folder / "dist_utils.py", "--preview", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (1, "script", [], None), stderr
    assert report["why"] == ("it has no entry point: verify runs train.py, which calls its setup() at line 12 (train.py: "
                             "it has an entry point, so it runs as `python FILE` would)")
    (finding,) = report["findings"]
    assert (finding["code"], finding["path"], finding["line"], finding["status"]) == (
        "PFL306", "dist_utils.py", 10, "confirmed")
    evidence = finding["evidence"]
    assert evidence["mechanism"] == ("with port 12355 already taken (as by a second job on the machine), the script "
                                     "could not start")
    assert (evidence["error_type"], evidence["message"]) == (
        "DistNetworkError", "The server socket has failed to listen on any local network address. port: 12355, "
        "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    assert (evidence["user_frame"]["file"], evidence["user_frame"]["line"]) == (str(folder / "dist_utils.py"), 11)


def test_a_helper_only_another_helper_calls_names_it(tmp_path: Path) -> None:
    folder = project(tmp_path, "ddp_helper_port")
    (folder / "train.py").unlink()
    (folder / "launch.py").write_text("from dist_utils import setup\n\n\ndef start(rank):\n    setup(rank, 2)\n")
    returncode, report, stderr = run_verify(folder / "dist_utils.py", "--preview", cwd=folder)
    reason = ("no entry point ran this module, nor launch.py, which calls its setup() at line 5: verify the script that "
              "runs them (pitfall-lint verify SCRIPT)")
    assert (returncode, report["why"]) == (2, reason)
    assert [(f["code"], f["line"], f["status"], f["evidence"]["mechanism"]) for f in report["findings"]] == [
        ("PFL306", 10, "not-run", reason)]
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'dist_utils.py'}: {reason}"


# --- signatures across versions (no run) ---------------------------------------------------------------------------


def _replica_error(kind: str, message: str, inner: str = "") -> dict[str, object]:
    """An error as DataParallel re-raises a replica's, with the replica's traceback in its message."""
    return {"type": kind, "message": f"Caught {kind} in replica 1 on device 1.\nOriginal Traceback (most recent call "
                                     f"last):\n{inner}{kind}: {message}"}


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        # torch 0.3's wording (pytorch/pytorch#2312)
        (_replica_error("ValueError", "lengths array has incorrect size"),
         ("PFL103", ("ValueError", "lengths array has incorrect size"))),
        # enforce_sorted=False: the lengths index the batch inside pack_padded_sequence
        (_replica_error("IndexError", "index out of range in self",
                        '  File "/x/torch/nn/utils/rnn.py", line 338, in pack_padded_sequence\n'),
         ("PFL103", ("IndexError", "index out of range in self"))),
        # the same IndexError from an embedding outside any packing names no pitfall
        (_replica_error("IndexError", "index out of range in self"), None),
        # outside a replica the lengths error is the user's own mistake
        ({"type": "RuntimeError", "message": "Expected `len(lengths)` to be equal to batch_size, but got 3 (batch_size=4)"},
         None),
        # a dict of 62 settings spawned as args (guochengqian/PointNeXt#8)
        ({"type": "ProcessRaisedException", "message": "\n\n-- Process 0 terminated with the following error:\nTraceback "
          '(most recent call last):\n  File "/x/torch/multiprocessing/spawn.py", line 90, in _wrap\n    fn(i, *args)\n'
          "TypeError: main() takes 2 positional arguments but 63 were given\n"},
         ("PFL302", ("TypeError", "main() takes 2 positional arguments but 63 were given"))),
        # the same TypeError raised inside the function is not spawn's call
        ({"type": "TypeError", "message": "main() takes 2 positional arguments but 63 were given"}, None),
        # a dict's key where the config was expected confirms only a finding on its stack
        ({"type": "ProcessRaisedException", "message": "AttributeError: 'str' object has no attribute 'rank'"}, None),
        # Python 3.10's wording of an args that is not a tuple
        ({"type": "ProcessRaisedException", "message": 'File "/x/torch/multiprocessing/spawn.py", line 75, in _wrap\n    '
          "fn(i, *args)\nTypeError: main() argument after * must be an iterable, not Namespace"},
         ("PFL302", ("TypeError", "main() argument after * must be an iterable, not Namespace"))),
    ],
)
def test_a_failure_is_a_finding_of_the_rule_whose_telling_signature_it_is(
        error: dict[str, object], expected: tuple[str, tuple[str, str]] | None) -> None:
    from pitfall_lint.harness.probes import all_probes
    from pitfall_lint.harness.probes.base import predicted_failure

    predicted = predicted_failure(all_probes(), error)
    assert (None if predicted is None else (predicted[0].code, predicted[2])) == expected
