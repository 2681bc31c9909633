"""Failures that no finding explains, told apart: data an error message names and that is absent is the user's to give
(the shape of llama2.c's shards)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_verify_realistic import project, run_verify

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")


def test_data_a_message_names_that_is_absent_is_the_users_to_give(tmp_path: Path) -> None:
    folder = project(tmp_path, "pretokenized_data")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    stop = ("the run failed at tokens.py:22: AssertionError: No bin files found in data/stories_pretok; the data or file "
            "it reads is missing here: data/stories_pretok; give its location with the script's own options after `--`")
    assert (returncode, report["stop"]) == (2, stop), stderr
