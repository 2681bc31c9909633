"""The run's enclosure: nothing written into the user's folders (overlay, or a scratch copy where namespaces are
not permitted), and nothing left running or on disk whatever kills verify (SIGTERM, SIGKILL), checked with `ps`."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pitfall_lint.harness import isolation
from test_verify import verdicts
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


def _project_that_writes(tmp_path: Path) -> Path:
    """A project whose script overwrites one file, deletes another and creates a folder of its own."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[project]\nname = 'w'\n")
    (folder / "writes.py").write_text(WRITES)
    (folder / "notes.txt").write_text("original")
    (folder / "old.txt").write_text("keep me")
    return folder


@pytest.mark.parametrize("namespaces", ["permitted", "not permitted"])
def test_writes_never_reach_the_tree_and_are_listed(tmp_path: Path, namespaces: str) -> None:
    folder = _project_that_writes(tmp_path)
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


def test_a_project_in_the_home_folder_is_copied_and_the_home_folder_replaced(tmp_path: Path) -> None:
    folder = _project_that_writes(tmp_path)
    before = snapshot(folder)
    env = {"HOME": str(tmp_path), "PITFALL_LINT_NO_NAMESPACES": "1"}
    returncode, report, stderr = run_verify(folder / "writes.py", cwd=folder, env=env)
    assert returncode == 0, stderr
    assert report["files"] == f"a scratch copy of {folder}, with an empty home folder (namespaces are not permitted here)"
    assert report["written"] == [str(folder / "notes.txt"), str(folder / "runs" / "exp1" / "events.log")]
    assert snapshot(folder) == before


def test_writes_above_the_project_and_to_absolute_paths_never_reach_the_tree(tmp_path: Path) -> None:
    # A flat script in src/ with no project marker: its log goes to ../result, its weights to an absolute path
    # outside the project; neither folder exists yet. The whole parent folder is listed, sizes and mtimes.
    folder = project(tmp_path, "flat_writes")
    checkpoints = tmp_path / "checkpoints"
    before = snapshot(tmp_path)
    returncode, report, stderr = run_verify(Path("train_DP.py"), "--", "--epochs", "1", "--save_dir", str(checkpoints),
                                            cwd=folder / "src")
    assert returncode == 1, stderr
    assert verdicts(report) == {("PFL203", 53, "confirmed"), ("PFL212", 56, "confirmed")}
    assert (report["stop"], report["unexplained"]) == (None, [])
    assert snapshot(tmp_path) == before
    assert report["files"] == (f"copy-on-write overlay on {Path.home()}, {folder / 'src'}, and every other folder the run "
                               f"may write to (in {tempfile.gettempdir()}, the ones that hold these)")
    # The weights torch.save writes are verify's own checkpoints (redirected); the rest is listed as written.
    assert report["written"] == [str(checkpoints / "args.txt"), str(folder / "result" / "log_train_DP.txt")]


def _processes_mentioning(marker: str) -> list[str]:
    listing = subprocess.run(["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listing.splitlines()[1:] if marker in line and " Z" not in line and "ps -eo" not in line]


def _scratch_folders(temporary: Path) -> list[str]:
    return glob.glob(os.path.join(temporary, "pitfall-lint-verify-*"))


@pytest.fixture
def outside_the_tree() -> Iterator[Path]:
    """A folder of /tmp that holds none of the run's folders: the one place a run writes to for real."""
    folder = Path(tempfile.mkdtemp(prefix="pitfall-lint-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("kill", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killing_verify_leaves_no_process_and_no_scratch_folder(tmp_path: Path, kill: signal.Signals,
                                                                  outside_the_tree: Path) -> None:
    folder = project(tmp_path, "launch")
    pids, temporary = outside_the_tree, tmp_path / "tmp"  # the ranks' pid files must reach the test
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


LEAVES_LOCKED_FOLDERS = '''"""Unpacks a read-only tree into its temporary folder, one folder of it of mode 000 (as an overlay's work folder)."""
import os
import tempfile

data = os.path.join(tempfile.mkdtemp(), "data")
os.makedirs(os.path.join(data, "locked"))
with open(os.path.join(data, "labels.txt"), "w") as handle:
    handle.write("0 1")
os.chmod(os.path.join(data, "locked"), 0)
os.chmod(data, 0o555)
'''


def _private_folders() -> list[str]:
    """The folders above this Python and its import path that only their owner may enter (a Python under /root)."""
    found = set()
    for path in {os.path.realpath(p) for p in (sys.executable, sys.prefix, sys.base_prefix, *sys.path) if p}:
        while path != "/":
            path = os.path.dirname(path)
            if not os.stat(path).st_mode & stat.S_IXOTH:
                found.add(path)
    return sorted(found, key=len)


def _as_user(uid: int, gid: int, layers: Path) -> Callable[[], None]:
    """preexec_fn: the child, in a mount namespace of its own where the private folders above this Python are open
    to everyone (an overlay with an upper layer of mode 755 on each), becomes the user."""
    private = _private_folders()
    for index in range(len(private)):
        (layers / str(index) / "upper").mkdir(parents=True, mode=0o755)
        (layers / str(index) / "work").mkdir(parents=True)

    def become() -> None:
        if private:
            isolation.unshare(isolation.CLONE_NEWNS)
            isolation.make_mounts_private()
            for index, folder in enumerate(private):
                isolation.overlay(folder, str(layers / str(index) / "upper"), str(layers / str(index) / "work"))
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return become


@pytest.fixture
def unwritable_folders() -> Iterator[Path]:
    """Folders of root's that another user may read but not write, outside pytest's private temporary folder."""
    base = Path(tempfile.mkdtemp(prefix="pitfall-lint-user-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_user_without_namespaces_in_a_folder_it_cannot_write_gets_one_sentence_and_nothing_left(
    unwritable_folders: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to run verify as another user (nobody)")
    nobody = pwd.getpwnam("nobody")
    base = unwritable_folders
    folder, home, temporary = base / "proj", base / "home", base / "tmp"
    for made in (folder, home, temporary):
        made.mkdir(mode=0o755)
    os.chown(temporary, nobody.pw_uid, nobody.pw_gid)  # the user's own temporary folder, empty
    (folder / "unpacks.py").write_text(LEAVES_LOCKED_FOLDERS)
    as_nobody = _as_user(nobody.pw_uid, nobody.pw_gid, base / "layers")
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(temporary), "PITFALL_LINT_NO_NAMESPACES": "1"}
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "verify", "unpacks.py"], cwd=folder, env=env, preexec_fn=as_nobody,
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[4] == (
        f"  files: a scratch copy of {folder}, with an empty home folder (namespaces are not permitted here); the run "
        "wrote nothing there"
    )
    assert os.listdir(temporary) == []
