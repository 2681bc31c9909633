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
