"""Output a person wants to read: source with carets and hints, colour only on a terminal, statistics, a file."""

from __future__ import annotations

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
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False).stdout


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
    assert (project / "report.txt").read_text().splitlines()[-1] == "Found 2 diagnostics in 1 of 1 files checked."


def _in_a_terminal(cwd: Path, env: dict[str, str]) -> str:
    """Runs the CLI with a pseudo-terminal as stdout, the way a person sees it."""
    import pty

    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", "save.py"],
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
