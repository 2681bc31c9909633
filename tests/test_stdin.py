"""`check - --stdin-filename PATH`, what editors and formatter chains run: the buffer read from stdin is checked as
the file at PATH (its configuration, its project, --force-exclude), as in Ruff and flake8."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pitfall_lint.cli import main
from pitfall_lint.project.store import FOLDER

from marks import REPO

# PFL201's pitfall: a preview rule since 2026-11-25, so the checks of it below run with --preview.
SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"
# train.py's findings rest on models/net.py: it wraps in DataParallel what models/net.py compiles.
PROJECT = REPO / "fixtures" / "projects" / "model-used-through-its-wrapper" / "bad"
TRAIN_FINDINGS = [("train.py", "PFL106", 10), ("train.py", "PFL212", 11), ("train.py", "PFL212", 15)]
SPAWN = (REPO / "fixtures" / "PFL301-missing-main-guard" / "bad.py").read_bytes()
COUNTER = """import torch
from torch import nn


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(2, 2)
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return self.layer(x)


model = nn.DataParallel(Counter())
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(PROJECT, tmp_path / "project")
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path / "project"


def check(*args: str, stdin: bytes | str) -> Result:
    return CliRunner().invoke(main, ["check", *args], input=stdin, catch_exceptions=False)


def findings(result: Result) -> list[tuple[str, str, int]]:
    assert result.exit_code in (0, 1), result.output
    return [(d["path"], d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]]


@pytest.mark.parametrize("args", [["-", "--stdin-filename", "train.py"], ["--stdin-filename", "train.py"]])
def test_stdin_is_checked_as_the_named_file_of_its_project(project: Path, args: list[str]) -> None:
    on_disk = check("--no-cache", "--format", "json", "train.py", stdin="")
    from_stdin = check("--no-cache", "--format", "json", *args, stdin=(project / "train.py").read_bytes())
    assert findings(from_stdin) == TRAIN_FINDINGS
    assert json.loads(from_stdin.stdout)["diagnostics"] == json.loads(on_disk.stdout)["diagnostics"]  # related places too
    # The same text as a file of no project: what rests on models/net.py is not found.
    (project.parent / "elsewhere").mkdir()
    alone = check("--no-cache", "--format", "json", "--stdin-filename", "../elsewhere/train.py", stdin=(project / "train.py").read_bytes())
    assert findings(alone) == [("../elsewhere/train.py", "PFL212", 15)]


def test_stdin_stands_in_for_the_file_on_disk(project: Path) -> None:
    source = (project / "train.py").read_bytes()
    (project / "train.py").write_text("import torch\n")
    assert findings(check("--no-cache", "--format", "json", "-", "--stdin-filename", "train.py", stdin=source)) == TRAIN_FINDINGS
    # A path that does not exist is checked in the project around it.
    (project / "train.py").unlink()
    result = check("--no-cache", "--format", "json", "-", "--stdin-filename", "scripts/new.py", stdin=source)
    assert findings(result) == [("scripts/new.py", code, line) for _, code, line in TRAIN_FINDINGS]


def test_the_project_sees_stdin_in_place_of_the_file_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On disk, train.py trains with DDP alone: nothing in the project runs a module under DataParallel, and the
    DataParallel rules have nothing to look at. The buffer wraps its own module in DataParallel."""
    shutil.copytree(REPO / "fixtures" / "projects" / "dataparallel-reach" / "clean", tmp_path / "project")
    monkeypatch.chdir(tmp_path / "project")
    result = check("--no-cache", "--format", "json", "--stdin-filename", "train.py", stdin=COUNTER)
    assert findings(result) == [("train.py", "PFL104", 12)]


def test_stdin_without_a_filename_is_checked_as_stdin_py(project: Path) -> None:
    result = check("--preview", "-", stdin=SAVE)
    assert (result.exit_code, result.stderr) == (1, "")
    assert result.stdout.startswith("stdin.py:4:1: PFL201 ")


def test_the_configuration_is_the_stdin_filename_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(PROJECT, tmp_path / "project")
    (tmp_path / "project" / "pyproject.toml").write_text('[tool.pitfall-lint]\nignore = ["PFL212"]\n')
    (tmp_path / "pyproject.toml").write_text('[tool.pitfall-lint]\nselect = ["PFL3"]\n')  # the current folder's
    monkeypatch.chdir(tmp_path)
    source = (tmp_path / "project" / "train.py").read_bytes()
    result = check("--no-cache", "--format", "json", "--stdin-filename", "project/train.py", stdin=source)
    assert findings(result) == [("project/train.py", "PFL106", 10)]
    # On disk too, since each file's configuration is the nearest to it, as in Ruff.
    assert findings(check("--no-cache", "--format", "json", "project/train.py", stdin="")) == [("project/train.py", "PFL106", 10)]


def test_exclusions_apply_to_stdin_under_force_exclude(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.pitfall-lint]\nexclude = ["generated"]\n')
    args = ["--no-cache", "--preview", "--stdin-filename", "generated/save.py"]
    assert check(*args, stdin=SAVE).stdout.startswith("generated/save.py:4:1: PFL201 ")
    result = check(*args, "--force-exclude", stdin=SAVE)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "All checks passed! (0 files checked)\n", "")


def test_the_result_of_stdin_is_not_cached_as_the_file_s(project: Path) -> None:
    (project / "train.py").write_text("import torch\n")
    assert check("train.py", stdin="").exit_code == 0
    (cache,) = (project / FOLDER).glob("results-*.json")
    stored = cache.read_bytes()
    source = (PROJECT / "train.py").read_bytes()
    assert findings(check("--format", "json", "-", "--stdin-filename", "train.py", stdin=source)) == TRAIN_FINDINGS
    assert cache.read_bytes() == stored
    assert check("train.py", stdin="").stdout == "All checks passed! (1 file checked)\n"


def test_fix_prints_the_fixed_source_and_reports_on_stderr(project: Path) -> None:
    from pitfall_lint.fix import fix_source
    from pitfall_lint.rules import all_rules

    result = check("--no-cache", "--fix", "--stdin-filename", "launch.py", stdin=SPAWN)
    assert (result.exit_code, result.stdout_bytes) == (0, fix_source("launch.py", SPAWN, all_rules(), False).fixed)
    assert result.stderr == "Fixed 1 finding in 1 file.\nAll checks passed! (1 file checked)\n"
    assert not (project / "launch.py").exists()
    # Nothing to fix: the source as it came, what is left on stderr.
    source = (project / "train.py").read_bytes()
    result = check("--no-cache", "--fix", "--stdin-filename", "train.py", stdin=source)
    assert (result.exit_code, result.stdout_bytes) == (1, source)
    assert result.stderr.splitlines()[0] == "Fixed 0 findings in 0 files."
    assert result.stderr.splitlines()[1].startswith("train.py:10:13: PFL106 ")
    assert result.stderr.splitlines()[-1] == "Found 3 diagnostics in 1 of 1 file checked."
    result = check("--no-cache", "--diff", "--stdin-filename", "launch.py", stdin=SPAWN)
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/launch.py\n+++ b/launch.py\n@@ ")


def test_stdin_is_checked_alone(project: Path) -> None:
    for args in (["-", "train.py"], ["--stdin-filename", "train.py", "train.py"]):
        result = check(*args, stdin=SAVE)
        assert (result.exit_code, result.stdout) == (2, "")
        assert result.stderr == "error: stdin ('-' or --stdin-filename) is checked alone: name no other path\n"
