"""Preview rules: run only with --preview or `preview = true`, named outright without it a warning; `rules` shows
each rule's state and its first-run figures."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint import maturity, selection
from pitfall_lint.cli import main
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.flake8_plugin import Flake8Plugin
from pitfall_lint.rules import registered_rules
from pitfall_lint.rules.base import Rule

# A pitfall of a rule on by default and not in preview (PFL301), beside the synthetic preview rules' print().
SPAWN = "import torch.multiprocessing as mp\ndef w(i):\n    pass\nmp.spawn(w, nprocs=2)\n"


@pytest.fixture
def preview_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two synthetic preview rules that report every print(): PFL901 on by default, PFL902 off."""
    real = registered_rules()  # the table is written from the rule modules: it never holds these subclasses of Rule

    class PrintCall(Rule):
        info = RuleInfo("PFL901", "print-call", "A print() call.", "warning", preview=True)
        triggers = (("print",),)
        subscriptions = (ast.Call,)

        def visit(self, node: ast.AST) -> None:
            assert isinstance(node, ast.Call)
            if isinstance(node.func, ast.Name) and node.func.id == "print":
                self.report(node, "print() called")

    class PrintCallOff(PrintCall):
        info = RuleInfo("PFL902", "print-call-off", "A print() call, off by default.", "info", enabled_by_default=False, preview=True)

    monkeypatch.setattr(selection, "registered_rules", lambda: (*real, PrintCall, PrintCallOff))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preview_rules: None) -> Path:
    (tmp_path / "run.py").write_text(SPAWN)
    (tmp_path / "shout.py").write_text("print('hello')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def found(*args: str) -> list[str]:
    result = run("check", "--no-cache", "--format", "json", *args)
    assert result.exit_code in (0, 1), result.stderr
    return [d["code"] for d in json.loads(result.stdout)["diagnostics"]]


def test_outside_preview_mode_no_selector_runs_a_preview_rule(project: Path) -> None:
    assert found() == ["PFL301"]
    assert found("--select", "ALL") == ["PFL301"]
    assert found("--select", "PFL9") == []
    assert found("--extend-select", "PFL") == ["PFL301"]


def test_in_preview_mode_a_preview_rule_runs_as_its_default_says(project: Path) -> None:
    assert found("--preview") == ["PFL301", "PFL901"]
    assert found("--preview", "--select", "ALL") == ["PFL301", "PFL901", "PFL902"]
    assert found("--preview", "--extend-select", "PFL902") == ["PFL301", "PFL901", "PFL902"]
    assert found("--preview", "--select", "PFL902") == ["PFL902"]
    assert found("--preview", "--ignore", "PFL9") == ["PFL301"]


def test_a_preview_rule_named_without_preview_is_a_warning_and_does_not_run(project: Path) -> None:
    result = run("check", "--no-cache", "--select", "PFL901,PFL301", "run.py", "shout.py")
    assert result.exit_code == 1
    assert result.stderr == "warning: PFL901 is a preview rule; add --preview to run it\n"
    assert [line.split()[1] for line in result.stdout.splitlines() if ": PFL" in line] == ["PFL301"]
    # A real preview rule likewise.
    result = run("check", "--no-cache", "--select", "PFL201", "run.py")
    assert (result.exit_code, result.stderr) == (0, "warning: PFL201 is a preview rule; add --preview to run it\n")
    result = run("check", "--no-cache", "--extend-select", "pfl902", "shout.py")
    assert (result.exit_code, result.stderr) == (0, "warning: PFL902 is a preview rule; add --preview to run it\n")
    # A prefix, an ignored code or preview mode: nothing to warn of.
    for args in (["--select", "PFL9"], ["--select", "PFL901", "--ignore", "PFL901"], ["--preview", "--select", "PFL901"]):
        assert run("check", "--no-cache", *args, "shout.py").stderr == ""


def test_verify_takes_the_same_preview_options(project: Path) -> None:
    result = run("verify", "shout.py", "--select", "PFL901")
    assert result.stderr.splitlines()[0] == "warning: PFL901 is a preview rule; add --preview to run it"
    assert "warning:" not in run("verify", "shout.py", "--preview", "--select", "PFL901").stderr


def test_configured_preview_and_no_preview_on_the_command_line(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.pitfall-lint]\npreview = true\n")
    assert found() == ["PFL301", "PFL901"]
    assert found("--no-preview") == ["PFL301"]
    (project / "pyproject.toml").write_text("[tool.pitfall-lint]\npreview = false\n")
    assert found() == ["PFL301"]
    assert found("--preview") == ["PFL301", "PFL901"]


def test_a_preview_setting_that_is_not_a_boolean_is_one_error_line(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.pitfall-lint]\npreview = "yes"\n')
    result = run("check", "shout.py")
    assert result.exit_code == 2
    assert result.stderr == f"error: {project / 'pyproject.toml'}: [tool.pitfall-lint] preview: expected true or false, got 'yes'\n"


@pytest.mark.parametrize(("configured", "expected"), [("", []), ("preview = true\n", ["PFL901"])])
def test_flake8_runs_preview_rules_only_when_configured(
    project: Path, monkeypatch: pytest.MonkeyPatch, configured: str, expected: list[str]
) -> None:
    (project / "pyproject.toml").write_text(f"[tool.pitfall-lint]\n{configured}")
    for state in ("_config", "_engine", "_projects"):  # parse_options sets them on the class: restored afterwards
        monkeypatch.setattr(Flake8Plugin, state, getattr(Flake8Plugin, state))
    Flake8Plugin.parse_options(argparse.Namespace(select=None, extend_select=None))
    lines = ["print('hello')\n"]
    reported = Flake8Plugin(ast.parse("".join(lines)), "shout.py", lines).run()
    assert [message.split()[0] for _, _, message, _ in reported] == expected


@pytest.fixture
def figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Synthetic first-run figures, so that the rows below do not move with each batch of the log."""
    def row(judged: int, true: int, debatable: int, misses: int) -> dict:
        return {
            "repositories": 6, "judged": judged, "true": true, "false": judged - true, "debatable": debatable,
            "misses": misses, "precision": round(true / judged, 4) if judged else None,
            "recall": round(true / (true + misses), 4) if true + misses else None,
        }

    path = tmp_path / "first_run.json"
    path.write_text(json.dumps({"PFL301": row(12, 11, 0, 1), "PFL901": row(0, 0, 2, 0), "all": row(12, 11, 2, 1)}))
    monkeypatch.setattr(maturity, "FIRST_RUN", path)


def test_rules_shows_each_rules_state_and_first_run_figures(preview_rules: None, figures: None) -> None:
    lines = {line.split()[0]: line for line in run("rules").stdout.splitlines()}
    assert lines["code"] == "code    name                             default severity verify fix    state   first run  summary"
    assert lines["PFL301"] == (
        "PFL301  missing-main-guard               on      error    yes    safe   on      11/12 92 % "
        'Processes started at import time, outside `if __name__ == "__main__":`.'
    )
    # The real rules made preview rules on 2026-11-25 (no figures of theirs in this synthetic log).
    assert lines["PFL201"].split()[2:8] == ["on", "error", "yes", "unsafe", "preview", "-"]
    assert lines["PFL306"].split()[2:8] == ["on", "warning", "yes", "-", "preview", "-"]
    assert lines["PFL202"].split()[2:8] == ["off", "warning", "yes", "unsafe", "off", "-"]
    assert lines["PFL901"] == "PFL901  print-call                       on      warning  no     -      preview -          A print() call."
    assert lines["PFL902"].split()[2:8] == ["off", "info", "no", "-", "preview", "-"]


def test_rules_json_has_preview_and_first_run(preview_rules: None, figures: None) -> None:
    rows = {row["code"]: row for row in json.loads(run("rules", "--format", "json").stdout)}
    assert rows["PFL301"]["preview"] is False
    assert (rows["PFL201"]["preview"], rows["PFL306"]["preview"]) == (True, True)
    assert rows["PFL301"]["first_run"] == {
        "repositories": 6, "judged": 12, "true": 11, "false": 1, "debatable": 0, "misses": 1, "precision": 0.9167, "recall": 0.9167,
    }
    assert rows["PFL901"] == {
        "code": "PFL901", "name": "print-call", "summary": "A print() call.", "severity": "warning",
        "enabled_by_default": True, "verifiable": False, "fix": None, "preview": True,
        "first_run": {
            "repositories": 6, "judged": 0, "true": 0, "false": 0, "debatable": 2, "misses": 0, "precision": None, "recall": None,
        },
    }
    assert rows["PFL202"]["first_run"] is None


def test_rules_without_its_first_run_figures_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maturity, "FIRST_RUN", tmp_path / "first_run.json")
    result = run("rules")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: the first-run figures (first_run.json) are missing from this installation or unreadable\n"
