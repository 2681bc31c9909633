"""Files that cannot be read, decoded or parsed give one PFL000 each, and the others are still checked."""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main

from marks import reported

BAD_SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"


def run_check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # --preview: the example finding is PFL201's, a preview rule since 2026-11-25.
        [sys.executable, "-m", "pitfall_lint", "check", "--preview", "--format", "json", *args],
        cwd=cwd, capture_output=True, text=True, check=False,
    )


def diagnostics(result: subprocess.CompletedProcess[str]) -> set[tuple[str, str, int]]:
    return {(d["path"], d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]}


def test_syntax_error_names_line_and_reason() -> None:
    source = "import torch\ntorch.save({}, 'x.pt')\ndef broken(:\n    pass\n"
    assert reported(source) == {("PFL000", 3)}


def test_syntax_error_in_a_file_no_rule_could_match_is_not_parsed() -> None:
    # Documented trade-off: files without any rule's trigger word are never parsed.
    assert reported("def broken(:\n") == set()


@pytest.mark.parametrize("source", [b"import torch\nname = '\xff\xfe'\ntorch.save({}, 'x')\n", b"x = '\xff'\n"])
def test_non_utf8_bytes(source: bytes) -> None:
    assert {code for code, _ in reported(source)} == {"PFL000"}


def test_declared_latin1_encoding_is_honoured() -> None:
    data = b"# -*- coding: latin-1 -*-\nimport torch\nimport torch.distributed as dist\nname = '\xe9'\ndist.init_process_group('gloo')\ntorch.save({}, name)\n"
    assert reported(data) == {("PFL201", 6)}


def test_bom_is_accepted() -> None:
    assert reported(b"\xef\xbb\xbf" + BAD_SAVE.encode()) == {("PFL201", 4)}


def test_crlf_line_endings_keep_line_numbers() -> None:
    assert reported(BAD_SAVE.replace("\n", "\r\n").encode()) == {("PFL201", 4)}


def test_non_ascii_line_gives_character_columns() -> None:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    source = BAD_SAVE.replace("torch.save", "é = 1; torch.save")
    (diagnostic,) = Engine(all_rules()).check_source("x.py", source.encode()).diagnostics
    assert (diagnostic.line, diagnostic.column) == (4, 8)


def test_empty_file_is_clean() -> None:
    assert reported(b"") == set()


