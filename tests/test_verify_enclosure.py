"""The run's enclosure: nothing written into the user's folders (overlay, or a scratch copy where namespaces are
not permitted), and nothing left running or on disk whatever kills verify (SIGTERM, SIGKILL), checked with `ps`."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_verify_realistic import project, run_verify, snapshot

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")

WRITES = '''"""Writes next to itself, into a new folder, and deletes a file of the tree."""
import os
import torch
os.makedirs("runs/exp1", exist_ok=True)
with open("runs/exp1/events.log", "w") as handle:
    handle.write("step 1")
with open("notes.txt", "a") as handle:
    handle.write("appended")
os.remove("old.txt")
torch.save({"w": torch.ones(2)}, "model.pt")
'''


@pytest.mark.parametrize("namespaces", ["permitted", "not permitted"])
def test_writes_never_reach_the_tree_and_are_listed(tmp_path: Path, namespaces: str) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[project]\nname = 'w'\n")
    (folder / "writes.py").write_text(WRITES)
    (folder / "notes.txt").write_text("original")
    (folder / "old.txt").write_text("keep me")
    before = snapshot(folder)
    env = {"PITFALL_LINT_NO_NAMESPACES": "1"} if namespaces == "not permitted" else {}
    returncode, report, stderr = run_verify(folder / "writes.py", cwd=folder, env=env)
    assert returncode == 0, stderr
    assert snapshot(folder) == before
    assert (folder / "notes.txt").read_text() == "original"
    if namespaces == "permitted":
        assert report["files"].startswith("copy-on-write overlay on ")
        deleted = [str(folder / "old.txt") + " (deleted)"]
    else:
        assert report["files"].startswith("a scratch copy of ")
        deleted = []  # a copy shows what was written; a deletion leaves nothing to list
    assert report["written"] == sorted([str(folder / "notes.txt"), str(folder / "runs" / "exp1" / "events.log"), *deleted])


def _processes_mentioning(marker: str) -> list[str]:
    listing = subprocess.run(["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listing.splitlines()[1:] if marker in line and " Z" not in line and "ps -eo" not in line]


def _scratch_folders(temporary: Path) -> list[str]:
    return glob.glob(os.path.join(temporary, "pitfall-lint-verify-*"))


@pytest.mark.parametrize("kill", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killing_verify_leaves_no_process_and_no_scratch_folder(tmp_path: Path, kill: signal.Signals) -> None:
    folder = project(tmp_path, "launch")
    pids, temporary = tmp_path / "pids", tmp_path / "tmp"
    pids.mkdir()
    temporary.mkdir()
    verify = subprocess.Popen(
        [sys.executable, "-m", "pitfall_lint", "verify", str(folder / "hangs_in_ddp.py"), "--timeout", "300"],
        cwd=folder, env={**os.environ, "HANG_PID_DIR": str(pids), "TMPDIR": str(temporary)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while len(list(pids.glob("*.pid"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(list(pids.glob("*.pid"))) == 2, "both ranks started"
    assert len(_scratch_folders(temporary)) == 1
    assert _processes_mentioning(str(folder / "hangs_in_ddp.py"))  # ps sees the run
    verify.send_signal(kill)
    verify.wait(timeout=60)
    if kill == signal.SIGTERM:
        assert verify.returncode == 2
        assert verify.stderr.read().strip().splitlines()[-1] == "error: interrupted; the run's processes were stopped"
    deadline = time.monotonic() + 30
    while _processes_mentioning(str(folder / "hangs_in_ddp.py")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_mentioning(str(folder / "hangs_in_ddp.py")) == []
    while _scratch_folders(temporary) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _scratch_folders(temporary) == []
