"""Configuration as Ruff finds it in a monorepo: `extend = "../pyproject.toml"` puts a file's settings over another's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main

SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"
SPAWN = "import torch.multiprocessing as mp\ndef w(i):\n    pass\nmp.spawn(w, nprocs=2)\n"


def check(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--format", "json", *args], catch_exceptions=False)


def found(result) -> list[tuple[str, str]]:
    assert result.exit_code in (0, 1), result.stderr
    return sorted((d["path"], d["code"]) for d in json.loads(result.stdout)["diagnostics"])


def config(folder: Path, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(f"[tool.pitfall-lint]\n{body}\n")


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose configuration a package extends; the check runs in the package."""
    for folder in ("pkg", "pkg/tests", "pkg/generated"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "save.py").write_text(SAVE)
        (tmp_path / folder / "spawn.py").write_text(SPAWN)
    config(tmp_path, 'ignore = ["PFL301"]\nexclude = ["pkg/generated"]\nper-file-ignores = { "pkg/tests/*" = ["PFL201"] }')
    monkeypatch.chdir(tmp_path / "pkg")
    return tmp_path


def test_extend_inherits_the_settings_of_the_file_it_names(package: Path) -> None:
    """The repository's ignore, exclusions and per-file-ignores, their patterns matched from the repository's folder."""
    config(package / "pkg", 'extend = "../pyproject.toml"')
    assert found(check()) == [("save.py", "PFL201")]
    config(package / "pkg", "")  # without extend: the package's own settings only
    assert found(check()) == [
        ("generated/save.py", "PFL201"), ("generated/spawn.py", "PFL301"), ("save.py", "PFL201"), ("spawn.py", "PFL301"),
        ("tests/save.py", "PFL201"), ("tests/spawn.py", "PFL301"),
    ]


def test_the_extending_file_overrides_and_adds(package: Path) -> None:
    config(package / "pkg", 'extend = "../pyproject.toml"\nextend-select = ["PFL301"]\nextend-exclude = ["tests"]')
    assert found(check()) == [("save.py", "PFL201"), ("spawn.py", "PFL301")]  # selected again; both exclusions
    config(package / "pkg", 'extend = "../pyproject.toml"\nignore = ["PFL201"]\nper-file-ignores = {}')
    assert found(check()) == []  # the ignores of both
    config(package / "pkg", 'extend = "../pyproject.toml"\nselect = ["PFL201", "PFL301"]\nexclude = []')
    assert found(check()) == [  # a select starts the choice afresh; an exclude replaces the base's
        ("generated/save.py", "PFL201"), ("generated/spawn.py", "PFL301"), ("save.py", "PFL201"), ("spawn.py", "PFL301"),
        ("tests/spawn.py", "PFL301"),
    ]


def test_extend_goes_on_through_the_file_it_names(package: Path) -> None:
    config(package / "pkg" / "sub", 'extend = "../pyproject.toml"')
    (package / "pkg" / "sub" / "spawn.py").write_text(SPAWN)
    config(package / "pkg", 'extend = "../pyproject.toml"\nignore = ["PFL201"]')
    assert found(check("sub")) == []
    config(package / "pkg", "")
    assert found(check("sub")) == [("sub/spawn.py", "PFL301")]


def test_a_cycle_of_extend_is_a_one_line_error(package: Path) -> None:
    config(package, 'extend = "pkg/pyproject.toml"')
    config(package / "pkg", 'extend = "../pyproject.toml"')
    result = check()
    assert (result.exit_code, result.stdout) == (2, "")
    child, parent = package / "pkg" / "pyproject.toml", package / "pyproject.toml"
    assert result.stderr == f"error: {parent}: [tool.pitfall-lint] extend: a cycle: {child} -> {parent} -> {child}\n"
    config(package / "pkg", 'extend = "pyproject.toml"')
    assert check().stderr == f"error: {child}: [tool.pitfall-lint] extend: a cycle: {child} -> {child}\n"


def test_extend_naming_no_file_is_a_one_line_error(package: Path) -> None:
    config(package / "pkg", 'extend = "../missing/pyproject.toml"')
    result = check()
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {package / 'pkg' / 'pyproject.toml'}: [tool.pitfall-lint] extend: {package / 'missing' / 'pyproject.toml'}: no such file\n"
    )


def test_extend_must_be_a_path(package: Path) -> None:
    config(package / "pkg", "extend = 1")
    result = check()
    assert (result.exit_code, result.stderr) == (
        2, f"error: {package / 'pkg' / 'pyproject.toml'}: [tool.pitfall-lint] extend: expected the path of a pyproject.toml, got 1\n"
    )


def test_a_bad_key_in_the_extended_file_names_that_file(package: Path) -> None:
    config(package, 'colour = "blue"')
    config(package / "pkg", 'extend = "../pyproject.toml"')
    result = check()
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {package / 'pyproject.toml'}: [tool.pitfall-lint] unknown key 'colour'")


