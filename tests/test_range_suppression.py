"""Range suppressions, as Ruff spells and bounds them: `# pitfall-lint: disable[CODES]` ... `# pitfall-lint:
enable[CODES]`, to the end of the block without an enable; an unused range is a PFL001, a comment that does not do
what it says a PFL002."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pitfall_lint.cli import main
from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules
from pitfall_lint.rules.unguarded_torch_save import UnguardedTorchSave

HEAD = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"  # lines 1-3
SAVE = "torch.save({}, 'c.pt')"


def found(source: str, name: str = "train.py", rules=None) -> list[tuple[str, int, str]]:
    result = Engine(all_rules() if rules is None else rules).check_source(name, source.encode())
    assert result.internal_error is None, result.internal_error
    return [(d.code, d.line, d.message) for d in result.diagnostics]


def test_a_range_silences_its_codes_inside_and_not_outside() -> None:
    source = HEAD + f"# pitfall-lint: disable[PFL201]\n{SAVE}\n# pitfall-lint: enable[PFL201]\n{SAVE}\n"
    assert [(code, line) for code, line, _ in found(source)] == [("PFL201", 7)]
    before = HEAD + f"{SAVE}\n# pitfall-lint: disable[PFL201]\n{SAVE}\n# pitfall-lint: enable[PFL201]\n"
    assert [(code, line) for code, line, _ in found(before)] == [("PFL201", 4)]


def test_a_range_of_another_code_silences_nothing() -> None:
    source = HEAD + f"# pitfall-lint: disable[PFL301]\n{SAVE}\n# pitfall-lint: enable[PFL301]\n"
    assert [(code, line) for code, line, _ in found(source)] == [("PFL001", 4), ("PFL201", 5)]


def test_codes_are_listed_with_commas_spaces_and_a_trailing_comma_in_any_case() -> None:
    source = HEAD + f"#pitfall-lint:disable[ pfl301 ,PFL201, ]\n{SAVE}\n#pitfall-lint:enable[PFL301,pfl201]\n"
    assert [(code, line) for code, line, _ in found(source)] == [("PFL001", 4)]  # PFL301 silenced nothing


def test_an_unused_range_is_a_pfl001_naming_its_unused_codes() -> None:
    source = HEAD + "# pitfall-lint: disable[PFL201, PFL301]\nx = 1\n# pitfall-lint: enable[PFL201, PFL301]\n"
    assert found(source) == [("PFL001", 4, "unused range suppression: nothing in the range is reported under PFL201, PFL301")]


def test_a_used_range_is_no_pfl001() -> None:
    source = HEAD + f"# pitfall-lint: disable[PFL201]\n{SAVE}\n# pitfall-lint: enable[PFL201]\n"
    assert found(source) == []


def test_only_the_codes_of_the_rules_that_ran_are_judged() -> None:
    """PFL202 is off by default: nothing can tell whether its range is used."""
    source = HEAD + "# pitfall-lint: disable[PFL202]\nx = 1\n# pitfall-lint: enable[PFL202]\n"
    ran = [rule for rule in all_rules() if rule.info.enabled_by_default]
    assert found(source, rules=ran) == []
    assert [(code, line) for code, line, _ in found(source)] == [("PFL001", 4)]


def test_a_file_no_rule_applies_to_still_has_its_unused_ranges_reported() -> None:
    """No trigger word of PFL201 (`save`) is left: the file is not parsed, and its range is unused all the same."""
    source = "import os\n# pitfall-lint: disable[PFL201]\nos.remove('c.pt')\n# pitfall-lint: enable[PFL201]\n"
    assert found(source, rules=[UnguardedTorchSave]) == [
        ("PFL001", 2, "unused range suppression: nothing in the range is reported under PFL201")
    ]


def test_without_an_enable_a_range_ends_with_its_block() -> None:
    source = HEAD + (
        "def save():\n"  # 4
        "    # pitfall-lint: disable[PFL201]\n"  # 5
        f"    {SAVE}\n"  # 6
        "    if True:\n"  # 7
        f"        {SAVE}\n"  # 8
        "    x = (\n"
        "1)\n"  # 10: a line of the statement above, not the end of the block
        f"    {SAVE}\n"  # 11
        f"{SAVE}\n"  # 12: after the block
    )
    assert found(source) == [
        ("PFL002", 5, ("`# pitfall-lint: disable[PFL201]` has no `# pitfall-lint: enable[PFL201]` at its indentation: "
                       "it silences down to line 11, the end of its block")),
        ("PFL201", 12, ("`torch.save` runs on every rank, which then overwrite one file; guard it with "
                        "`if dist.get_rank() == 0:` or put the rank in the path")),
    ]


def test_without_an_enable_a_range_at_the_top_level_runs_to_the_end_of_the_file() -> None:
    source = HEAD + f"# pitfall-lint: disable[PFL201]\n{SAVE}\ndef f():\n    {SAVE}\n{SAVE}\n"
    assert [(code, line) for code, line, _ in found(source)] == [("PFL002", 4)]


def test_an_enable_ends_only_a_disable_of_the_same_codes_at_its_indentation() -> None:
    source = HEAD + (
        "# pitfall-lint: disable[PFL201]\n"  # 4
        f"{SAVE}\n"  # 5
        "# pitfall-lint: enable[PFL201, PFL301]\n"  # 6: other codes
        "if True:\n"  # 7
        "    # pitfall-lint: enable[PFL201]\n"  # 8: deeper
        f"    {SAVE}\n"  # 9: still silenced
    )
    ends_none = "ends no range: no `# pitfall-lint: disable[{0}]` is open above it at this indentation"
    assert found(source) == [
        ("PFL002", 4, ("`# pitfall-lint: disable[PFL201]` has no `# pitfall-lint: enable[PFL201]` at its indentation: "
                       "it silences down to line 9, the end of its block")),
        ("PFL002", 6, "`# pitfall-lint: enable[PFL201, PFL301]` " + ends_none.format("PFL201, PFL301")),
        ("PFL002", 8, "`# pitfall-lint: enable[PFL201]` " + ends_none.format("PFL201")),
    ]


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("# pitfall-lint: disable=PFL201", "a range suppression lists its codes: `# pitfall-lint: disable[PFL201]` ... `# pitfall-lint: enable[PFL201]`"),
        ("# pitfall-lint: disable[]", "a range suppression lists its codes: `# pitfall-lint: disable[PFL201]` ... `# pitfall-lint: enable[PFL201]`"),
        ("x = 1  # pitfall-lint: disable[PFL201]", "a range suppression must be on a line of its own"),
    ],
)
def test_a_comment_that_silences_nothing_is_a_pfl002(comment: str, message: str) -> None:
    source = HEAD + f"{comment}\n{SAVE}\n"
    assert [(code, line, text) for code, line, text in found(source) if code != "PFL201"] == [("PFL002", 4, message)]
    assert ("PFL201", 5) in [(code, line) for code, line, _ in found(source)]


def test_an_unknown_code_is_a_pfl002_and_the_others_still_count() -> None:
    source = HEAD + f"# pitfall-lint: disable[PFL999, PFL201]\n{SAVE}\n# pitfall-lint: enable[PFL999, PFL201]\n"
    assert found(source) == [("PFL002", 4, "'PFL999' matches no rule code")]


def test_a_noqa_silences_what_a_range_comment_is_reported_for() -> None:
    """Ruff's way to keep a range that runs to the end of its block."""
    source = HEAD + f"# pitfall-lint: disable[PFL201]  # noqa: PFL002\n{SAVE}\n"
    assert found(source) == []


