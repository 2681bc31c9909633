"""Rule maturity: each rule's first-run figures, and the bar a rule on by default must clear to stay on.

The figures are those of the first-run log (bench/fresh/, repositories this project had never used), written to
first_run.json by `bench/first_run.py --write`, so that the installed tool can quote them. A rule on by default
whose first-run precision falls below the bar on enough judged findings is to be fixed or made a preview rule;
one with fewer judged findings keeps its state, since a handful of verdicts says little.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from pitfall_lint.diagnostic import RuleInfo

FIRST_RUN = Path(__file__).with_name("first_run.json")
BAR_PRECISION = 0.9
BAR_JUDGED = 10  # findings judged true or false: the precision's denominator


def first_run_figures() -> dict[str, dict]:
    """Per rule code (and "all"): repositories, judged, true, false, debatable, misses, precision, recall."""
    return json.loads(FIRST_RUN.read_text(encoding="utf-8"))


def below_the_bar(infos: Iterable[RuleInfo], figures: Mapping[str, Mapping]) -> list[str]:
    """The rules on by default, not in preview, whose first-run precision is under the bar on enough findings."""
    return [
        info.code
        for info in infos
        if info.enabled_by_default
        and not info.preview
        and (row := figures.get(info.code)) is not None
        and row["judged"] >= BAR_JUDGED
        and row["precision"] < BAR_PRECISION
    ]
