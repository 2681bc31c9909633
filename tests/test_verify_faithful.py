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
