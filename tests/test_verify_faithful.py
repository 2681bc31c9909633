"""verify runs the user's program as written: what the script sees of its own start (sys.argv) is what
`python PATH` gives it, on scripts shaped like the real ones the real-script bench (bench/verify_realworld.py) met."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_verify import verdicts
from test_verify_realistic import project, run_verify, snapshot

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")


# --- a flat DataParallel template that names its log and weights after sys.argv[0] (suiyizhao/Template's shape) ----


def test_the_script_sees_its_path_as_typed_in_sys_argv(tmp_path: Path) -> None:
    folder = project(tmp_path, "argv_named_logs")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(Path("train_DP.py"), "--", "--epochs", "1", cwd=folder / "src")
    assert returncode == 1, stderr
    assert verdicts(report) == {("PFL212", 55, "confirmed")}
    assert report["findings"][0]["evidence"]["message"] == "'DataParallel' object has no attribute 'classifier'"
    # `open('../result/log_' + sys.argv[0][0:-3] + '.txt', 'w')` opened the log `python train_DP.py` opens.
    assert report["written"] == [str(folder / "result" / "log_train_DP.txt")]
    assert (report["stop"], report["unexplained"]) == (None, [])
    assert snapshot(folder) == before


# --- an ImageNet-style script whose first batch outlasts the run: --steps cannot help, the script's -b can -----------


def test_a_run_stopped_before_its_first_step_names_the_batch_size_option(tmp_path: Path) -> None:
    folder = project(tmp_path, "slow_first_step")
    # The batch size given by the user: verify runs it as given (one it chose itself would run again smaller).
    returncode, report, stderr = run_verify(folder / "train.py", "--timeout", "30", "--", "-b", "256", cwd=folder)
    stop = ("the run did not finish within 30 s, and no optimizer step did (a process was at train.py:24 in __getitem__); "
            "lower the work per step with the script's own options after `--`: --batch-size (now 256); or raise --timeout")
    assert (returncode, report["outcome"], report["stop"], report["unexplained"]) == (
        2, "stopped after 30 s (timeout); no process left behind", stop, [])
    assert verdicts(report) == {("PFL203", 49, "not-run")}
    assert report["findings"][0]["evidence"]["mechanism"] == f"line 49 never ran: {stop}"
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'train.py'}: {stop}; its processes were killed"


# --- a DDP script whose ranks crash in native code: torch's launcher reports only a signal ----------------------------


def test_a_rank_killed_by_a_signal_is_named_with_where_it_crashed(tmp_path: Path) -> None:
    folder = project(tmp_path, "native_crash")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    # Both ranks crash at the same line; torch's launcher names the first it saw.
    stops = {f"rank {rank} was killed by SIGSEGV at train.py:16 in fused_scale_: a crash in native code, with no Python "
             "error; run the script once without verify: a crash there too is the code's or a compiled extension's; "
             "none there is verify's" for rank in (0, 1)}
    assert (returncode, report["outcome"]) == (2, "failed (exit code 1); no process left behind"), stderr
    assert report["stop"] in stops
    assert verdicts(report) == {("PFL203", 34, "not-run")}
    assert report["findings"][0]["evidence"]["mechanism"] == f"line 34 never ran: {report['stop']}"
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'train.py'}: {report['stop']}"


# --- a DDP script whose compiled extension crashes at the interpreter's exit, after every line of the script ran ------


def test_a_rank_killed_after_its_script_ended_is_a_note_not_the_runs_failure(tmp_path: Path) -> None:
    """gloo's threads meeting a peer that already left, or a native library's exit, can kill a rank in the
    interpreter's teardown: torch's launcher then reports the run failed, but nothing the script does was cut short."""
    folder = project(tmp_path, "teardown_crash")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["outcome"]) == (1, "failed (exit code 1); no process left behind"), stderr
    assert verdicts(report) == {("PFL203", 25, "confirmed")}
    assert (report["stop"], report["unexplained"]) == (None, [])
    crashed = {f"rank {rank} was killed by SIGABRT at profiler.py:15 in __del__ after its script had ended, in the "
               "interpreter's teardown (native code): torch's launcher reports the run failed; no finding is about it "
               "and no line of the program was cut short, so verify does not count it as the run's failure"
               for rank in (0, 1)}
    assert [n for n in report["notes"] if "teardown" in n][0] in crashed
