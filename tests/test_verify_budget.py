"""The step budget ends the run: a script of 200 epochs, one batch each once the budget is spent, is ended by verify
when its processes step on through lines they already ran, and reported as having run to the end of its budget, not
as stopped by the timeout (the shapes of tutorial repositories' DataParallel and mp.spawn scripts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_verify import verdicts
from test_verify_realistic import project, run_verify, snapshot

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")

_FURTHER = "to go further, lower the script's own options after `--`: --epochs (now 200); or --steps 0 and a longer --timeout"


def test_a_script_of_many_epochs_with_an_evaluation_each_runs_to_the_end_of_its_budget(tmp_path: Path) -> None:
    folder = project(tmp_path, "many_epochs_dp")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "dataparallel.py", "--timeout", "30", cwd=folder)
    assert returncode == 1, stderr
    # The checkpoint of every epoch was reached, and judged.
    assert verdicts(report) == {("PFL203", 70, "confirmed")}
    assert (report["outcome"], report["stop"], report["unexplained"]) == (
        "ran to the end of its step budget; no process left behind", None, [])
    assert report["notes"][-1] == ("the step budget ended the run: after its 2 optimizer steps (--steps 2), the program "
                                   f"went on through lines it had already run; {_FURTHER}")
    assert "error:" not in stderr
    assert snapshot(folder) == before


def test_lines_after_the_epochs_are_not_run_for_the_budget_with_the_option_that_reaches_them(tmp_path: Path) -> None:
    folder = project(tmp_path, "many_epochs_spawn")
    returncode, report, stderr = run_verify(folder / "mnmc_ddp_mp.py", "--preview", "--timeout", "30", cwd=folder)
    stop = ("the step budget ended the run: after each of its 2 processes made its 2 optimizer steps (--steps 2), they "
            f"went on through lines they had already run; {_FURTHER}")
    assert returncode == 2, stderr
    assert (report["outcome"], report["stop"], report["unexplained"]) == (
        "ran to the end of its step budget; no process left behind", stop, [])
    # The weights are saved once the 200 epochs are over: half the timeout was given to reach them.
    assert verdicts(report) == {("PFL201", 66, "not-run"), ("PFL203", 66, "not-run")}
    assert {f["evidence"]["mechanism"] for f in report["findings"]} == {f"line 66 never ran: {stop}"}
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'mnmc_ddp_mp.py'}: {stop}; its processes were killed"



# --- no optimizer step at the script's own batch size of 3200 images: run again with a small one ---------------------


def test_a_run_with_no_step_at_the_default_batch_size_runs_again_with_a_small_one(tmp_path: Path) -> None:
    folder = project(tmp_path, "large_batch_spawn")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "multiprocessing_distributed.py", "--preview", "--timeout", "60",
                                            cwd=folder)
    assert returncode == 1, stderr
    # The checkpoint of the first epoch, reached at 8 images a batch (4 per process, as the script divides them).
    assert verdicts(report) == {("PFL201", 65, "confirmed"), ("PFL203", 65, "confirmed")}
    assert report["notes"][0] == ("verify ran the script again with --batch-size 8: no optimizer step had finished 9 s "
                                  "after the first batches were asked for, at --batch-size 3200 (the script's default) "
                                  "on this machine")
    assert report["unexplained"] == []
    assert snapshot(folder) == before



@pytest.mark.parametrize("given", [("-b", "3200"), ("--batch-size", "64"), ("--batch-size=64",), ("--batch", "64")])
def test_a_batch_size_the_user_gave_is_never_changed(given: tuple[str, ...]) -> None:
    from pitfall_lint.harness.reasons import batch_to_lower

    bound = {"option": "--batch-size", "value": 3200, "spellings": ["-b", "--batch-size"]}
    assert batch_to_lower([bound], given) is None
    assert batch_to_lower([bound], ("--epochs", "1")) == bound
    assert batch_to_lower([{**bound, "value": 8}], ()) is None  # small already
