"""The first-run figures the tool ships are those of the log."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pitfall_lint import maturity

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("first_run", REPO / "bench" / "first_run.py")
assert spec and spec.loader
first_run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(first_run)


def test_the_shipped_figures_are_those_of_the_log() -> None:
    """pitfall_lint/first_run.json is `bench/first_run.py --write` over bench/fresh: run it after a batch."""
    assert maturity.FIRST_RUN.read_text(encoding="utf-8") == first_run.installed(first_run.read_log(first_run.LOG, None))
