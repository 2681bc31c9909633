"""The maturity gate: a rule on by default keeps its place only while its first-run precision clears the bar."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from documentation import page

from pitfall_lint import maturity
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.selection import rule_infos

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("first_run", REPO / "bench" / "first_run.py")
assert spec and spec.loader
first_run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(first_run)


def test_every_rule_on_by_default_clears_the_bar() -> None:
    """A batch that drops a rule on by default below 90 % on 10 judged findings fails here until it is fixed or
    made a preview rule."""
    figures = maturity.first_run_figures()
    below = maturity.below_the_bar(rule_infos(), figures)
    assert below == [], {code: figures[code] for code in below}


def test_the_shipped_figures_are_those_of_the_log() -> None:
    """pitfall_lint/first_run.json is `bench/first_run.py --write` over bench/fresh: run it after a batch."""
    assert maturity.FIRST_RUN.read_text(encoding="utf-8") == first_run.installed(first_run.read_log(first_run.LOG, None))


def _rule(code: str, *, on: bool = True, preview: bool = False) -> RuleInfo:
    return RuleInfo(code, code.lower(), "synthetic", "warning", enabled_by_default=on, preview=preview)


def _row(judged: int, true: int) -> dict:
    return {"judged": judged, "true": true, "false": judged - true, "precision": round(true / judged, 4) if judged else None}


def test_the_bar_is_90_percent_on_10_judged_findings_of_a_rule_on_by_default() -> None:
    figures = {
        "PFL001": _row(10, 8),  # below: 80 % on 10
        "PFL002": _row(10, 9),  # at the bar: 90 %
        "PFL003": _row(9, 0),  # too few judged: keeps its state
        "PFL004": _row(20, 0),  # already a preview rule
        "PFL005": _row(20, 0),  # off by default
        "PFL006": _row(40, 35),  # below: 87.5 %
        "PFL007": _row(0, 0),
    }
    infos = [
        _rule("PFL001"), _rule("PFL002"), _rule("PFL003"), _rule("PFL004", preview=True), _rule("PFL005", on=False),
        _rule("PFL006"), _rule("PFL007"), _rule("PFL008"),  # PFL008: nothing in the log
    ]
    assert maturity.below_the_bar(infos, figures) == ["PFL001", "PFL006"]


def test_the_rules_page_quotes_the_shipped_overall_figures() -> None:
    overall = maturity.first_run_figures()["all"]
    rules_page = " ".join(page("docs/rules/index.md").split())
    assert (
        f"So far ({overall['repositories']} repositories, checked on " in rules_page
        and f"{overall['true']} of the {overall['judged']} judged findings were true ({100 * overall['precision']:.0f} %), "
        f"{overall['debatable']} more {'was' if overall['debatable'] == 1 else 'were'} debatable, and {overall['true']} of {overall['true'] + overall['misses']} real "
        f"pitfalls were found ({100 * overall['recall']:.0f} % recall)." in rules_page
    )
    default = maturity.first_run_figures()["default"]
    assert (
        f"For the rules a plain check runs today: {default['true']} of {default['judged']} "
        f"({100 * default['precision']:.0f} %) and {default['true']} of {default['true'] + default['misses']} "
        f"({100 * default['recall']:.0f} % recall)." in rules_page
    )


def test_the_readme_quotes_the_last_proof_batch_as_the_log_counts_it() -> None:
    """The README's first-run sentence is `bench/first_run.py --batch proof-4` and the whole log, not typed figures."""
    proof = first_run.figures(first_run.read_log(first_run.LOG, None, "proof-4"))["default"]
    overall = maturity.first_run_figures()["default"]
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert (
        f"{proof['true']} of the {proof['true'] + proof['false']} judged findings of the rules on by default were true "
        f"({100 * proof['precision']:.0f} %) and they found {proof['true']} of the {proof['true'] + proof['misses']} "
        f"real pitfalls in their scope ({100 * proof['recall']:.0f} %)" in readme
    )
    assert f"over all {overall['repositories']} repositories of the first-run log" in readme
    assert f"{overall['true']} of {overall['judged']} ({100 * overall['precision']:.0f} %)" in readme
