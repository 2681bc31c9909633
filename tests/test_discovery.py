"""Which files a check reads, as Ruff picks them: what git ignores is left out of a folder walk (.gitignore, .ignore,
.git/info/exclude, read with git's precedence); a file named is read as Python when its suffix or its shebang says
so, and skipped with a warning otherwise; a missing path among others is a warning."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pitfall_lint.cli import main

# Saves on every rank of a process group: PFL201 (a preview rule) on line 7 (line 6 without the shebang).
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
    # --preview: PFL201 is a preview rule; these tests use its finding only to show which files were checked.
    return CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--format", "json", *args], catch_exceptions=False)


def found(result: Result) -> list[tuple[str, str, int]]:
    return [(d["path"], d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]]


def summary(*args: str) -> str:
    """The text report's line that counts the files checked (a line about fixes may follow it)."""
    lines = CliRunner().invoke(main, ["check", "--no-cache", "--preview", *args], catch_exceptions=False).stdout.splitlines()
    (counted,) = [line for line in lines if line.startswith(("Found ", "All checks passed!"))]
    return counted


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



def make(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


def checked(*args: str) -> list[str]:
    """The files that reported their PFL201: every Python file of these tests saves on every rank."""
    result = check(*args)
    assert result.exit_code in (0, 1), result.output
    assert all(code == "PFL201" for _, code, _ in found(result))
    return [path for path, _, _ in found(result)]


# A W&B run folder and a Hydra output folder, each with a snapshot of the training script.
ML_REPOSITORY = {
    ".gitignore": "wandb/\noutputs/\n",
    "train.py": SAVE,
    "model.py": SAVE,
    "wandb/run-20240101_000000-abc/files/code/train.py": SAVE,
    "outputs/2024-01-01/12-00-00/train.py": SAVE,
}


def test_the_folders_a_gitignore_lists_are_not_walked(folder: Path) -> None:
    git_init(folder)
    make(folder, ML_REPOSITORY)
    result = check(".")
    assert result.exit_code == 1, result.output
    assert found(result) == [("model.py", "PFL201", 6), ("train.py", "PFL201", 6)]
    assert result.stderr == ""
    assert summary(".") == "Found 2 diagnostics in 2 of 2 files checked."
    assert checked() == ["model.py", "train.py"]  # the current folder by default


def test_the_option_and_the_setting_turn_it_off(folder: Path) -> None:
    git_init(folder)
    make(folder, ML_REPOSITORY)
    everything = ["model.py", "outputs/2024-01-01/12-00-00/train.py", "train.py", "wandb/run-20240101_000000-abc/files/code/train.py"]
    assert checked("--no-respect-gitignore", ".") == everything
    (folder / "pyproject.toml").write_text("[tool.pitfall-lint]\nrespect-gitignore = false\n")
    assert checked(".") == everything
    assert checked("--respect-gitignore", ".") == ["model.py", "train.py"]  # the command line wins
    (folder / "pyproject.toml").write_text('[tool.pitfall-lint]\nrespect-gitignore = "no"\n')
    result = check(".")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: {folder / 'pyproject.toml'}: [tool.pitfall-lint] respect-gitignore: expected true or false, got 'no'\n"


def test_a_named_ignored_file_is_checked_unless_force_exclude(folder: Path) -> None:
    git_init(folder)
    make(folder, {**ML_REPOSITORY, ".gitignore": "outputs/\nscratch.py\n", "scratch.py": SAVE})
    snapshot = "outputs/2024-01-01/12-00-00/train.py"
    assert checked(snapshot, "scratch.py", "train.py") == [snapshot, "scratch.py", "train.py"]
    # pre-commit's hook passes --force-exclude: an ignored file staged with `git add -f` is skipped, as Ruff does.
    assert checked("--force-exclude", snapshot, "scratch.py", "train.py") == ["train.py"]
    assert checked("--force-exclude", "--no-respect-gitignore", snapshot, "scratch.py") == [snapshot, "scratch.py"]
    # A folder named is walked, as a file named is checked; with --force-exclude it is skipped.
    assert checked("outputs") == [snapshot]
    assert checked("--force-exclude", "outputs", "train.py") == ["train.py"]


def test_a_deeper_gitignore_overrides_a_shallower_one(folder: Path) -> None:
    git_init(folder)
    make(
        folder,
        {
            ".gitignore": "generated_*.py\n",
            "pkg/.gitignore": "!generated_keep.py\nlocal.py\n",
            "generated_a.py": SAVE,
            "local.py": SAVE,  # pkg's pattern holds below pkg only
            "pkg/generated_b.py": SAVE,
            "pkg/generated_keep.py": SAVE,
            "pkg/local.py": SAVE,
            "pkg/sub/local.py": SAVE,
            "pkg/sub/run.py": SAVE,
        },
    )
    assert checked(".") == ["local.py", "pkg/generated_keep.py", "pkg/sub/run.py"]
    # The same rules when the walk starts below the repository's root: the parents' files are read.
    assert checked("pkg") == ["pkg/generated_keep.py", "pkg/sub/run.py"]
    assert checked("pkg/sub") == ["pkg/sub/run.py"]


def test_negation_and_what_git_cannot_take_back(folder: Path) -> None:
    git_init(folder)
    make(
        folder,
        {
            ".gitignore": "scratch_*.py\n!scratch_keep.py\noutputs/\n!outputs/keep.py\nruns/*\n!runs/keep.py\n",
            "scratch_a.py": SAVE,
            "scratch_keep.py": SAVE,
            "outputs/keep.py": SAVE,  # its folder is ignored: git cannot take a file below it back
            "runs/a.py": SAVE,
            "runs/keep.py": SAVE,  # `runs/*` ignores what runs/ holds, not runs/ itself
        },
    )
    assert checked(".") == ["runs/keep.py", "scratch_keep.py"]
    assert checked(".") == git_untracked_python_files(folder)


def git_untracked_python_files(root: Path) -> list[str]:
    """What git itself says is not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    return sorted(path for path in listed.splitlines() if path.endswith(".py"))


def test_the_exclude_file_of_the_repository_and_ignore_files(folder: Path) -> None:
    git_init(folder)
    make(
        folder,
        {
            ".git/info/exclude": "# git's own comments\nlocal_*.py\n",
            ".gitignore": "!local_kept.py\nvendored/\n",  # a .gitignore overrides the exclude file
            ".ignore": "!vendored/\nslow/\n",  # an .ignore overrides a .gitignore, as in ripgrep and Ruff
            "local_a.py": SAVE,
            "local_kept.py": SAVE,
            "slow/a.py": SAVE,
            "vendored/a.py": SAVE,
            "train.py": SAVE,
        },
    )
    assert checked(".") == ["local_kept.py", "train.py", "vendored/a.py"]


def test_outside_a_git_repository_the_gitignore_files_walked_count(folder: Path) -> None:
    make(folder, {**ML_REPOSITORY, "sub/.gitignore": "generated.py\n", "sub/generated.py": SAVE, "sub/run.py": SAVE})
    assert checked(".") == ["model.py", "sub/run.py", "train.py"]
    # Without a repository to say where the project ends, those above the folder walked do not.
    assert checked("outputs") == ["outputs/2024-01-01/12-00-00/train.py"]
    assert checked("sub") == ["sub/run.py"]
    assert checked("--force-exclude", "outputs/2024-01-01/12-00-00/train.py", "sub") == ["outputs/2024-01-01/12-00-00/train.py", "sub/run.py"]


def test_a_repository_inside_another_has_gitignore_files_of_its_own(folder: Path) -> None:
    git_init(folder)
    git_init(folder / "third_party" / "lib")
    make(
        folder,
        {
            ".gitignore": "build_*.py\n",
            "build_a.py": SAVE,
            "third_party/lib/build_b.py": SAVE,  # git reads the outer .gitignore in the outer repository only
            "third_party/lib/.gitignore": "tmp.py\n",
            "third_party/lib/tmp.py": SAVE,
        },
    )
    assert checked(".") == ["third_party/lib/build_b.py"]
    assert checked("third_party/lib") == ["third_party/lib/build_b.py"]


PROBE = """
import sys
from click.testing import CliRunner
from pitfall_lint.cli import main
result = CliRunner().invoke(main, ["check", "--no-cache", "--preview", *sys.argv[1:]])
print(result.exit_code, "pathspec" in sys.modules)
"""


def test_pathspec_is_imported_only_where_a_walk_meets_a_pattern(folder: Path) -> None:
    make(folder, {"train.py": SAVE, "outputs/train.py": SAVE, "model.py": SAVE})

    def probe(*args: str) -> str:
        return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True).stdout

    assert probe(".") == "1 False\n"
    (folder / ".gitignore").write_text("# snapshots of the runs\n\n")
    assert probe(".") == "1 False\n"
    (folder / ".gitignore").write_text("outputs/\n")
    assert probe("train.py") == "1 False\n"  # no walk: the file named is the project
    assert probe(".") == "1 True\n"
    assert checked(".") == ["model.py", "train.py"]


def test_show_files_lists_what_would_be_checked_and_checks_nothing(folder: Path) -> None:
    git_init(folder)
    make(
        folder,
        {
            **ML_REPOSITORY,
            "pyproject.toml": '[tool.pitfall-lint]\nexclude = ["generated"]\n',
            "generated/x.py": SAVE,
            "src/pkg/__init__.py": "",
            "src/pkg/notebook.ipynb": "{}",  # not valid as a notebook: nothing reads it
            "src/pkg/stub.pyi": SAVE,
            "zz.py": SAVE,
        },
    )
    result = CliRunner().invoke(main, ["check", "--show-files"], catch_exceptions=False)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == "model.py\nsrc/pkg/__init__.py\nsrc/pkg/notebook.ipynb\ntrain.py\nzz.py\n"
    assert not (folder / ".pitfall_lint_cache").exists()
    named = CliRunner().invoke(main, ["check", "--show-files", "--no-respect-gitignore", "zz.py", "outputs", "notes.txt"])
    assert (named.exit_code, named.stderr) == (2, "warning: notes.txt: no such file or directory, skipped\n")
    assert named.stdout == "outputs/2024-01-01/12-00-00/train.py\nzz.py\n"


def test_a_gitignore_written_with_a_byte_order_mark(folder: Path) -> None:
    git_init(folder)
    make(folder, ML_REPOSITORY)
    (folder / ".gitignore").write_bytes(b"\xef\xbb\xbfwandb/\r\noutputs/\r\n")  # as Notepad saves it; git skips the mark
    assert checked(".") == ["model.py", "train.py"]
    assert checked(".") == git_untracked_python_files(folder)



def test_a_folder_is_walked_once_per_run(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's walk of the project's root serves the project model, which needs every file of the
    project: a run over the whole project lists each folder once (it listed them twice)."""
    import os

    from pitfall_lint import files

    (folder / "pyproject.toml").write_text("")
    make(folder, {"train.py": SAVE, "pkg/model.py": SAVE, "scripts/run.sh": "python train.py\n"})
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path: str) -> os.ScandirIterator[str]:
        listed.append(os.path.relpath(path, folder))
        return real_scandir(path)

    monkeypatch.setattr(files.os, "scandir", scandir)
    assert checked(".") == ["pkg/model.py", "train.py"]
    assert sorted(listed) == [".", "pkg", "scripts"]


