"""The records that flow from the engine to the reporters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning", "info"]
# Ruff's model: a safe fix keeps what the code means; an unsafe one may change behaviour beyond the pitfall.
Applicability = Literal["safe", "unsafe"]


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
    fix: Applicability | None = None  # whether `check --fix` can rewrite it, and how safely


@dataclass(frozen=True, slots=True)
class FixPlan:
    """What the rule learned that its rewrite needs, as source text (`total_length` -> `padded.size(1)`)."""

    facts: tuple[tuple[str, str], ...]

    def __getitem__(self, key: str) -> str:
        return dict(self.facts)[key]


@dataclass(frozen=True, slots=True)
class Related:
    """A place in another file (or elsewhere in this one) that the finding rests on."""

    path: str
    line: int
    message: str  # "wrapped by nn.DataParallel", "called on every rank"


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
    # Set when the rule could work out a rewrite; not part of the finding's identity.
    fix: FixPlan | None = field(default=None, compare=False)
    related: tuple[Related, ...] = field(default=(), compare=False)


PARSE_ERROR = RuleInfo(
    code="PFL000",
    name="parse-error",
    summary="The file could not be read, decoded or parsed, so no rule could check it; or it uses syntax newer than the project's target Python.",
    severity="error",
)
