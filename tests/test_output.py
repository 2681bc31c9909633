"""Output a person wants to read: source with carets and hints, colour only on a terminal, statistics, a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main

SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\ntorch.save({}, 'd.pt')\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "save.py").write_text(SAVE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> str:
    # --preview: PFL201 is a preview rule; these tests use its findings only as findings to print.
    return CliRunner().invoke(main, ["check", "--no-cache", "--preview", *args], catch_exceptions=False).stdout


def test_show_source_draws_the_span_and_the_hint(project: Path) -> None:
    from pitfall_lint.rules.unguarded_torch_save import UnguardedTorchSave

    lines = run("--show-source", "save.py").splitlines()
    assert lines[:6] == [
        lines[0],
        "  |",
        "4 | torch.save({}, 'c.pt')",
        "  | ^^^^^^^^^^^^^^^^^^^^^^ PFL201",
        f"  = help: {UnguardedTorchSave.info.hint}",
        "",
    ]
    assert UnguardedTorchSave.info.hint


def test_statistics_counts_per_rule(project: Path) -> None:
    assert run("--statistics", "save.py") == "    2\tPFL201\tunguarded-torch-save\n"


def test_output_file(project: Path) -> None:
    assert run("--output-file", "report.txt", "save.py") == ""
    assert (project / "report.txt").read_text().splitlines()[-2:] == [
        "Found 2 diagnostics in 1 of 1 file checked.",
        "2 unsafe fixes available with `--fix --unsafe-fixes`.",
    ]


def _in_a_terminal(cwd: Path, env: dict[str, str]) -> str:
    """Runs the CLI with a pseudo-terminal as stdout, the way a person sees it."""
    import pty

    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", "--preview", "save.py"],
        cwd=cwd, stdout=secondary, stderr=subprocess.DEVNULL, env=env,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait()
    os.close(primary)
    return b"".join(chunks).decode()


def test_colour_only_on_a_terminal_and_never_with_no_color(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert "\x1b[" in _in_a_terminal(project, env)
    assert "\x1b[" not in _in_a_terminal(project, {**env, "NO_COLOR": "1"})
    assert "\x1b[" not in run("save.py")  # redirected: no colour


# --- what --fix would fix: Ruff's [*], the summary's count, JSON's `fix` -----------------------------------------

SPAWN = "import torch.multiprocessing as mp\ndef work(rank):\n    pass\nmp.spawn(work, nprocs=2)\n"


@pytest.fixture
def fixable(project: Path) -> Path:
    """save.py: two unsafe fixes (PFL201); spawn.py: a safe one (PFL301); a notebook's save, which no fix rewrites."""
    from test_notebooks import notebook

    (project / "spawn.py").write_text(SPAWN)
    (project / "nb.ipynb").write_bytes(notebook(SAVE))
    return project


def heads(text: str) -> list[str]:
    """Each finding up to its message (messages start with a quoted name), and the summary lines whole."""
    return [line.split(" `", 1)[0] if ": PFL" in line else line for line in text.splitlines()]


def test_safe_fixes_are_marked_and_counted_and_unsafe_ones_said_to_need_unsafe_fixes(fixable: Path) -> None:
    assert heads(run(".")) == [
        "nb.ipynb:cell 1:4:1: PFL201",
        "nb.ipynb:cell 1:5:1: PFL201",
        "save.py:4:1: PFL201",
        "save.py:5:1: PFL201",
        "spawn.py:4:1: PFL301 [*]",
        "Found 5 diagnostics in 3 of 3 files checked.",
        "[*] 1 fixable with `--fix` (2 unsafe fixes available with `--fix --unsafe-fixes`).",
    ]


def test_with_unsafe_fixes_the_unsafe_ones_are_marked_too(fixable: Path) -> None:
    assert heads(run("--unsafe-fixes", "."))[2:] == [
        "save.py:4:1: PFL201 [*]",
        "save.py:5:1: PFL201 [*]",
        "spawn.py:4:1: PFL301 [*]",
        "Found 5 diagnostics in 3 of 3 files checked.",
        "[*] 3 fixable with `--fix`.",
    ]


