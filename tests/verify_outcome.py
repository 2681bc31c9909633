"""How a verify run that reached its end is told apart from one that failed, in the tests' asserts."""

from __future__ import annotations

from typing import Any

FINISHED = "finished without a failure; no process left behind"
_TEARDOWN = "after its script had ended, in the interpreter's teardown"


def assert_finished(report: dict[str, Any]) -> None:
    """gloo's threads can kill a rank in the interpreter's teardown, after every line of the script ran (CI saw it
    once, on PFL205's fixed fixture): torch's launcher then exits 1, and verify says so in a note, with no stop and no
    failure. That run finished too; any other outcome did not."""
    if report["outcome"] == "failed (exit code 1); no process left behind" and report["stop"] is None:
        assert any(_TEARDOWN in note for note in report["notes"]), report["notes"]
        return
    assert report["outcome"] == FINISHED, (report["outcome"], report["notes"])
