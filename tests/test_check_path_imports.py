"""The check path never imports torch, libcst or the code it checks: a pre-commit hook must stay cheap and safe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


RULES_PROBE = r"""
import json, sys
from click.testing import CliRunner
from pitfall_lint.cli import main
result = CliRunner().invoke(main, sys.argv[1:])
rules = sorted(m.rpartition(".")[2] for m in sys.modules if m.startswith("pitfall_lint.rules.") and m.rpartition(".")[2] not in {"base", "registry", "table"})
analyses = sorted(m for m in sys.modules if m.startswith("pitfall_lint.analysis."))
print(json.dumps({"exit": result.exit_code, "output": result.output, "rules": rules, "analyses": analyses}))
"""


def _imported(args: list[str], cwd: Path) -> dict:
    completed = subprocess.run([sys.executable, "-c", RULES_PROBE, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout)


def test_a_file_without_any_rule_s_words_imports_no_rule(tmp_path: Path) -> None:
    """What a rule applies to is read from the rule table: a file no rule triggers on costs no rule's import."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "x.py").write_text("x = 1\n")
    outcome = _imported(["check", "--no-cache", "x.py"], tmp_path)
    assert (outcome["exit"], outcome["output"], outcome["rules"]) == (0, "All checks passed! (1 file checked)\n", [])


def test_a_file_imports_the_rules_whose_words_it_holds_only(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "sampler.py").write_text("from torch.utils.data import DistributedSampler\n")
    outcome = _imported(["check", "--no-cache", "sampler.py"], tmp_path)
    assert (outcome["exit"], outcome["output"]) == (0, "All checks passed! (1 file checked)\n")
    assert outcome["rules"] == ["missing_set_epoch", "rank_seeding"]


def test_each_trigger_word_is_looked_for_once_and_most_among_the_file_s_distinct_words() -> None:
    """The rules share many of their words, and a word the file does not hold cost a read of all its bytes each time:
    each is looked for once, and a word of identifier characters among the file's distinct words alone (`all_gather`
    where `gather` is, the group needing no more)."""
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    searched: list[object] = []

    class Source(bytes):
        def __contains__(self, word: object) -> bool:
            searched.append(word)
            return bytes.__contains__(self, word)  # type: ignore[operator]

    engine = Engine(all_rules())
    assert engine._applicable("x.py", Source(b"x = 1\n")) == []
    assert searched and len(searched) == len(set(searched))
    assert all(not word.replace(b"_", b"").isalnum() for word in searched)  # type: ignore[attr-defined]
    source = b"import torch.distributed as dist\nif rank == 0:\n    dist.all_gather_object(x, y)\n"
    assert "PFL207" in [rule.info.code for rule in engine._applicable("x.py", source)]


@pytest.mark.parametrize("args", [["rules"], ["rules", "--format", "json"], ["explain", "PFL402"]])
def test_listing_and_explaining_the_rules_import_none(args: list[str], tmp_path: Path) -> None:
    outcome = _imported(args, tmp_path)
    assert outcome["exit"] == 0
    assert (outcome["rules"], outcome["analyses"]) == ([], [])
