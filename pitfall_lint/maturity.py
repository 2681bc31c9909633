"""Rule maturity: each rule's first-run figures, on repositories this project had never used.

The figures are those of the first-run log (bench/fresh/), written to first_run.json by
`bench/first_run.py --write`, so that the installed tool can quote them.
"""

from __future__ import annotations

import json
from pathlib import Path

FIRST_RUN = Path(__file__).with_name("first_run.json")


def first_run_figures() -> dict[str, dict]:
    """Per rule code (and "all"): repositories, judged, true, false, debatable, misses, precision, recall."""
    return json.loads(FIRST_RUN.read_text(encoding="utf-8"))
