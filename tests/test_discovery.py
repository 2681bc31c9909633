"""Which files a check reads, as Ruff picks them: a file named is read as Python when its suffix or its shebang says
so, and skipped with a warning otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pitfall_lint.cli import main

# Saves on every rank of a process group: PFL201 on line 7 (line 6 without the shebang).
LAUNCH = (
    "#!/usr/bin/env python\n"
    "import torch\n"
    "import torch.distributed as dist\n"
    "\n"
    "def main():\n"
    "    dist.init_process_group('nccl')\n"
    "    torch.save({}, 'c.pt')\n"
    "\n"
    "if __name__ == '__main__':\n"
    "    main()\n"
)
SAVE = LAUNCH.removeprefix("#!/usr/bin/env python\n")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*args: str) -> Result:
    return CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", *args], catch_exceptions=False)


def found(result: Result) -> list[tuple[str, str, int]]:
    return [(d["path"], d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]]


def summary(*args: str) -> str:
    """The text report's last line, which counts the files checked (0 or 2 of them: the plural is settled)."""
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False).stdout.splitlines()[-1]


@pytest.mark.parametrize(
    "shebang", ["#!/usr/bin/env python", "#!/usr/bin/env python3", "#!/usr/bin/python3.11 -u", "#! /usr/local/bin/python"]
)
def test_a_named_script_with_a_python_shebang_is_checked_as_its_py_twin(folder: Path, shebang: str) -> None:
    source = LAUNCH.replace("#!/usr/bin/env python", shebang)
    (folder / "launch").write_text(source)
    (folder / "launch").chmod(0o755)
    (folder / "launch.py").write_text(source)
    result = check("launch", "launch.py")
    assert result.exit_code == 1, result.output
    assert found(result) == [("launch", "PFL201", 7), ("launch.py", "PFL201", 7)]
    assert result.stderr == ""
    assert summary("launch", "launch.py") == "Found 2 diagnostics in 2 of 2 files checked."


@pytest.mark.parametrize("name", ["stub.pyi", "gui.pyw"])
def test_a_named_stub_or_windowed_script_is_checked_as_python(folder: Path, name: str) -> None:
    (folder / name).write_text(SAVE)
    (folder / "launch").write_text(LAUNCH)
    (folder / "train.py").write_text(SAVE)
    assert found(check(name)) == [(name, "PFL201", 6)]
    # A folder walk still takes only .py and .ipynb files: what Ruff and pre-commit pick by default.
    assert found(check(".")) == [("train.py", "PFL201", 6)]


def test_a_named_file_that_is_not_python_is_skipped_with_a_warning(folder: Path) -> None:
    (folder / "notes.txt").write_text(SAVE)  # Python inside, but neither its name nor a shebang says so
    (folder / "run.sh").write_text("#!/bin/bash\npython launch.py\n")
    (folder / "launch.py").write_text(SAVE)
    (folder / "clean.py").write_text("import torch\n")
    result = check("notes.txt", "run.sh", "launch.py", "clean.py")
    assert result.exit_code == 1, result.output
    assert result.stderr == "warning: notes.txt: not a Python file, skipped\nwarning: run.sh: not a Python file, skipped\n"
    assert found(result) == [("launch.py", "PFL201", 6)]
    assert summary("notes.txt", "run.sh", "launch.py", "clean.py") == "Found 1 diagnostic in 1 of 2 files checked."
    alone = check("notes.txt")
    assert alone.exit_code == 0
    assert alone.stderr == "warning: notes.txt: not a Python file, skipped\nwarning: no Python files found under the given paths\n"
    assert summary("notes.txt") == "All checks passed! (0 files checked)"



def test_a_missing_path_among_several_is_a_warning_and_the_others_are_checked(folder: Path) -> None:
    (folder / "a.py").write_text(SAVE)
    (folder / "sub").mkdir()
    (folder / "sub" / "b.py").write_text(SAVE)
    result = check("a.py", "missing.py", "sub")
    assert result.exit_code == 2, result.output  # the README's promise for a missing path, once the rest is reported
    assert result.stderr == "warning: missing.py: no such file or directory, skipped\n"
    assert found(result) == [("a.py", "PFL201", 6), ("sub/b.py", "PFL201", 6)]
    assert summary("a.py", "missing.py", "sub") == "Found 2 diagnostics in 2 of 2 files checked."
    clean = check("--exit-zero", "a.py", "missing.py")
    assert (clean.exit_code, clean.stderr) == (2, "warning: missing.py: no such file or directory, skipped\n")


def test_every_path_missing_is_an_error(folder: Path) -> None:
    result = check("missing.py", "gone")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: missing.py, gone: no such file or directory\n"
