"""The probe contract: judge one static finding from what the run recorded, or say it cannot."""

from __future__ import annotations

from typing import ClassVar

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.record import Judgement, RunRecord


class Probe:
    code: ClassVar[str]
    # The run kinds that can exercise the pitfall at all.
    kinds: ClassVar[frozenset[str]]

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        """A verdict, or None when the run never reached the mechanism (the caller says why)."""
        raise NotImplementedError

