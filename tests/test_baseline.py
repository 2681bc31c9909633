"""Baselines: today's findings recorded, only new ones reported, robust to edits that shift lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main

SETUP = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "train.py").write_text(SETUP + "torch.save({}, 'old.pt')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", *args], catch_exceptions=False)


def found(result) -> list[tuple[str, int]]:
    return [(d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]]


def test_baseline_survives_edits_that_shift_lines(project: Path) -> None:
    written = check("--write-baseline", "baseline.json")
    assert written.exit_code == 0
    entries = json.loads((project / "baseline.json").read_text())["findings"]
    assert [(e["code"], e["path"], e["line"]) for e in entries] == [("PFL201", "train.py", 4)]
    # Unrelated lines above the finding move it down: it stays known.
    (project / "train.py").write_text("# a header\n\n" + SETUP + "torch.save({}, 'old.pt')\n")
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, found(result)) == (0, [])
    # A new finding is reported; so is a second copy of the known one.
    (project / "train.py").write_text(SETUP + "torch.save({}, 'old.pt')\ntorch.save({}, 'new.pt')\ntorch.save({}, 'old.pt')\n")
    result = check("--baseline", "baseline.json")
    assert (result.exit_code, found(result)) == (1, [("PFL201", 5), ("PFL201", 6)])


def test_changing_the_flagged_line_makes_it_new(project: Path) -> None:
    check("--write-baseline", "baseline.json")
    (project / "train.py").write_text(SETUP + "torch.save({}, 'renamed.pt')\n")
    assert found(check("--baseline", "baseline.json")) == [("PFL201", 4)]


@pytest.mark.parametrize("content", ["{not json", '{"findings": [{"code": 1}]}'])
def test_bad_baseline_is_a_one_line_error(project: Path, content: str) -> None:
    (project / "baseline.json").write_text(content)
    result = check("--baseline", "baseline.json")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: baseline.json: not a pitfall-lint baseline")
    assert len(result.stderr.splitlines()) == 1


def test_missing_baseline(project: Path) -> None:
    result = check("--baseline", "nowhere.json")
    assert (result.exit_code, result.stderr) == (2, "error: nowhere.json: cannot read the baseline: No such file or directory\n")
