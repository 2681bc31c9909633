"""`flake8 --select PFL` reports the codes, lines and columns that `pitfall-lint check` reports, on every fixture."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from marks import REPO

FIXTURES = sorted((REPO / "fixtures").glob("PFL*/*.py"))


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_flake8_plugin_matches_the_cli(fixture) -> None:
    relative = str(fixture.relative_to(REPO))
    flake8 = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "PFL", "--format", "%(path)s:%(row)d:%(col)d:%(code)s", relative],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert flake8.returncode in (0, 1), flake8.stderr
    from_flake8 = sorted(tuple(line.rsplit(":", 3)) for line in flake8.stdout.splitlines())
    cli = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", "--format", "json", relative],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    from_cli = sorted((d["path"], str(d["line"]), str(d["column"]), d["code"]) for d in json.loads(cli.stdout)["diagnostics"])
    assert from_flake8 == from_cli