def test_a_finding_silenced_by_noqa_leaves_its_range_unused() -> None:
    source = HEAD + f"# pitfall-lint: disable[PFL201]\n{SAVE}  # noqa: PFL201\n# pitfall-lint: enable[PFL201]\n"
    assert [(code, line) for code, line, _ in found(source)] == [("PFL001", 4)]


def test_text_in_a_string_is_no_comment() -> None:
    source = HEAD + f'# pitfall-lint: disable[PFL201]\ns = """\n# pitfall-lint: enable[PFL201]\n"""\n{SAVE}\n# pitfall-lint: enable[PFL201]\n'
    assert found(source) == []


def test_a_range_spans_the_cells_of_a_notebook() -> None:
    """The code cells are one source, as in Ruff: a range opened in one cell ends in a later one."""
    from test_notebooks import notebook

    data = notebook(HEAD + "# pitfall-lint: disable[PFL201]\n", f"{SAVE}\n", f"# pitfall-lint: enable[PFL201]\n{SAVE}\n")
    result = Engine(all_rules()).check_source("nb.ipynb", data)
    assert [(d.code, d.cell, d.line) for d in result.diagnostics] == [("PFL201", 3, 2)]


@pytest.fixture
def unused_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "train.py").write_text(HEAD + "# pitfall-lint: disable[PFL201]\nx = 1\n# pitfall-lint: enable[PFL201]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _check(*args: str) -> tuple[int, list[tuple[str, int]]]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--preview", "--format", "json", *args, "train.py"], catch_exceptions=False)
    return result.exit_code, [(d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]]


def test_the_checks_of_range_comments_are_selected_and_ignored_as_rules_are(unused_range: Path) -> None:
    assert _check() == (1, [("PFL001", 4)])
    assert _check("--ignore", "PFL001") == (0, [])
    assert _check("--select", "PFL201") == (0, [])  # a select that leaves it out
    assert _check("--select", "PFL0,PFL201") == (1, [("PFL001", 4)])
    (unused_range / "pyproject.toml").write_text('[tool.pitfall-lint]\nper-file-ignores = { "train.py" = ["PFL001"] }\n')
    assert _check() == (0, [])


def test_the_text_report_names_the_range_code(unused_range: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--preview", "train.py"], catch_exceptions=False)
    assert result.stdout == (
        "train.py:4:1: PFL001 unused range suppression: nothing in the range is reported under PFL201\n"
        "Found 1 diagnostic in 1 of 1 file checked.\n"
    )
