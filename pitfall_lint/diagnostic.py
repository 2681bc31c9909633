"""The records that flow from the engine to the reporters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """What users see of a rule in `rules`, `explain` and the reports."""

    code: str
    name: str
    summary: str
    severity: Severity
    enabled_by_default: bool = True
    verifiable: bool = False
    hint: str = ""  # the fix in one line, shown by --show-source


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    """One finding. Lines and columns are 1-based; columns count characters, as editors do."""

    path: str
    line: int
    column: int
    code: str
    name: str
    end_line: int
    end_column: int
    severity: Severity
    message: str
    cell: int | None = None  # in a notebook: the 1-based cell, and `line` counts within it


PARSE_ERROR = RuleInfo(
    code="PFL000",
    name="parse-error",
    summary="The file could not be read, decoded or parsed, so no rule could check it.",
    severity="error",
)
