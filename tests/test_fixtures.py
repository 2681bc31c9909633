"""Every bundled fixture reports exactly what its `# expect:` marks say; fixed ones report nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from marks import REPO, expected, expected_at_runtime, reported

FIXTURES = sorted((REPO / "fixtures").glob("PFL*/*.py"))


def test_every_rule_has_a_bad_and_a_fixed_fixture() -> None:
    from pitfall_lint.rules import all_rules

    for rule in all_rules():
        folder = REPO / "fixtures" / f"{rule.info.code}-{rule.info.name}"
        if (folder / "bad.ipynb").is_file():  # a notebook rule: its marks are checked in test_notebooks.py
            assert (folder / "fixed.ipynb").is_file(), folder
            continue
        assert (folder / "bad.py").is_file() and (folder / "fixed.py").is_file(), folder
        # A rule that only verify can see marks its bad line with `# verify-expect:` instead.
        mark = expected_at_runtime if rule.runtime_only else expected
        assert mark((folder / "bad.py").read_text()), f"{folder}/bad.py marks nothing"
        assert not mark((folder / "fixed.py").read_text()), f"{folder}/fixed.py expects findings"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_reports_exactly_its_marks(fixture) -> None:
    source = fixture.read_text()
    assert reported(source, str(fixture)) == expected(source)


def test_cli_on_fixture_folder_reports_exactly_the_marks() -> None:
    from test_notebooks import cell_marks

    result = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", "--preview", "--select", "ALL", "--format", "json", "fixtures"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 1, result.stderr
    found = {(d["path"], d["code"], d["cell"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]}
    every_file = sorted((REPO / "fixtures").rglob("*.py"))  # the multi-file projects too
    marked = {(str(f.relative_to(REPO)), code, None, line) for f in every_file for code, line in expected(f.read_text())}
    for notebook in (REPO / "fixtures").glob("PFL*/*.ipynb"):
        marked |= {(str(notebook.relative_to(REPO)), code, cell, line) for code, cell, line in cell_marks(notebook)}
    assert found == marked
