"""Preview rules: run only with --preview or `preview = true`; named by their code without it, a warning."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint import selection
from pitfall_lint.cli import main
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.flake8_plugin import Flake8Plugin
from pitfall_lint.rules import all_rules
from pitfall_lint.rules.base import Rule

SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"


@pytest.fixture
def preview_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two synthetic preview rules that report every print(): PFL901 on by default, PFL902 off."""
    real = all_rules()  # the registry is filled before these subclasses of Rule exist, so it never holds them

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

    monkeypatch.setattr(selection, "all_rules", lambda: (*real, PrintCall, PrintCallOff))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preview_rules: None) -> Path:
    (tmp_path / "save.py").write_text(SAVE)
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
    assert found() == ["PFL201"]
    assert found("--select", "ALL") == ["PFL201"]
    assert found("--select", "PFL9") == []
    assert found("--extend-select", "PFL") == ["PFL201"]


def test_in_preview_mode_a_preview_rule_runs_as_its_default_says(project: Path) -> None:
    assert found("--preview") == ["PFL201", "PFL901"]
    assert found("--preview", "--select", "ALL") == ["PFL201", "PFL901", "PFL902"]
    assert found("--preview", "--extend-select", "PFL902") == ["PFL201", "PFL901", "PFL902"]
    assert found("--preview", "--select", "PFL902") == ["PFL902"]
    assert found("--preview", "--ignore", "PFL9") == ["PFL201"]


def test_a_preview_rule_named_without_preview_is_a_warning_and_does_not_run(project: Path) -> None:
    result = run("check", "--no-cache", "--select", "PFL901,PFL201", "save.py", "shout.py")
    assert result.exit_code == 1
    assert result.stderr == "warning: PFL901 is a preview rule; add --preview to run it\n"
    assert [line.split()[1] for line in result.stdout.splitlines()[:-1]] == ["PFL201"]
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
    assert found() == ["PFL201", "PFL901"]
    assert found("--no-preview") == ["PFL201"]
    (project / "pyproject.toml").write_text("[tool.pitfall-lint]\npreview = false\n")
    assert found() == ["PFL201"]
    assert found("--preview") == ["PFL201", "PFL901"]


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