def test_only_unsafe_fixes(fixable: Path) -> None:
    assert heads(run("save.py"))[-2:] == [
        "Found 2 diagnostics in 1 of 1 file checked.",
        "2 unsafe fixes available with `--fix --unsafe-fixes`.",
    ]
    (fixable / "one.py").write_text(SAVE.rsplit("torch.save", 1)[0])
    assert heads(run("one.py"))[-1] == "1 unsafe fix available with `--fix --unsafe-fixes`."
    assert heads(run("nb.ipynb"))[-1] == "Found 2 diagnostics in 1 of 1 file checked."  # a notebook is never fixed


def test_json_says_of_each_finding_whether_a_fix_exists(fixable: Path) -> None:
    from pitfall_lint.rules.missing_main_guard import MissingMainGuard
    from pitfall_lint.rules.unguarded_torch_save import UnguardedTorchSave

    document = json.loads(run("--format", "json", "."))
    assert [(d["path"], d["line"], d["fix"]) for d in document["diagnostics"]] == [
        ("nb.ipynb", 4, None),
        ("nb.ipynb", 5, None),
        ("save.py", 4, {"applicability": "unsafe", "message": UnguardedTorchSave.info.hint}),
        ("save.py", 5, {"applicability": "unsafe", "message": UnguardedTorchSave.info.hint}),
        ("spawn.py", 4, {"applicability": "safe", "message": MissingMainGuard.info.hint}),
    ]


# --- --statistics ----------------------------------------------------------------------------------------------


def test_statistics_mark_the_rules_that_fix_would_fix(fixable: Path) -> None:
    assert run("--statistics", ".") == "    4\tPFL201\t[ ] unguarded-torch-save\n    1\tPFL301\t[*] missing-main-guard\n"


def test_statistics_as_json(fixable: Path) -> None:
    assert json.loads(run("--statistics", "--format", "json", ".")) == [
        {"code": "PFL201", "name": "unguarded-torch-save", "count": 4, "fixable": False, "fixable_count": 0},
        {"code": "PFL301", "name": "missing-main-guard", "count": 1, "fixable": True, "fixable_count": 1},
    ]
    assert json.loads(run("--statistics", "--format", "json", "--unsafe-fixes", ".")) == [  # the notebook's are not
        {"code": "PFL201", "name": "unguarded-torch-save", "count": 4, "fixable": True, "fixable_count": 2},
        {"code": "PFL301", "name": "missing-main-guard", "count": 1, "fixable": True, "fixable_count": 1},
    ]


@pytest.mark.parametrize("output_format", ["github", "sarif", "json-lines", "gitlab", "junit", "markdown"])
def test_statistics_in_a_format_without_them_is_a_usage_error(project: Path, output_format: str) -> None:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--statistics", "--format", output_format, "save.py"])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: --statistics works with --format text or json, not {output_format}\n"


# --- the end of the process: the report whole through a pipe, and a reader that stops early -------------------------

def _many_saves(project: Path, count: int) -> None:
    """save.py with `count` unguarded saves: a report of `count` PFL201 findings."""
    saves = "".join(f"torch.save({{}}, 'c{index}.pt')\n" for index in range(count))
    (project / "save.py").write_text("import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n" + saves)


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", "--preview", *args]


def test_a_report_larger_than_a_pipe_holds_arrives_whole_before_the_process_ends(project: Path) -> None:
    """The process ends without the interpreter's teardown, after the report is written out."""
    _many_saves(project, 1500)
    done = subprocess.run(_command("--format", "json", "save.py"), capture_output=True, text=True, timeout=120)
    assert len(done.stdout) > 1 << 16  # more than a pipe holds: written while the reader reads
    assert (done.returncode, done.stderr) == (1, "")
    assert [(d["code"], d["line"]) for d in json.loads(done.stdout)["diagnostics"]] == [("PFL201", 4 + index) for index in range(1500)]


@pytest.mark.parametrize("saves", [2, 1500], ids=["report-flushed-at-the-end", "report-larger-than-a-pipe"])
def test_a_reader_that_stops_early_ends_the_run_quietly_with_exit_0(project: Path, saves: int) -> None:
    """As Ruff's does: `pitfall-lint check | head -1` is no internal error (nor Python's `Exception ignored`)."""
    _many_saves(project, saves)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        done = subprocess.run(_command("save.py"), stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_profiler_still_writes_its_profile(project: Path) -> None:
    """A profiler writes what it saw at exit: under one, the process ends through the interpreter's teardown."""
    command = [sys.executable, "-m", "cProfile", "-o", "check.prof", "-m", "pitfall_lint", "check", "--no-cache", "save.py"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert (project / "check.prof").stat().st_size > 0