@pytest.fixture
def monorepo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two packages, each with its own configuration, under a repository with its own; the check runs at the top."""
    for folder in ("", "a", "b", "b/generated"):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "save.py").write_text(SAVE)
        (tmp_path / folder / "spawn.py").write_text(SPAWN)
    config(tmp_path, 'select = ["PFL201"]')
    config(tmp_path / "a", 'ignore = ["PFL201"]')
    config(tmp_path / "b", 'select = ["PFL301"]\nexclude = ["generated"]\nper-file-ignores = { "spawn.py" = ["PFL301"] }')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_each_file_has_the_configuration_nearest_to_it(monorepo: Path) -> None:
    assert found(check()) == [("a/spawn.py", "PFL301"), ("save.py", "PFL201")]
    assert found(check("a", "b/save.py", "save.py")) == [("a/spawn.py", "PFL301"), ("save.py", "PFL201")]
    (monorepo / "b" / "spawn.py").write_text("# nothing\n" + SPAWN)  # b's per-file-ignores name it
    (monorepo / "b" / "other.py").write_text(SPAWN)
    assert found(check("b")) == [("b/other.py", "PFL301")]


def test_a_folder_without_a_configuration_has_the_nearest_above_it(monorepo: Path) -> None:
    (monorepo / "a" / "sub").mkdir()
    (monorepo / "a" / "sub" / "spawn.py").write_text(SPAWN)
    (monorepo / "a" / "sub" / "pyproject.toml").write_text("[project]\nname = 'sub'\n")  # configures nothing
    assert found(check("a/sub")) == [("a/sub/spawn.py", "PFL301")]


def test_a_package_s_exclusions_apply_below_it_only(monorepo: Path) -> None:
    (monorepo / "generated").mkdir()
    (monorepo / "generated" / "save.py").write_text(SAVE)
    assert ("generated/save.py", "PFL201") in found(check())
    assert found(check("b")) == []  # b/generated left out, b/spawn.py ignored
    result = check("--force-exclude", "b/generated/spawn.py", "generated/save.py")
    assert found(result) == [("generated/save.py", "PFL201")]
    show = CliRunner().invoke(main, ["check", "--show-files"], catch_exceptions=False)
    assert show.stdout.splitlines() == [
        "a/save.py", "a/spawn.py", "b/save.py", "b/spawn.py", "generated/save.py", "save.py", "spawn.py"
    ]


def test_the_command_line_chooses_over_every_configuration(monorepo: Path) -> None:
    assert found(check("--select", "PFL201,PFL301")) == [
        ("a/spawn.py", "PFL301"), ("b/save.py", "PFL201"), ("save.py", "PFL201"), ("spawn.py", "PFL301")
    ]  # a still ignores PFL201, b's per-file-ignores still hold
    assert found(check("--ignore", "PFL301")) == [("save.py", "PFL201")]
    assert found(check("--extend-exclude", "a")) == [("save.py", "PFL201")]


def test_config_on_the_command_line_is_every_file_s(monorepo: Path) -> None:
    assert found(check("a")) == [("a/spawn.py", "PFL301")]  # a's own
    assert found(check("--config", "pyproject.toml", "a")) == [("a/save.py", "PFL201")]
    assert found(check("--config", "pyproject.toml")) == [
        ("a/save.py", "PFL201"), ("b/generated/save.py", "PFL201"), ("b/save.py", "PFL201"), ("save.py", "PFL201")
    ]


def test_a_bad_configuration_met_on_the_way_is_a_one_line_error(monorepo: Path) -> None:
    config(monorepo / "b", 'select = ["PFL9"]')
    result = check()
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: {monorepo / 'b' / 'pyproject.toml'}: [tool.pitfall-lint] select: 'PFL9' matches no rule code\n"
    assert found(check("a")) == [("a/spawn.py", "PFL301")]  # b's is not read


def test_a_range_is_judged_by_the_rules_of_its_file_s_configuration(monorepo: Path) -> None:
    """a ignores PFL201, so nothing tells whether its range of PFL201 is used, though the top folder runs PFL201."""
    (monorepo / "a" / "save.py").write_text(SAVE + "# pitfall-lint: disable[PFL201]\nx = 1\n# pitfall-lint: enable[PFL201]\n")
    assert found(check()) == [("a/spawn.py", "PFL301"), ("save.py", "PFL201")]
    config(monorepo / "a", "")
    assert found(check()) == [("a/save.py", "PFL001"), ("a/save.py", "PFL201"), ("a/spawn.py", "PFL301"), ("save.py", "PFL201")]


def test_the_cache_keeps_each_configuration_s_results_apart(monorepo: Path) -> None:
    args = ["check", "--preview", "--format", "json"]
    first = CliRunner().invoke(main, args, catch_exceptions=False)
    second = CliRunner().invoke(main, args, catch_exceptions=False)
    assert found(first) == found(second) == [("a/spawn.py", "PFL301"), ("save.py", "PFL201")]
