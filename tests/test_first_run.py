"""bench/first_run.py: the figures of the first-run log, on two synthetic repositories."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("first_run", REPO / "bench" / "first_run.py")
assert spec and spec.loader
first_run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(first_run)


def finding(code: str, verdict: str) -> dict:
    return {"code": code, "path": "train.py", "line": 1, "verdict": verdict, "evidence": "synthetic"}


def miss(code: str) -> dict:
    return {"code": code, "path": "train.py", "line": 2, "evidence": "synthetic"}


def entry(repo: str, checked_on: str, findings: list[dict], misses: list[dict]) -> dict:
    return {
        "repo": repo, "commit": "0" * 40, "checked_on": checked_on, "kind": "template",
        "pitfall_lint_commit": "e7322d7", "files": 1, "findings": findings, "misses": misses,
    }


@pytest.fixture(autouse=True)
def rules_run_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """PFL401 on by default, PFL201 and PFL306 in preview: the "default" row counts PFL401 alone."""
    monkeypatch.setattr(first_run, "default_codes", lambda: frozenset({"PFL401"}))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    older = entry(
        "someone/older", "2026-11-20",
        [finding("PFL201", "true"), finding("PFL201", "false"), finding("PFL201", "debatable"), finding("PFL306", "true")],
        [miss("PFL201"), miss("PFL401")],
    )
    newer = entry("someone/newer", "2026-11-25", [finding("PFL306", "false"), finding("PFL306", "true")], [miss("PFL306")])
    (tmp_path / "older.json").write_text(json.dumps(older))
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    return tmp_path


def test_figures_per_rule_and_overall_leave_debatable_out_of_both(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert first_run.main(["--log", str(log)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "2 repositories: someone/newer, someone/older",
        "1 kinds: template 2",
        "rule       findings       true      false  debatable     misses  precision     recall",
        "PFL201            3          1          1          1          1       50 %       50 %",
        "PFL306            3          2          1          0          1       67 %       67 %",
        "PFL401            0          0          0          0          1          -        0 %",
        "default           0          0          0          0          1          -        0 %",
        "all               6          3          2          1          3       60 %       50 %",
    ]


def test_since_keeps_the_repositories_checked_on_or_after_the_date(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert first_run.main(["--log", str(log), "--since", "2026-11-25", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "repositories": ["someone/newer"],
        "rules": {
            "PFL306": {"findings": 2, "true": 1, "false": 1, "debatable": 0, "misses": 1, "precision": 0.5, "recall": 0.5},
            "default": {"findings": 0, "true": 0, "false": 0, "debatable": 0, "misses": 0, "precision": None, "recall": None},
            "all": {"findings": 2, "true": 1, "false": 1, "debatable": 0, "misses": 1, "precision": 0.5, "recall": 0.5},
        },
    }
    assert first_run.main(["--log", str(log), "--since", "2026-11-26"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "0 repositories"


def test_a_repository_enters_the_log_once(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (log / "again.json").write_text(json.dumps(entry("someone/older", "2026-11-26", [], [])))
    assert first_run.main(["--log", str(log)]) == 2
    assert capsys.readouterr().err == f"error: {log / 'older.json'}: someone/older is already logged in again.json: a repository enters once\n"


def test_bad_input_is_one_error_line(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert first_run.main(["--log", str(log), "--since", "25/11/2026"]) == 2
    assert capsys.readouterr().err == "error: --since '25/11/2026' is not a YYYY-MM-DD date\n"
    (log / "older.json").write_text(json.dumps(entry("someone/older", "2026-11-20", [finding("PFL201", "maybe")], [])))
    assert first_run.main(["--log", str(log)]) == 2
    assert capsys.readouterr().err == f"error: {log / 'older.json'}: finding 0 needs a 'code' and a 'verdict' of true, false, debatable\n"


def test_write_records_the_whole_log_for_the_installed_tool(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(first_run, "INSTALLED", tmp_path / "first_run.json")
    assert first_run.main(["--log", str(log), "--write"]) == 0
    written = json.loads((tmp_path / "first_run.json").read_text(encoding="utf-8"))
    assert written["PFL201"] == {
        "repositories": 2, "judged": 2, "true": 1, "false": 1, "debatable": 1, "misses": 1, "precision": 0.5, "recall": 0.5,
    }
    assert written["PFL401"] == {
        "repositories": 2, "judged": 0, "true": 0, "false": 0, "debatable": 0, "misses": 1, "precision": None, "recall": 0.0,
    }
    assert list(written) == ["PFL201", "PFL306", "PFL401", "default", "all"]
    assert first_run.main(["--log", str(log), "--write", "--since", "2026-11-25"]) == 2
    assert capsys.readouterr().err == "error: --write records the whole log; leave out --since and --batch\n"


def test_batch_keeps_the_repositories_of_that_batch(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The proof batch is named in its entries: checked the same day as a tuning batch, it is still told apart."""
    proof = entry("someone/proof", "2026-11-25", [finding("PFL201", "true")], [])
    proof["batch"], proof["kind"] = "proof-1", "research"
    (log / "proof.json").write_text(json.dumps(proof))
    assert first_run.main(["--log", str(log), "--batch", "proof-1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "1 repositories: someone/proof",
        "1 kinds: research 1",
        "rule       findings       true      false  debatable     misses  precision     recall",
        "PFL201            1          1          0          0          0      100 %      100 %",
        "default           0          0          0          0          0          -          -",
        "all               1          1          0          0          0      100 %      100 %",
    ]
    assert first_run.main(["--log", str(log), "--batch", "proof-1", "--write"]) == 2
