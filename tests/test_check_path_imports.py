"""The check path never imports torch, libcst or the code it checks: a pre-commit hook must stay cheap and safe."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from marks import REPO

PROBE = r"""
import json, sys
from click.testing import CliRunner
from pitfall_lint.cli import main
result = CliRunner().invoke(main, ["check", "--select", "ALL", "fixtures", *sys.argv[1:]])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "libcst", "numpy", "bad", "fixed"})
writers = sorted(m for m in sys.modules if m.startswith("pitfall_lint.report."))
print(json.dumps({"exit": result.exit_code, "heavy": heavy, "writers": writers, "output": result.output[-300:]}))
"""


def test_checking_the_fixtures_imports_nothing_heavy() -> None:
    completed = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=True)
    outcome = json.loads(completed.stdout)
    assert outcome["exit"] == 1, outcome["output"]  # it did check, and found the fixtures' pitfalls
    assert outcome["heavy"] == []


@pytest.mark.parametrize(
    ("args", "loaded"),
    [
        (["--format", "sarif", "--ignore", "PFL102,PFL301,PFL402"], False),  # PFL201's fix is unsafe: none to offer
        (["--format", "sarif"], True),
    ],
)
def test_sarif_loads_libcst_only_to_give_a_fix(args: list[str], loaded: bool) -> None:
    completed = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=REPO, capture_output=True, text=True, check=True)
    outcome = json.loads(completed.stdout)
    assert outcome["exit"] == 1, outcome["output"]
    assert any(m.startswith("libcst") for m in outcome["heavy"]) is loaded
    assert not any(m.split(".")[0] in {"torch", "numpy", "bad", "fixed"} for m in outcome["heavy"])


@pytest.mark.parametrize(
    ("output_format", "modules"),
    [
        ("text", ["text"]), ("json", ["json_format"]), ("sarif", ["sarif"]), ("gitlab", ["gitlab"]), ("junit", ["junit"]),
        ("json-lines", ["json_format", "json_lines"]), ("markdown", ["markdown", "text"]),  # what they build on
    ],
)
def test_a_format_loads_its_own_writer_only(output_format: str, modules: list[str]) -> None:
    completed = subprocess.run([sys.executable, "-c", PROBE, "--format", output_format], cwd=REPO, capture_output=True, text=True, check=True)
    outcome = json.loads(completed.stdout)
    assert outcome["exit"] == 1, outcome["output"]
    assert outcome["writers"] == [f"pitfall_lint.report.{module}" for module in modules]


START_PROBE = r"""
import json, sys
from click.testing import CliRunner
from pitfall_lint.cli import main
result = CliRunner().invoke(main, sys.argv[1:])
print(json.dumps({"exit": result.exit_code, "ours": sorted(m for m in sys.modules if m.startswith("pitfall_lint"))}))
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["check", "--help"]])
def test_start_up_imports_only_the_command_line(args: list[str]) -> None:
    """What a run may not need is imported by the command that runs it: the checker, the project model and the
    rules' analyses cost `--version` nothing (the pre-commit hook starts a process on every commit)."""
    completed = subprocess.run([sys.executable, "-c", START_PROBE, *args], cwd=REPO, capture_output=True, text=True, check=True)
    outcome = json.loads(completed.stdout)
    assert outcome == {
        "exit": 0,
        "ours": ["pitfall_lint", "pitfall_lint.cli", "pitfall_lint.diagnostic", "pitfall_lint.notebook", "pitfall_lint.report"],
    }
