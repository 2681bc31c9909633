"""The flake8 plugin reports what `pitfall-lint check` reports with the same configuration: on every fixture, with
`[tool.pitfall-lint]` (select, extend-select, ignore, per-file-ignores), and with flake8's own --select and
--extend-select, which can turn on a rule that is off by default."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from marks import REPO

FIXTURES = [str(p.relative_to(REPO)) for p in sorted((REPO / "fixtures").glob("PFL*/*.py"))]
Finding = tuple[str, int, int, str]


def flake8(*args: str, cwd: Path) -> list[Finding]:
    """flake8's PFL findings; flake8's own codes (E501, ...) are left out."""
    run = subprocess.run(
        [sys.executable, "-m", "flake8", "--format", "%(path)s:%(row)d:%(col)d:%(code)s", *args],
        cwd=cwd, capture_output=True, text=True, check=False,
    )
    assert run.returncode in (0, 1), run.stderr
    rows = [line.rsplit(":", 3) for line in run.stdout.splitlines()]
    return sorted((path, int(line), int(column), code) for path, line, column, code in rows if code.startswith("PFL"))


def check(*args: str, cwd: Path) -> list[Finding]:
    run = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", "--format", "json", *args],
        cwd=cwd, capture_output=True, text=True, check=False,
    )
    assert run.returncode in (0, 1), run.stderr
    return sorted((d["path"], d["line"], d["column"], d["code"]) for d in json.loads(run.stdout)["diagnostics"])


@pytest.mark.parametrize(
    ("flake8_args", "check_args"),
    [([], []), (["--select", "PFL"], ["--select", "PFL"]), (["--extend-select", "PFL202"], ["--extend-select", "PFL202"])],
    ids=["default", "select-all", "extend-select-off-by-default"],
)
def test_flake8_matches_the_cli_on_every_fixture(flake8_args: list[str], check_args: list[str]) -> None:
    found = flake8(*flake8_args, *FIXTURES, cwd=REPO)
    assert found == check(*check_args, *FIXTURES, cwd=REPO)
    # Not vacuous: every rule with a static check has a bad fixture, and the selection matters.
    codes = {code for _, _, _, code in found}
    assert ("PFL202" in codes) is bool(flake8_args) and ("PFL501" in codes) is (flake8_args == ["--select", "PFL"])


def _copy(fixture: str, project: Path, name: str) -> None:
    (project / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "fixtures" / fixture / "bad.py", project / name)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    _copy("PFL202-load-without-map-location", tmp_path, "load.py")
    _copy("PFL301-missing-main-guard", tmp_path, "spawn.py")
    _copy("PFL201-unguarded-torch-save", tmp_path, "save.py")
    _copy("PFL201-unguarded-torch-save", tmp_path, "legacy/save.py")
    return tmp_path


def test_flake8_reads_the_configuration(project: Path) -> None:
    # preview = true: the per-file-ignores example is PFL201, a preview rule since 2026-11-25, and the configuration
    # is the one way to run preview rules under flake8.
    (project / "pyproject.toml").write_text(
        '[tool.pitfall-lint]\npreview = true\nextend-select = ["PFL202"]\nignore = ["PFL301"]\n'
        '[tool.pitfall-lint.per-file-ignores]\n"legacy/*" = ["PFL201"]\n'
    )
    (project / "sub").mkdir()  # found from a subfolder too, as `check` finds it
    expected = [("../load.py", 21, 27, "PFL202"), ("../save.py", 24, 5, "PFL201")]
    assert flake8("..", cwd=project / "sub") == expected
    assert check("..", cwd=project / "sub") == expected


def test_flake8_select_turns_on_a_rule_that_is_off_by_default(project: Path) -> None:
    # By default: PFL301, on; not PFL202, off; not PFL201, a preview rule since 2026-11-25.
    assert flake8(".", cwd=project) == [("./spawn.py", 16, 1, "PFL301")]
    assert flake8("--select", "PFL202", ".", cwd=project) == [("./load.py", 21, 27, "PFL202")]
    assert flake8("--select", "E9", ".", cwd=project) == []  # none of ours selected: none run


def test_a_bad_configuration_stops_flake8_with_one_line(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.pitfall-lint]\nignore = ["PFL9"]\n')
    run = subprocess.run([sys.executable, "-m", "flake8", "save.py"], cwd=project, capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == f"error: {project / 'pyproject.toml'}: [tool.pitfall-lint] ignore: 'PFL9' matches no rule code\n"