def test_one_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "a_broken.py").write_text("import torch\nclass M(torch.nn.Module)\n    def save(self): torch.save(self, 'm.pt')\n")
    (tmp_path / "b_latin.py").write_bytes(b"import torch\nx = '\xff'\n")
    (tmp_path / "c_save.py").write_text(BAD_SAVE)
    os.symlink("loop.py", tmp_path / "loop.py")
    result = run_check(".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    found = diagnostics(result)
    assert found == {
        ("a_broken.py", "PFL000", 2),
        ("b_latin.py", "PFL000", 1),
        ("c_save.py", "PFL201", 4),
        ("loop.py", "PFL000", 1),
    }
    messages = {d["path"]: d["message"] for d in json.loads(result.stdout)["diagnostics"]}
    assert "symbolic links" in messages["loop.py"]
    assert "utf-8" in messages["b_latin.py"]


def test_dependency_files_that_cannot_be_read_pin_nothing(tmp_path: Path) -> None:
    """A requirements.txt that is a symbolic link to itself, and a requirements/ folder that is a file: the project
    model reads them as declaring nothing (no Lightning version, so no PFL207) instead of stopping the run."""
    (tmp_path / "pyproject.toml").write_text("")
    os.symlink("requirements.txt", tmp_path / "requirements.txt")
    (tmp_path / "requirements").write_text("lightning==2.2\n")
    (tmp_path / "train.py").write_text(
        "import lightning.pytorch as pl\ndef end(trainer):\n    if trainer.is_global_zero:\n        trainer.save_checkpoint('l.ckpt')\n"
    )
    result = run_check(".", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert diagnostics(result) == set()


def test_symlink_loop_in_a_folder_with_configured_excludes(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.pitfall-lint]\nexclude = ["generated"]\n')
    (tmp_path / "pkg").mkdir()
    os.symlink("loop.py", tmp_path / "pkg" / "loop.py")
    (tmp_path / "pkg" / "save.py").write_text(BAD_SAVE)
    result = run_check(".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert diagnostics(result) == {("pkg/loop.py", "PFL000", 1), ("pkg/save.py", "PFL201", 4)}


def test_symlink_loop_named_explicitly(tmp_path: Path) -> None:
    os.symlink("loop.py", tmp_path / "loop.py")
    result = run_check("loop.py", cwd=tmp_path)
    assert result.returncode == 1
    assert diagnostics(result) == {("loop.py", "PFL000", 1)}


def test_missing_path_is_a_one_line_error(tmp_path: Path) -> None:
    result = run_check("nowhere.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: nowhere.py: no such file or directory"
    assert result.stdout == ""


def test_folder_without_python_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing")
    result = run_check(".", cwd=tmp_path)
    assert result.returncode == 0
    assert "no Python files" in result.stderr
    assert json.loads(result.stdout)["diagnostics"] == []


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ntorch.save({}, 'x.pt')\n" + "(" * 300 + ")" * 300 + "\n",  # too deeply nested for the parser
        "import torch\ntorch.save({}, 'x.pt')\nx = '\0'\n",  # a null byte
    ],
)
def test_parser_limits_become_pfl000(source: str) -> None:
    assert {code for code, _ in reported(source.encode())} == {"PFL000"}


def _deny_reading(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod 000; and where the tests run as root, which reads whatever the mode says, the kernel's answer to
    everyone else (EACCES from open and access) is given in this process, so the tests run in process."""
    path.chmod(0)
    if os.geteuid() != 0:
        return
    denied = os.path.abspath(path)
    real_access, real_open = os.access, io.open

    def access(name: object, mode: int, *args: object, **kwargs: object) -> bool:
        return False if os.path.abspath(name) == denied else real_access(name, mode, *args, **kwargs)  # type: ignore[arg-type]

    def open_(name: object, *args: object, **kwargs: object) -> object:
        if isinstance(name, (str, os.PathLike)) and os.path.abspath(name) == denied:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(name))
        return real_open(name, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(io, "open", open_)
    monkeypatch.setattr(builtins, "open", open_)


def check_in_process(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--format", "json", *args], catch_exceptions=False)


def test_an_unreadable_named_file_gets_pfl000_and_the_others_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "locked.py").write_text(BAD_SAVE)
    (tmp_path / "save.py").write_text(BAD_SAVE)
    _deny_reading(tmp_path / "locked.py", monkeypatch)
    result = check_in_process("locked.py", "save.py")
    assert result.exit_code == 1, result.output
    found = [(d["path"], d["code"], d["line"], d["message"]) for d in json.loads(result.stdout)["diagnostics"]]
    assert found == [
        ("locked.py", "PFL000", 1, "cannot read file: Permission denied"),
        ("save.py", "PFL201", 4, found[1][3]),
    ]


def test_an_unreadable_folder_is_a_warning_and_the_others_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "save.py").write_text(BAD_SAVE)
    (tmp_path / "save.py").write_text(BAD_SAVE)
    (tmp_path / "locked").chmod(0)
    if os.geteuid() == 0:  # root lists any folder: answer as the kernel answers everyone else
        real_scandir = os.scandir

        def scandir(name: str) -> object:
            if os.path.abspath(name) == str(tmp_path / "locked"):
                raise PermissionError(errno.EACCES, "Permission denied", name)
            return real_scandir(name)

        monkeypatch.setattr(os, "scandir", scandir)
    try:
        result = check_in_process(".")
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert result.exit_code == 1, result.output
    assert [(d["path"], d["code"]) for d in json.loads(result.stdout)["diagnostics"]] == [("save.py", "PFL201")]
    assert result.stderr == "warning: locked: cannot read the folder (Permission denied), skipped\n"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'[tool.pitfall-lint]\nselect = ["PFL3"]  # \xff\n', "not UTF-8 (invalid start byte on line 2)"),
        (b'[tool.pitfall-lint]\nselect = ["PFL3"]\n', "Permission denied"),
    ],
    ids=["non-utf8", "unreadable"],
)
def test_a_pyproject_that_cannot_be_read_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, reason: str
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "save.py").write_text(BAD_SAVE)
    (tmp_path / "pyproject.toml").write_bytes(content)
    if reason == "Permission denied":
        _deny_reading(tmp_path / "pyproject.toml", monkeypatch)
    monkeypatch.chdir(tmp_path / "sub")  # found from a subfolder, as the nearest configuration
    result = check_in_process(".")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: {tmp_path / 'pyproject.toml'}: cannot read: {reason}\n"


def test_a_named_pipe_is_skipped_with_a_warning_never_read(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    os.mkfifo(tmp_path / "pkg" / "pipe.py")
    os.mkfifo(tmp_path / "named.py")
    (tmp_path / "pkg" / "save.py").write_text(BAD_SAVE)
    for args in (["."], ["named.py", "pkg"]):
        # A read of a pipe with no writer blocks for ever: the timeout turns a hang into a failure.
        result = subprocess.run(
            [sys.executable, "-m", "pitfall_lint", "check", "--preview", "--format", "json", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        )
        assert result.returncode == 1, result.stderr
        assert diagnostics(result) == {("pkg/save.py", "PFL201", 4)}
        warnings = [f"warning: {name}: not a regular file (a named pipe), skipped" for name in ("named.py", "pkg/pipe.py")]
        assert result.stderr.splitlines() == warnings


def test_verify_and_config_refuse_a_named_pipe(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "train.py")
    os.mkfifo(tmp_path / "settings.toml")
    (tmp_path / "save.py").write_text(BAD_SAVE)
    for args, message in (
        (["verify", "train.py"], "error: train.py: not a regular file (a named pipe)"),
        (["check", "--config", "settings.toml", "save.py"], "error: settings.toml: cannot read: not a regular file"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "pitfall_lint", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
        )
        assert (result.returncode, result.stderr) == (2, message + "\n")


@pytest.mark.parametrize("command", ["check", "verify"])
def test_a_deleted_current_folder_is_a_one_line_error(tmp_path: Path, command: str) -> None:
    (tmp_path / "train.py").write_text(BAD_SAVE)
    gone = tmp_path / "gone"
    gone.mkdir()
    # The shell enters the folder, then removes it: the command starts in a folder that no longer exists.
    result = subprocess.run(
        ["sh", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone), sys.executable, "-m", "pitfall_lint", command, str(tmp_path / "train.py")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "error: the current folder no longer exists (it was deleted); cd into one that does\n"


def test_a_bug_of_ours_in_check_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pitfall_lint import checking

    def broken(*args: object) -> None:
        raise RuntimeError("the model lost a file")

    (tmp_path / "train.py").write_text(BAD_SAVE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(checking, "check_by_rules", broken)  # the command imports it when it runs
    result = CliRunner().invoke(main, ["check", "train.py"], catch_exceptions=False)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: internal error in check: RuntimeError: the model lost a file\n"
