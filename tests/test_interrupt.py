"""Ctrl-C during `check`: `error: interrupted` and exit 130 as in Ruff, no traceback from any worker, no process
left, and under --fix every file either the old one or the fixed one.

Each run is a real process in a session of its own, interrupted once it is at work (its workers started, or its
first file fixed). A run that ended before the signal landed proves nothing: it is tried again on a tree twice as
large, and the test fails rather than pass without one interrupted mid-run.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from marks import REPO

SAVE = "import torch\nimport torch.distributed as dist\n\n\ndef save_{i}(state):\n    dist.init_process_group('gloo')\n    torch.save(state, 'c{i}.pt')\n"
SPAWN = (REPO / "fixtures" / "PFL301-missing-main-guard" / "bad.py").read_bytes()
ATTEMPTS = 4
Send = Callable[[int], None]


def _to_the_group(pid: int) -> None:
    os.killpg(pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process of the foreground group


def _to_the_parent(pid: int) -> None:
    os.kill(pid, signal.SIGINT)


def _live_processes_in_group(group: int) -> list[int]:
    """From /proc, zombies aside: what still runs of the group (the run's parent and its workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, process_group = stat.read_text().rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue  # ended meanwhile
        if int(process_group) == group and state != "Z":
            found.append(int(stat.parent.name))
    return found


def _start_check(folder: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", *args],
        cwd=folder, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _interrupt_at_work(run: subprocess.Popen[str], at_work: Callable[[], bool], send: Send) -> bool:
    """Sends Ctrl-C as soon as the run is at work; False when it ended first."""
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline:
        if at_work():
            send(run.pid)
            return True
        time.sleep(0.02)
    return False


def _workers_started(run: subprocess.Popen[str]) -> bool:
    return len(_live_processes_in_group(run.pid)) >= 2


def _one_fixed(paths: list[Path]) -> bool:
    return any(path.read_bytes() != SPAWN for path in paths)


def _write_tree(folder: Path, files: int) -> None:
    folder.mkdir()
    (folder / "pyproject.toml").write_text("")
    body = "".join(SAVE.format(i=i) for i in range(150))
    for number in range(files):
        (folder / f"module_{number}.py").write_text(body)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process group from /proc")
@pytest.mark.parametrize("send", [_to_the_group, _to_the_parent], ids=["group", "parent"])
def test_ctrl_c_during_a_check_exits_130_with_one_line_and_no_process_left(tmp_path: Path, send: Send) -> None:
    for attempt in range(ATTEMPTS):
        folder = tmp_path / f"tree{attempt}"
        _write_tree(folder, 100 * 2**attempt)
        run = _start_check(folder, ".")
        working = _interrupt_at_work(run, functools.partial(_workers_started, run), send)
        stdout, stderr = run.communicate(timeout=300)
        if working and stdout == "":  # no report written: the signal landed before the end
            break
    else:
        pytest.fail(f"no run was interrupted mid-run in {ATTEMPTS} tries; the last: {run.returncode}, {stderr!r}")
    assert (run.returncode, stderr) == (130, "error: interrupted\n")
    assert _live_processes_in_group(run.pid) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process group from /proc")
def test_ctrl_c_during_fix_leaves_each_file_old_or_fixed(tmp_path: Path) -> None:
    pytest.importorskip("libcst")
    from pitfall_lint.fix import fix_source
    from pitfall_lint.rules import all_rules

    fixed = fix_source("train.py", SPAWN, all_rules(), False).fixed
    assert fixed != SPAWN
    for attempt in range(ATTEMPTS):
        folder = tmp_path / f"tree{attempt}"
        folder.mkdir()
        paths = [folder / f"train_{number}.py" for number in range(60 * 2**attempt)]
        for path in paths:
            path.write_bytes(SPAWN)
            path.chmod(0o751)
        run = _start_check(folder, "--fix", ".")
        working = _interrupt_at_work(run, functools.partial(_one_fixed, paths), _to_the_group)
        stdout, stderr = run.communicate(timeout=300)
        contents = [path.read_bytes() for path in paths]
        if working and SPAWN in contents:  # a file left to fix: the signal landed while fixing
            break
    else:
        pytest.fail(f"no run was interrupted while fixing in {ATTEMPTS} tries; the last: {run.returncode}, {stderr!r}")
    assert (run.returncode, stdout, stderr) == (130, "", "error: interrupted\n")
    assert set(contents) == {SPAWN, fixed}
    assert {path.stat().st_mode & 0o777 for path in paths} == {0o751}
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in paths)  # no temporary file left
    assert _live_processes_in_group(run.pid) == []


WORKER_SIGNALS_BEFORE_IT_STARTS = r"""
import os, signal, sys
from pitfall_lint import pool
from pitfall_lint.rules import all_rules

started = pool._start_worker


def ctrl_c_while_starting(*args):
    # The first worker sends Ctrl-C to the whole group before it could ignore it, as a terminal would at that moment.
    try:
        os.close(os.open("sent", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        pass
    else:
        os.killpg(0, signal.SIGINT)
    started(*args)


pool._start_worker = ctrl_c_while_starting
paths = []
for number in range(48):
    paths.append(f"module_{number}.py")
    with open(paths[-1], "w") as handle:
        handle.write("import torch\n")
try:
    list(pool.check_files(paths, all_rules(), 2))
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process group from /proc")
def test_ctrl_c_while_the_workers_start_reaches_the_parent_alone(tmp_path: Path) -> None:
    """A worker it reached before it ignored SIGINT printed a KeyboardInterrupt traceback (and the pool, starting a
    new one in its place while it was being stopped, could leave a worker behind)."""
    run = subprocess.Popen(
        [sys.executable, "-c", WORKER_SIGNALS_BEFORE_IT_STARTS],
        cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    stdout, stderr = run.communicate(timeout=120)
    assert (run.returncode, stdout, stderr) == (0, "interrupted\n", "")
    assert (tmp_path / "sent").exists()
    assert _live_processes_in_group(run.pid) == []


def test_an_error_raised_while_ctrl_c_unwinds_is_the_interrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """libcst's clean-up raises a KeyError of its own when Ctrl-C cuts its code generation short (seen under --fix):
    the interrupt, not a bug of ours."""
    from click.testing import CliRunner

    from pitfall_lint import checking, cli

    def cut_short(*args: object) -> None:
        try:
            raise KeyboardInterrupt
        finally:
            raise KeyError("the end node")

    (tmp_path / "train.py").write_text("import torch\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(checking, "check_by_rules", cut_short)  # the command imports it when it runs
    result = CliRunner().invoke(cli.main, ["check", "train.py"], catch_exceptions=False)
    assert (result.exit_code, result.stdout, result.stderr) == (130, "", "error: interrupted\n")
