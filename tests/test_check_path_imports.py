"""The check path never imports torch, libcst or the code it checks: a pre-commit hook must stay cheap and safe."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from marks import REPO
from pitfall_lint.cli import main

DDP_SCRIPT = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(torch.nn.Module):
    def forward(self, x):
        return x


dist.init_process_group("gloo")
model = DDP(Net())
"""

# A module DataParallel would break (PFL101), in a project that trains with DDP alone; "ddp" below makes it a file that
# may set up distributed training, which the question reads too.
MODULE_WITH_BOUND_FORWARD = """\
import torch


class Net(torch.nn.Module):  # trained under ddp by train.py
    def __init__(self):
        super().__init__()
        self.forward = self.other

    def other(self, x):
        return x
"""

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
        "ours": ["pitfall_lint", "pitfall_lint.cli", "pitfall_lint.formats"],
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


# A whole run as the command runs it (CliRunner itself imports tempfile), what it imported written on stderr at exit.
WHOLE_RUN_PROBE = r"""
import atexit, json, sys
from pitfall_lint.cli import main

def imported():
    ours = sorted(m for m in sys.modules if m.startswith(("pitfall_lint.project.", "pitfall_lint.analysis.")))
    print(json.dumps({
        "project": [m for m in ours if m.startswith("pitfall_lint.project.")],
        "analyses": [m for m in ours if m.startswith("pitfall_lint.analysis.")],
        "tempfile": "tempfile" in sys.modules,
        "pathspec": "pathspec" in sys.modules,
        "tomllib": "tomllib" in sys.modules,
        "hashlib": "hashlib" in sys.modules,
    }), file=sys.stderr)

atexit.register(imported)
sys.argv[0] = "pitfall-lint"
main()
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


def test_a_file_no_rule_triggers_on_imports_no_summary_code(tmp_path: Path) -> None:
    """The project model imports the summaries' code and the analyses of its questions where a summary is read or a
    question asked, and the cache is written without tempfile: a pre-commit run on such a file needs none of them."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "x.py").write_text("x = 1\n")
    completed = subprocess.run([sys.executable, "-c", WHOLE_RUN_PROBE, "check", "x.py"], cwd=tmp_path, capture_output=True, text=True)
    assert (completed.returncode, completed.stdout) == (0, "All checks passed! (1 file checked)\n")
    outcome = json.loads(completed.stderr)
    assert outcome["project"] == [
        "pitfall_lint.project.dependencies", "pitfall_lint.project.layout", "pitfall_lint.project.model",
        "pitfall_lint.project.store",
    ]
    assert outcome["analyses"] == [
        "pitfall_lint.analysis.distributed", "pitfall_lint.analysis.evidence", "pitfall_lint.analysis.scopes",
        "pitfall_lint.analysis.wrap_calls",
    ]
    assert not outcome["tempfile"]
    assert not outcome["hashlib"]  # hashlib loads OpenSSL (2.5 ms) before it hands out the BLAKE2b of CPython's own module


@pytest.mark.parametrize(
    ("pyproject", "parsed"),
    [
        ('[tool.ruff]\nline-length = 120\n', False),  # Lightning's and diffusers': neither our table nor a Python floor
        ('[project]\nname = "x"\nrequires-python = ">=3.10"\n', True),
    ],
)
def test_a_pyproject_toml_is_parsed_only_when_it_can_say_something_to_the_check(tmp_path: Path, pyproject: str, parsed: bool) -> None:
    """TOML's reader took 5 ms to import, a twentieth of a pre-commit run: a pyproject.toml that spells neither our
    table nor `requires-python` cannot configure the check, and is not parsed."""
    (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "x.py").write_text("x = 1\n")
    completed = subprocess.run([sys.executable, "-c", WHOLE_RUN_PROBE, "check", "x.py"], cwd=tmp_path, capture_output=True, text=True)
    assert (completed.returncode, completed.stdout) == (0, "All checks passed! (1 file checked)\n")
    assert json.loads(completed.stderr)["tomllib"] is parsed


def test_an_ignore_file_s_patterns_are_translated_once_and_kept_in_the_cache(tmp_path: Path) -> None:
    """Importing pathspec to translate a .gitignore's patterns cost more than the rest of reading and matching them:
    their joined expression is kept in the cache, by the file's lines, and a run with the same file does without it."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "ignored.py").write_text("x = 2\n")

    def run() -> tuple[int, str, bool]:
        completed = subprocess.run([sys.executable, "-c", WHOLE_RUN_PROBE, "check", "."], cwd=tmp_path, capture_output=True, text=True)
        return completed.returncode, completed.stdout, json.loads(completed.stderr)["pathspec"]

    assert run() == (0, "All checks passed! (1 file checked)\n", True)
    assert run() == (0, "All checks passed! (1 file checked)\n", False)
    (tmp_path / ".gitignore").write_text("other.py\n")  # other lines: translated afresh
    assert run() == (0, "All checks passed! (2 files checked)\n", True)
    assert run() == (0, "All checks passed! (2 files checked)\n", False)


def test_a_file_whose_summary_a_rule_needs_before_its_check_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the DDP rules apply to the file asks whether the project sets up distributed training, which reads
    the file's own summary before its check: the check takes the tree the summary was made from."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(DDP_SCRIPT)
    monkeypatch.chdir(tmp_path)
    parsed: list[str] = []
    parse = ast.parse

    def counted(source: object, filename: str = "<unknown>", *args: object, **kwargs: object) -> ast.AST:
        parsed.append(os.path.basename(filename))
        return parse(source, filename, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ast, "parse", counted)
    result = CliRunner().invoke(main, ["check", "train.py"], catch_exceptions=False)
    assert (result.exit_code, result.output) == (0, "All checks passed! (1 file checked)\n")
    assert parsed == ["train.py"]


def test_whether_the_project_sets_up_distributed_training_is_kept_by_content_and_needs_no_summary(tmp_path: Path) -> None:
    """Whether DataParallel may run a module asks whether the project trains in parallel, which each file that may set
    up distributed training answers. A pre-commit run had that file's whole summary loaded, with the summaries' code,
    and the changed file summarised, for that one fact; the fact is now kept by content, and the changed file, parsed
    for its check anyway, is walked for its set-ups alone."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(DDP_SCRIPT)
    model = tmp_path / "model.py"
    model.write_text(MODULE_WITH_BOUND_FORWARD)

    def run(*paths: str) -> tuple[int, str, list[str]]:
        completed = subprocess.run([sys.executable, "-c", WHOLE_RUN_PROBE, "check", *paths], cwd=tmp_path, capture_output=True, text=True)
        return completed.returncode, completed.stdout, json.loads(completed.stderr)["project"]

    assert run()[:2] == (0, "All checks passed! (2 files checked)\n")  # the cache, warm
    model.write_text(MODULE_WITH_BOUND_FORWARD + "# changed\n")
    assert run("model.py") == (
        0, "All checks passed! (1 file checked)\n",
        ["pitfall_lint.project.dependencies", "pitfall_lint.project.layout", "pitfall_lint.project.model", "pitfall_lint.project.store"],
    )


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
