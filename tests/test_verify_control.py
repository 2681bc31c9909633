"""A failure that no finding explains is run again alone, on one device or one rank (the control run): the code's own
error fails the same way there, a parallel one does not; data a message names and that is absent is the user's to
give, with no control run (the shapes of the ImageNet example's accuracy(), minGPT's Block, llama2.c's shards)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from test_verify import verdicts
from test_verify_realistic import project, run_verify, snapshot
from verify_outcome import assert_finished

from pitfall_lint.harness.planning import Plan
from pitfall_lint.harness.reasons import Stop
from pitfall_lint.harness.record import RunRecord
from pitfall_lint.harness.report import write_text
from pitfall_lint.harness.verify import VerifyReport

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")

_VIEW_ERROR = ("the run failed at metrics.py:16: RuntimeError: view size is not compatible with input tensor's size and "
               "stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.")


def test_an_error_of_the_codes_own_fails_the_same_way_on_one_device(tmp_path: Path) -> None:
    folder = project(tmp_path, "topk_accuracy")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "dataparallel.py", "--", "--epochs", "2", cwd=folder)
    stop = (f"{_VIEW_ERROR}; it fails the same way on one device, without DataParallel: the code's own error, not a "
            "parallel one; fix metrics.py:16 and run verify again")
    assert (returncode, report["stop"]) == (2, stop), stderr
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'dataparallel.py'}: {stop}"
    # The checkpoint after the epoch is never a pass: its line did not run.
    assert verdicts(report) == {("PFL203", 45, "not-run")}
    assert report["findings"][0]["evidence"]["mechanism"] == f"line 45 never ran: {stop}"
    (failure,) = report["unexplained"]
    assert (failure["user_frame"]["line"], failure["parallel_only"]) == (16, False)
    assert report["notes"][-1].startswith("verify ran it again on one device (--nproc 1, one CUDA device, where "
                                          "nn.DataParallel calls the module itself; ")
    assert report["notes"][-1].endswith(" s) to tell the code's own error from a parallel one: it failed the same way")
    assert report["outcome"] == ("failed (exit code 1); no process left behind; run again on one device, failed (exit "
                                 "code 1); no process left behind")
    assert snapshot(folder) == before


def test_an_error_of_the_codes_own_fails_the_same_way_on_one_rank(tmp_path: Path) -> None:
    folder = project(tmp_path, "topk_accuracy")
    returncode, report, stderr = run_verify(folder / "multiprocessing_distributed.py", "--", "--epochs", "2", cwd=folder)
    stop = (f"{_VIEW_ERROR}; it fails the same way on one rank, in a process group of one: the code's own error, not a "
            "parallel one; fix metrics.py:16 and run verify again")
    assert (returncode, report["stop"]) == (2, stop), stderr
    assert verdicts(report) == {("PFL203", 47, "not-run")}
    assert report["findings"][0]["evidence"]["mechanism"] == f"line 47 never ran: {stop}"
    assert report["notes"][-1].startswith("verify ran it again on one rank (--nproc 1, a world size of 1; ")
    assert report["notes"][-1].endswith(": it failed the same way")


def test_the_scripts_own_device_list_is_cut_to_its_first_device(tmp_path: Path) -> None:
    """`--gpus 0,1`, handed to nn.DataParallel as `device_ids`: alone, the DataParallel is over device 0 only."""
    folder = project(tmp_path, "topk_accuracy")
    returncode, report, stderr = run_verify(folder / "dataparallel.py", "--", "--epochs", "2", "--gpus", "0,1", cwd=folder)
    stop = (f"{_VIEW_ERROR}; it fails the same way on one device, without DataParallel: the code's own error, not a "
            "parallel one; fix metrics.py:16 and run verify again")
    assert (returncode, report["stop"]) == (2, stop), stderr
    assert report["notes"][-1].endswith(": it failed the same way")


def test_a_control_run_that_still_runs_two_ranks_keeps_the_reason(tmp_path: Path) -> None:
    """`--nprocs 2`: the script starts two ranks itself, so one device does not make it one rank."""
    folder = project(tmp_path, "topk_accuracy")
    returncode, report, stderr = run_verify(folder / "multiprocessing_distributed.py", "--", "--epochs", "2", "--nprocs",
                                            "2", cwd=folder)
    assert (returncode, report["stop"]) == (2, _VIEW_ERROR), stderr
    assert verdicts(report) == {("PFL203", 47, "not-run")}
    assert report["notes"][-1].endswith(" s) to tell the code's own error from a parallel one: inconclusive, the script "
                                        "still ran 2 ranks")
    assert report["unexplained"][0]["parallel_only"] is False


def _record(*events: dict) -> RunRecord:
    record = RunRecord("/p/train.py", list(events), "", 1, False)
    record.lines = {"/p/train.py": {event["user_frame"]["line"] for event in events if event.get("user_frame")}}
    return record


def test_a_control_run_that_fails_before_the_line_keeps_the_reason() -> None:
    """Alone, the run failed earlier, at another line: it says nothing of the line the parallel run failed at."""
    from pitfall_lint.harness.control import Alone, judge  # here: the other tests show what a version without it does

    error = {"event": "error", "type": "RuntimeError", "message": "shape mismatch",
             "user_frame": {"file": "/p/train.py", "line": 40, "function": "main"}}
    earlier = {"event": "error", "type": "ValueError", "message": "needs 2 devices",
               "user_frame": {"file": "/p/train.py", "line": 12, "function": "main"}}
    stop = Stop("the run failed at /p/train.py:40: RuntimeError: shape mismatch", error=0)
    told = judge(stop, _record(error), _record(earlier), Stop("the run failed at /p/train.py:12: ValueError: needs 2 "
                                                              "devices", "a hint", error=0), Alone.of(True, 2), 1.5)
    assert (told.stop, told.parallel_only) == (stop, False)
    assert told.note == ("verify ran it again on one rank (--nproc 1, a world size of 1; 1.5 s) to tell the code's own "
                         "error from a parallel one: inconclusive, it failed before getting past /p/train.py:40: the run "
                         "failed at /p/train.py:12: ValueError: needs 2 devices")


def test_a_control_run_that_the_timeout_cut_short_names_a_longer_one() -> None:
    """pytorch-distributed's DDP script spent 45 of its 50 s on a first run and one at batch 8: the control run alone
    had 5 s, too few to reach the failing line, and the reason had no next step. A longer --timeout is that step."""
    from pitfall_lint.harness.control import Alone, judge

    error = {"event": "error", "type": "RuntimeError", "message": "view size is not compatible",
             "user_frame": {"file": "/p/train.py", "line": 40, "function": "accuracy"}}
    stop = Stop("the run failed at /p/train.py:40: RuntimeError: view size is not compatible", error=0)
    control = RunRecord("/p/train.py", [], "", 1, False)
    timed_out = Stop("the run did not finish within 5 s (rank 0 was at /p/train.py:12 in main)", "raise --timeout or lower --steps")
    told = judge(stop, _record(error), control, timed_out, Alone.of(True, 2), 5.2)
    assert told.stop == Stop(
        stop.text, "run verify again with a longer --timeout: the control run on one rank had 5 s, too few to reach "
        "/p/train.py:40, and on one rank the run tells the code's own error from a parallel one", 0,
    )
    assert told.note.endswith("inconclusive, it stopped before reaching /p/train.py:40: the run did not finish within 5 s "
                              "(rank 0 was at /p/train.py:12 in main)")


def test_a_function_stored_on_the_module_fails_only_under_data_parallel(tmp_path: Path) -> None:
    """minGPT's Block keeps `lambda x: m.c_proj(m.c_fc(x))` with `m = self.mlp`: no rule flags it, and replica 1 runs
    the original's MLP. Alone, the model runs past that line: a parallel failure, named with the line to fix; with a
    method instead, the model runs clean."""
    folder = project(tmp_path, "closure_block")
    returncode, report, stderr = run_verify(folder / "model.py", cwd=folder)
    stop = (
        "the run failed at model.py:34: RuntimeError: Expected all tensors to be on the same device, but found at least "
        "two devices, cuda:1 and cuda:0! [pitfall-lint DataParallel emulation: replica 1 called linear() on "
        "'h.0.mlp.c_fc.weight', a tensor of the original module]; it fails only under 2-way DataParallel: on one device "
        "the run gets past model.py:34, so this is a parallel failure that no finding explains: replica 1 ran `<lambda>` "
        "(stored in `h.0.mlpf`, made at model.py:34), bound to the original ModuleDict, on the original's parameters; "
        "fix model.py:34 so that each replica uses its own modules (make the function a method of the module, called "
        "through `self`)"
    )
    assert (returncode, report["findings"], report["stop"]) == (2, [], stop), stderr
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'model.py'}: {stop}"
    (failure,) = report["unexplained"]
    assert (failure["user_frame"]["line"], failure["parallel_only"]) == (34, True)
    assert report["notes"][-1].endswith(" s) to tell the code's own error from a parallel one: it got past model.py:34")
    assert report["outcome"] == ("failed (exit code 1); no process left behind; run again on one device, finished "
                                 "without a failure; no process left behind")
    # The fixed twin: the MLP's forward a method, each replica runs its own modules.
    returncode, report, stderr = run_verify(folder / "model_fixed.py", cwd=folder)
    assert (returncode, report["findings"], report["unexplained"], report["stop"]) == (0, [], [], None), stderr
    assert_finished(report)


def test_the_text_report_names_a_parallel_failure_as_such() -> None:
    report = VerifyReport("model.py", Plan("model", "it defines modules"), "model: 2-way DataParallel")
    frame = {"file": "/p/model.py", "line": 34, "function": "<lambda>", "code": "self.mlpf = lambda x: m.c_fc(x)"}
    # The type is said once, though a replica's error carries it in its message too.
    report.unexplained = [{"type": "RuntimeError", "message": "RuntimeError: Expected all tensors to be on the same device",
                           "user_frame": frame, "rank": None, "parallel_only": True}]
    out = io.StringIO()
    write_text(report, out)
    assert out.getvalue().splitlines()[-3:] == [
        "unexplained parallel failure: RuntimeError: Expected all tensors to be on the same device",
        "    at /p/model.py:34 in <lambda>: self.mlpf = lambda x: m.c_fc(x)",
        "No finding with a runtime probe in this file.",
    ]


def test_data_a_message_names_that_is_absent_is_the_users_to_give(tmp_path: Path) -> None:
    folder = project(tmp_path, "pretokenized_data")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    stop = ("the run failed at tokens.py:22: AssertionError: No bin files found in data/stories_pretok; the data or file "
            "it reads is missing here: data/stories_pretok; give its location with the script's own options after `--`")
    assert (returncode, report["stop"]) == (2, stop), stderr
    # Missing data is no question for a control run.
    assert report["outcome"] == "failed (exit code 1); no process left behind"
    assert not any(note.startswith("verify ran it again") for note in report["notes"])
