"""The formats for CI systems, each read by what reads it there: JSON Lines, GitLab Code Quality (against GitLab's
documented format, with fingerprints that survive an edit above the finding), JUnit XML (parsed by junitparser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pitfall_lint.cli import main

from marks import REPO

SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\ntorch.save({}, 'd.pt')\n"
SPAWN = "import torch.multiprocessing as mp\ndef work(rank):\n    pass\nmp.spawn(work, nprocs=2)\n"
SAVE_MESSAGE = "`torch.save` runs on every rank, which then overwrite one file; guard it with `if dist.get_rank() == 0:` or put the rank in the path"
SPAWN_MESSAGE = (
    "`torch.multiprocessing.spawn` starts processes at import time with the spawn start method, on every platform: "
    "each child re-imports the module, reaches it again and fails while bootstrapping; move it under "
    '`if __name__ == "__main__":`'
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two files, three findings: two saves in save.py, a spawn in spawn.py."""
    (tmp_path / "save.py").write_text(SAVE)
    (tmp_path / "spawn.py").write_text(SPAWN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    return tmp_path


def check(*args: str) -> Result:
    # --preview: PFL201 is a preview rule; these tests use its findings only as findings to report.
    return CliRunner().invoke(main, ["check", "--no-cache", "--preview", *args], catch_exceptions=False)


# --- JSON Lines ----------------------------------------------------------------------------------------------------


def test_json_lines_is_the_json_formats_diagnostics_one_a_line(project: Path) -> None:
    result = check("--format", "json-lines", ".")
    assert result.exit_code == 1
    diagnostics = json.loads(check("--format", "json", ".").stdout)["diagnostics"]
    assert [(d["path"], d["line"], d["code"]) for d in diagnostics] == [("save.py", 4, "PFL201"), ("save.py", 5, "PFL201"), ("spawn.py", 4, "PFL301")]
    assert result.stdout == "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in diagnostics)


def test_json_lines_of_a_clean_run_is_empty(project: Path) -> None:
    (project / "clean.py").write_text("x = 1\n")
    result = check("--format", "json-lines", "clean.py")
    assert (result.exit_code, result.stdout) == (0, "")


# --- GitLab Code Quality -------------------------------------------------------------------------------------------


def _issue(code: str, message: str, fingerprint: str, path: str, line: int, end_column: int) -> dict:
    begin, end = {"line": line, "column": 1}, {"line": line, "column": end_column}
    return {
        "check_name": code,
        "description": f"{code}: {message}",
        "severity": "major",
        "fingerprint": fingerprint,
        "location": {"path": path, "positions": {"begin": begin, "end": end}},
    }


def test_gitlab_report(project: Path) -> None:
    result = check("--format", "gitlab", ".")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == [
        _issue("PFL201", SAVE_MESSAGE, "0e944ca829c18356", "save.py", 4, 23),
        _issue("PFL201", SAVE_MESSAGE, "6f18194cedfeeea5", "save.py", 5, 23),
        _issue("PFL301", SPAWN_MESSAGE, "71e4052dcd685807", "spawn.py", 4, 25),
    ]
    assert result.stdout.startswith("[\n  {\n")  # GitLab rejects a byte order mark; the JSON is indented as Ruff's
    (project / "clean.py").write_text("x = 1\n")
    assert check("--format", "gitlab", "clean.py").stdout == "[]\n"


@pytest.fixture(scope="module")
def gitlab_validator():
    from jsonschema import Draft202012Validator

    schema = json.loads((Path(__file__).parent / "gitlab_code_quality.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_gitlab_report_of_every_fixture_follows_gitlabs_format(gitlab_validator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    issues = json.loads(check("--select", "ALL", "--format", "gitlab", "fixtures").stdout)
    assert [error.message for error in gitlab_validator.iter_errors(issues)] == []
    assert len(issues) == len(json.loads(check("--select", "ALL", "--format", "json", "fixtures").stdout)["diagnostics"])
    fingerprints = {issue["fingerprint"] for issue in issues}
    assert len(fingerprints) == len(issues)  # GitLab shows issues with one fingerprint as one
    # A notebook's finding is placed on the .ipynb's line, and its cell is said in the description.
    notebook = next(issue for issue in issues if issue["location"]["path"].endswith(".ipynb"))
    assert set(notebook["location"]) == {"path", "lines"}
    assert notebook["description"].startswith(f"{notebook['check_name']}: cell ")


def _fingerprints(result: Result) -> list[tuple[str, int, str]]:
    return [(i["location"]["path"], i["location"]["positions"]["begin"]["line"], i["fingerprint"]) for i in json.loads(result.stdout)]


def test_gitlab_fingerprints_survive_lines_added_above(project: Path) -> None:
    before = _fingerprints(check("--format", "gitlab", "."))
    (project / "save.py").write_text("import os\n\n" + SAVE)
    (project / "spawn.py").write_text("# spawns\n" + SPAWN)
    after = _fingerprints(check("--format", "gitlab", "."))
    assert [(path, line) for path, line, _ in after] == [("save.py", 6), ("save.py", 7), ("spawn.py", 5)]
    assert [fingerprint for _, _, fingerprint in after] == [fingerprint for _, _, fingerprint in before]
    # A third copy of the same save is a new issue: the two known ones keep theirs.
    (project / "save.py").write_text("import os\n\n" + SAVE + "torch.save({}, 'c.pt')\n")
    third = _fingerprints(check("--format", "gitlab", "save.py"))
    assert [fingerprint for _, _, fingerprint in third[:2]] == [fingerprint for _, _, fingerprint in before[:2]]
    assert third[2][2] not in {fingerprint for _, _, fingerprint in before}


def test_gitlab_paths_are_relative_to_the_gitlab_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GitLab links a path from the repository's root: in a job, $CI_PROJECT_DIR, wherever the check ran from."""
    (project / "sub").mkdir()
    (project / "sub" / "spawn.py").write_text(SPAWN)
    monkeypatch.chdir(project / "sub")
    assert [path for path, _, _ in _fingerprints(check("--format", "gitlab", str(project / "sub")))] == ["spawn.py"]
    monkeypatch.setenv("CI_PROJECT_DIR", str(project))
    assert [path for path, _, _ in _fingerprints(check("--format", "gitlab", "."))] == ["sub/spawn.py"]


# --- JUnit XML -----------------------------------------------------------------------------------------------------


def _xml_attribute(text: str) -> str:
    return text.replace('"', "&quot;")


def test_junit_report(project: Path) -> None:
    result = check("--format", "junit", ".")
    assert result.exit_code == 1
    save, spawn = _xml_attribute(SAVE_MESSAGE), _xml_attribute(SPAWN_MESSAGE)
    assert result.stdout.splitlines() == [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<testsuites name="pitfall-lint" tests="3" failures="3" errors="0" skipped="0">',
        '  <testsuite name="save.py" tests="2" failures="2" errors="0" skipped="0">',
        '    <testcase name="PFL201 unguarded-torch-save at line 4, column 1" classname="save" file="save.py" line="4" column="1">',
        f'      <failure message="{save}" type="PFL201">save.py:4:1: PFL201 {SAVE_MESSAGE}</failure>',
        "    </testcase>",
        '    <testcase name="PFL201 unguarded-torch-save at line 5, column 1" classname="save" file="save.py" line="5" column="1">',
        f'      <failure message="{save}" type="PFL201">save.py:5:1: PFL201 {SAVE_MESSAGE}</failure>',
        "    </testcase>",
        "  </testsuite>",
        '  <testsuite name="spawn.py" tests="1" failures="1" errors="0" skipped="0">',
        '    <testcase name="PFL301 missing-main-guard at line 4, column 1" classname="spawn" file="spawn.py" line="4" column="1">',
        f'      <failure message="{spawn}" type="PFL301">spawn.py:4:1: PFL301 {SPAWN_MESSAGE}</failure>',
        "    </testcase>",
        "  </testsuite>",
        "</testsuites>",
    ]


def test_junit_report_is_read_by_a_junit_consumer(project: Path) -> None:
    from junitparser import Failure, JUnitXml

    report = JUnitXml.fromstring(check("--format", "junit", ".").stdout)
    assert (report.tests, report.failures, report.errors, report.skipped) == (3, 3, 0, 0)
    cases = [(suite.name, case.classname, case.name, case.result) for suite in report for case in suite]
    assert [(suite, classname, name) for suite, classname, name, _ in cases] == [
        ("save.py", "save", "PFL201 unguarded-torch-save at line 4, column 1"),
        ("save.py", "save", "PFL201 unguarded-torch-save at line 5, column 1"),
        ("spawn.py", "spawn", "PFL301 missing-main-guard at line 4, column 1"),
    ]
    failures = [result for *_, results in cases for result in results]
    assert all(isinstance(failure, Failure) for failure in failures)
    assert [(failure.type, failure.message) for failure in failures] == [
        ("PFL201", SAVE_MESSAGE), ("PFL201", SAVE_MESSAGE), ("PFL301", SPAWN_MESSAGE)
    ]


def test_junit_report_of_every_fixture_keeps_each_finding_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer keys a testcase by its suite, class and name (GitLab merges two with one key): each finding has its own."""
    from junitparser import JUnitXml

    monkeypatch.chdir(REPO)
    report = JUnitXml.fromstring(check("--select", "ALL", "--format", "junit", "fixtures").stdout)
    findings = len(json.loads(check("--select", "ALL", "--format", "json", "fixtures").stdout)["diagnostics"])
    declared = [(report.tests, report.failures)] + [(suite.tests, suite.failures) for suite in report]
    report.update_statistics()  # junitparser counts the testcases itself
    assert declared == [(report.tests, report.failures)] + [(suite.tests, suite.failures) for suite in report]
    assert report.tests == report.failures == findings
    keys = {(suite.name, case.classname, case.name) for suite in report for case in suite}
    assert len(keys) == findings
    notebook = next(case for suite in report if suite.name.endswith(".ipynb") for case in suite)
    assert " at cell " in notebook.name


def test_junit_report_of_a_clean_run_is_one_passing_testcase(project: Path) -> None:
    from junitparser import JUnitXml

    (project / "clean.py").write_text("x = 1\n")
    result = check("--format", "junit", "clean.py")
    assert result.exit_code == 0
    report = JUnitXml.fromstring(result.stdout)
    assert (report.tests, report.failures) == (1, 0)
    assert [(suite.name, case.name, case.is_passed) for suite in report for case in suite] == [("pitfall-lint", "All checks passed", True)]


# --- Markdown (the GitHub step summary) ----------------------------------------------------------------------------


def test_markdown_summary(project: Path) -> None:
    result = check("--format", "markdown", ".")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "## pitfall-lint",
        "",
        "Found 3 diagnostics in 2 of 2 files checked.",
        "",
        "[*] 1 fixable with `--fix` (2 unsafe fixes available with `--fix --unsafe-fixes`).",
        "",
        "| Code | Rule | Findings | Fixable with `--fix` |",
        "| --- | --- | ---: | ---: |",
        "| PFL201 | unguarded-torch-save | 2 | 0 |",
        "| PFL301 | missing-main-guard | 1 | 1 |",
        "",
        "| Place | Code | Message |",
        "| --- | --- | --- |",
        f"| `save.py:4:1` | PFL201 | {SAVE_MESSAGE} |",
        f"| `save.py:5:1` | PFL201 | {SAVE_MESSAGE} |",
        f"| `spawn.py:4:1` | PFL301 | {SPAWN_MESSAGE} |",
    ]
    (project / "clean.py").write_text("x = 1\n")
    assert check("--format", "markdown", "clean.py").stdout == "## pitfall-lint\n\nAll checks passed! (1 file checked)\n"


def test_markdown_summary_shows_the_first_hundred_findings(project: Path) -> None:
    """GitHub drops a step summary over 1 MiB: an old codebase's thousands of findings are counted, not listed."""
    (project / "save.py").write_text(SAVE + "torch.save({}, 'c.pt')\n" * 100)
    lines = check("--format", "markdown", "save.py").stdout.splitlines()
    assert lines[2] == "Found 102 diagnostics in 1 of 1 file checked."
    assert lines[8] == "| PFL201 | unguarded-torch-save | 102 | 0 |"
    rows = [line for line in lines if line.startswith("| `save.py:")]
    assert (rows[0].split(" | ")[0], rows[-1].split(" | ")[0], len(rows)) == ("| `save.py:4:1`", "| `save.py:103:1`", 100)
    assert lines[-2:] == ["", "2 more not shown here."]


def test_markdown_keeps_a_message_in_its_cell_and_its_prose_plain() -> None:
    from io import StringIO

    from pitfall_lint.diagnostic import PARSE_ERROR, Diagnostic
    from pitfall_lint.report import Report
    from pitfall_lint.report.markdown import write

    message = "a | b `x|y` on <module '__main__'> [1] *args\nnext"
    d = Diagnostic("a_b|c.py", 1, 1, PARSE_ERROR.code, PARSE_ERROR.name, 1, 2, "error", message)
    out = StringIO()
    write(Report([d], [PARSE_ERROR], 1), out)
    assert out.getvalue().splitlines()[-1] == (
        "| `a_b\\|c.py:1:1` | PFL000 | a \\| b `x\\|y` on \\<module '\\_\\_main\\_\\_'\\> \\[1\\] \\*args next |"
    )
