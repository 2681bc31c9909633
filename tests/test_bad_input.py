"""Files that cannot be read, decoded or parsed give one PFL000 each, and the others are still checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marks import reported

BAD_SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"


def run_check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "check", "--format", "json", *args],
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
    (tmp_path / "a_broken.py").write_text("import torch\nclass M(torch.nn.Module)\n    f = lambda: 0\n")
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
