"""The formats for CI systems, each read by what reads it there: JSON Lines, GitLab Code Quality (against GitLab's
documented format, with fingerprints that survive an edit above the finding), JUnit XML (parsed by junitparser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pitfall_lint.cli import main

from marks import REPO

SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\ntorch.save({}, 'd.pt')\n"
SPAWN = "import torch.multiprocessing as mp\ndef work(rank):\n    pass\nmp.spawn(work, nprocs=2)\n"
SAVE_MESSAGE = "`torch.save` runs on every rank, which then overwrite one file; guard it with `if dist.get_rank() == 0:` or put the rank in the path"
SPAWN_MESSAGE = (
    "`torch.multiprocessing.spawn` starts processes at import time: spawned children re-import the module and fail "
    'while bootstrapping; move it under `if __name__ == "__main__":`'
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two files, three findings: two saves in save.py, a spawn in spawn.py."""
    (tmp_path / "save.py").write_text(SAVE)
    (tmp_path / "spawn.py").write_text(SPAWN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    return tmp_path


def check(*args: str) -> Result:
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False)


# --- JSON Lines ----------------------------------------------------------------------------------------------------


def test_json_lines_is_the_json_formats_diagnostics_one_a_line(project: Path) -> None:
    result = check("--format", "json-lines", ".")
    assert result.exit_code == 1
    diagnostics = json.loads(check("--format", "json", ".").stdout)["diagnostics"]
    assert [(d["path"], d["line"], d["code"]) for d in diagnostics] == [("save.py", 4, "PFL201"), ("save.py", 5, "PFL201"), ("spawn.py", 4, "PFL301")]
    assert result.stdout == "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in diagnostics)


def test_json_lines_of_a_clean_run_is_empty(project: Path) -> None:
    (project / "clean.py").write_text("x = 1\n")
    result = check("--format", "json-lines", "clean.py")
    assert (result.exit_code, result.stdout) == (0, "")