def test_a_walk_serves_its_folder_however_it_is_named(folder: Path) -> None:
    from pitfall_lint.files import Excluder

    make(folder, {"train.py": SAVE, "pkg/model.py": SAVE, "scripts/run.sh": "python train.py\n"})
    excluder = Excluder((), folder)
    assert excluder.walk("./", print) == (["train.py", "pkg/model.py"], ["scripts/run.sh"])
    assert excluder.walk(str(folder), print) == (
        [str(folder / "train.py"), str(folder / "pkg" / "model.py")], [str(folder / "scripts" / "run.sh")]
    )


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("a.py", "a.py"),
        ("./a.py", "a.py"),
        ("sub/./c.py", "sub/c.py"),
        ("sub//d.py", "sub/d.py"),
        ("sub/../b.py", "b.py"),
        ("../outside.py", "../outside.py"),  # outside the working directory: as given
        ("sub/../../outside.py", "sub/../../outside.py"),
        ("INSIDE/sub/e.py", "sub/e.py"),  # absolute, inside
        ("/elsewhere/f.py", "/elsewhere/f.py"),  # absolute, outside
    ],
)
def test_paths_are_shown_relative_to_the_working_directory_as_ruff_shows_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, shown: str
) -> None:
    from pitfall_lint.files import display_path

    monkeypatch.chdir(tmp_path)
    assert display_path(given.replace("INSIDE", str(tmp_path))) == shown
