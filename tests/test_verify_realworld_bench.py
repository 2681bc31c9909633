"""bench/verify_realworld.py: how a run's ending is counted, on the reasons verify gives real scripts."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("verify_realworld", REPO / "bench" / "verify_realworld.py")
verify_realworld = importlib.util.module_from_spec(spec)
spec.loader.exec_module(verify_realworld)


def test_a_pythonpath_command_line_is_the_users_next_step() -> None:
    """minGPT's chargpt.py imports the repository's own package; verify's reason ends in the line that runs it."""
    reason = ("the script needs the module 'mingpt' at chargpt.py:12; mingpt is the repository's own package "
              "(/repo/minGPT/mingpt); Python looks for it in the script's folder, not in /repo/minGPT: "
              "PYTHONPATH=/repo/minGPT pitfall-lint verify chargpt.py")
    assert verify_realworld._judge(2, {"findings": []}, f"error: chargpt.py: {reason}\n") == (
        "no probed finding", reason, "environment")


def test_a_failure_that_names_no_step_stays_without_one() -> None:
    reason = "the run failed at main.py:191: DistNetworkError: address already in use"
    assert verify_realworld._judge(2, {"findings": []}, f"error: main.py: {reason}\n") == (
        "no probed finding", reason, "no next step")


def test_the_codes_own_error_told_by_a_control_run_names_the_line_to_fix() -> None:
    reason = ("the run failed at dataparallel.py:375: RuntimeError: view size is not compatible with input tensor's size "
              "and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.; it "
              "fails the same way on one device, without DataParallel: the code's own error, not a parallel one; fix "
              "dataparallel.py:375 and run verify again")
    report = {"findings": [], "unexplained": [{"type": "RuntimeError", "parallel_only": False}]}
    assert verify_realworld._judge(2, report, f"error: dataparallel.py: {reason}\n") == (
        "no probed finding", reason, "environment")


def test_a_failure_only_in_parallel_is_counted_on_its_own() -> None:
    reason = ("the run failed at model.py:88: RuntimeError: Expected all tensors to be on the same device; it fails only "
              "under 2-way DataParallel: on one device the run gets past model.py:88, so this is a parallel failure that "
              "no finding explains; fix model.py:88 so that each replica uses its own modules (make the function a "
              "method of the module, called through `self`)")
    report = {"findings": [{"code": "PFL105", "line": 280, "status": "not-run"}],
              "unexplained": [{"type": "RuntimeError", "parallel_only": True}]}
    assert verify_realworld._judge(2, report, f"error: model.py: {reason}\n") == (
        "PFL105:280 not-run", reason, "parallel failure")
    assert "parallel failure" in verify_realworld.CATEGORIES


def test_a_control_run_cut_short_names_a_longer_timeout() -> None:
    reason = ("the run failed at multiprocessing_distributed.py:397: RuntimeError: view size is not compatible; run "
              "verify again with a longer --timeout: the control run on one rank had 5 s, too few to reach "
              "multiprocessing_distributed.py:397, and on one rank the run tells the code's own error from a parallel one")
    report = {"findings": [], "unexplained": [{"type": "RuntimeError", "parallel_only": False}]}
    assert verify_realworld._judge(2, report, f"error: multiprocessing_distributed.py: {reason}\n") == (
        "no probed finding", reason, "environment")
