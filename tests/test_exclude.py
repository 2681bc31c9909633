"""Exclusions as in Ruff: a pattern without a slash matches any file or folder name at any depth, also for a
path named on the command line under --force-exclude (what pre-commit passes); one with a slash matches the
path relative to the configuration's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main

SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"
FILES = ("third_party/x.py", "a/third_party/b/x.py", "a/keep.py", "keep.py")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(SAVE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def checked(*args: str) -> list[str]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--format", "json", *args], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return sorted(d["path"] for d in json.loads(result.stdout)["diagnostics"])


def configure(project: Path, patterns: str) -> None:
    (project / "pyproject.toml").write_text(f"[tool.pitfall-lint]\nexclude = {patterns}\n")


def test_a_name_excludes_that_folder_at_any_depth(project: Path) -> None:
    configure(project, '["third_party"]')
    assert checked(".") == ["a/keep.py", "keep.py"]
    assert checked("--force-exclude", *FILES) == ["a/keep.py", "keep.py"]
    # Named without --force-exclude, a file is checked whatever the exclusions say.
    assert checked("third_party/x.py") == ["third_party/x.py"]


def test_a_path_with_a_slash_is_relative_to_the_configuration(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(project, '["a/third_party"]')
    assert checked(".") == ["a/keep.py", "keep.py", "third_party/x.py"]
    assert checked("--force-exclude", *FILES) == ["a/keep.py", "keep.py", "third_party/x.py"]
    monkeypatch.chdir(project / "a")  # the pattern stays relative to the pyproject.toml's folder
    assert checked("--force-exclude", "third_party/b/x.py", "keep.py") == ["keep.py"]


def test_a_file_name_pattern_and_a_recursive_prefix(project: Path) -> None:
    configure(project, '["x.py", "**/keep.py"]')
    assert checked(".") == []
    assert checked("--force-exclude", *FILES) == []
    configure(project, '["third_party/*"]')  # the README's form: `*` crosses folders, as in Ruff
    assert checked("--force-exclude", *FILES) == ["a/keep.py", "a/third_party/b/x.py", "keep.py"]


def test_the_folder_of_the_configuration_is_not_matched_by_name(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inner = project / "a"
    (inner / "pyproject.toml").write_text('[tool.pitfall-lint]\nexclude = ["a"]\n')
    monkeypatch.chdir(inner)
    assert checked("--force-exclude", "keep.py") == ["keep.py"]
