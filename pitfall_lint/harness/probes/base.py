"""The probe contract: judge one static finding from what the run recorded, or say it cannot."""

from __future__ import annotations

import os
from typing import ClassVar

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.record import Judgement, RunRecord


class Probe:
    code: ClassVar[str]
    # The run kinds that can exercise the pitfall at all.
    kinds: ClassVar[frozenset[str]]

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        """Conditions to set up for the run (a slower disk, a busy port), given this probe's findings."""
        return {}

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        """A verdict, or None when the run never reached the mechanism (the caller says why)."""
        raise NotImplementedError

    def observe(self, script: str, run: RunRecord) -> list[tuple[Diagnostic, Judgement]]:
        """Findings that only the run can make (rules with no static check)."""
        return []


def at(event: dict, finding: Diagnostic) -> bool:
    """Whether an event happened at the finding's line (of its file)."""
    return event.get("line") == finding.line and same_file(event.get("file"), finding.path)


def same_file(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)  # type: ignore[arg-type]


def errors_matching(run: RunRecord, *fragments: str) -> list[int]:
    """Indices of the run's errors whose message contains one of the fragments."""
    return [i for i, e in enumerate(run.errors) if any(f in (e.get("message") or "") for f in fragments)]


def last_line(text: str | None) -> str:
    stripped = (text or "").strip()
    return stripped.splitlines()[-1] if stripped else ""
