"""The figures and samples of the README and the docs/ pages: each comes from a command this test runs, or says where
and when it was measured."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from documentation import code_blocks, page, pages, section, sections

from pitfall_lint.cli import main
from pitfall_lint.selection import rule_infos

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
ECOSYSTEM = page("docs/ecosystem.md")
# A duration, a size or a memory figure: what a machine measured rather than what a command prints.
MEASURED_FIGURE = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms|MiB|GiB|MB)\b")
DATED = re.compile(r"[Mm]easured[^.]*?\b20\d\d-\d\d-\d\d\b")
# Figures that are settings of verify, not measurements: its collectives' timeout and the most it copies.
SETTINGS = ("under a 5 s process-group timeout", "(up to 512 MiB)")


def _code_blocks(section_heading: str, language: str) -> list[str]:
    """The bodies of the README section's fenced blocks of that language ('' for a block with none)."""
    return code_blocks(section(README, section_heading), language)


def test_the_set_up_commands_are_what_ci_runs() -> None:
    """The second set-up command is the one `.ci/run` runs, in the virtual environment it makes first."""
    commands = [block.strip() for block in _code_blocks("## Set-up on a fresh machine", "sh")]
    assert len(commands) == 2
    assert commands[0] == "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && pitfall-lint check fixtures/"
    test_command = commands[1].split(" && ", 2)[2]
    ci_commands = (REPO / ".ci" / "run").read_text(encoding="utf-8").replace(" --quiet", "").splitlines()
    assert test_command in ci_commands


def test_ci_runs_the_verify_tests_again_on_the_cuda_build_with_torchvision() -> None:
    """`pip install torch` gives a CUDA build on Linux, which verify's virtual devices meet on machines without a GPU."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    cuda = ci[ci.index("python3 -m venv .ci-venv-cuda"):]
    assert "pip install --quiet torch==2.14.1 torchvision==0.29.1 && pip install --quiet -e \".[test,verify]\"" in cuda
    assert cuda[-1] == "python -m pytest -q tests/test_verify*.py tests/test_virtual_cuda.py"


def test_the_sample_output_is_what_the_check_of_the_fixtures_prints(monkeypatch) -> None:
    (sample,) = (block.splitlines() for block in _code_blocks("## Usage", "") if block.startswith("$ pitfall-lint check fixtures/\n"))
    head, tail = sample[1 : sample.index("...")], sample[sample.index("...") + 1 :]
    monkeypatch.chdir(REPO)
    printed = CliRunner().invoke(main, ["check", "--no-cache", "fixtures/"], catch_exceptions=False).stdout.splitlines()
    assert printed[: len(head)] == head
    assert printed[-len(tail) :] == tail


def _without_settings(text: str) -> str:
    for setting in SETTINGS:
        text = text.replace(setting, "")
    return text


def test_every_measured_figure_names_its_machine_and_date() -> None:
    undated = [
        f"{path}: {part.splitlines()[0]}"
        for path, text in pages().items()
        for part in sections(text)
        if MEASURED_FIGURE.search(_without_settings(part)) and not DATED.search(part)
    ]
    assert undated == []


def test_the_ecosystem_table_is_the_stored_summary() -> None:
    """The table is `bench/ecosystem.py --table` over bench/ecosystem-summary.json, not figures typed by hand."""
    spec = importlib.util.spec_from_file_location("ecosystem", REPO / "bench" / "ecosystem.py")
    assert spec is not None and spec.loader is not None
    ecosystem = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ecosystem)
    summary = json.loads((REPO / "bench" / "ecosystem-summary.json").read_text(encoding="utf-8"))
    default_on = {info.code for info in rule_infos() if info.enabled_by_default}
    assert ecosystem.table(summary, default_on).strip() in ECOSYSTEM


def test_the_ecosystem_table_says_what_the_summary_says() -> None:
    """The sentence under the table: every default finding judged, and how many are true."""
    summary = json.loads((REPO / "bench" / "ecosystem-summary.json").read_text(encoding="utf-8"))
    default_on = {info.code for info in rule_infos() if info.enabled_by_default}
    verdicts = [
        finding["verdict"]
        for repository in summary.values()
        for code, findings in repository["findings"].items()
        if code in default_on
        for finding in findings
    ]
    true = verdicts.count("true")
    assert f"All {true} findings of the rules on by default are true." in ECOSYSTEM
    assert true == len(verdicts)


def test_the_readme_commands_run() -> None:
    """`pitfall-lint --version`, `rules` and `explain PFL101`, as the Usage block lists them, exit 0."""
    for arguments in (["--version"], ["rules"], ["explain", "PFL101"]):
        result = subprocess.run([sys.executable, "-m", "pitfall_lint", *arguments], capture_output=True, text=True, cwd=REPO)
        assert result.returncode == 0, result.stderr


def test_every_table_row_has_the_cells_of_its_header() -> None:
    """A row pasted into the wrong table (the ecosystem's into the speed table's) shows as a count of cells."""
    misfits = []
    tables = [table for text in pages().values() for table in re.findall(r"(?:^\|.*\|\n)+", text, re.MULTILINE)]
    for table in tables:
        rows = [row for row in table.splitlines() if not re.fullmatch(r"\|(?: ?-+ ?\|)+", row)]
        widths = [len(re.findall(r"(?<!\\)\|", row)) for row in rows]
        misfits += [row for row, width in zip(rows, widths) if width != widths[0]]
    assert misfits == []
