"""The records that flow from the engine to the reporters."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import total_ordering
from typing import Literal

from pitfall_lint.notebook import NOTEBOOK_SUFFIX

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
    # A new rule, or one below the first-run bar: it runs only in preview mode
    # (`--preview`, `preview = true`), and there as `enabled_by_default` says.
    preview: bool = False
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


@total_ordering
@dataclass(frozen=True, slots=True)
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

    def __lt__(self, other: Diagnostic) -> bool:
        return self._order() < other._order()

    def _order(self) -> tuple[object, ...]:
        """As a reader goes through a file: in a notebook cell by cell, then line by line (line counts within a cell)."""
        return (
            self.path, self.cell is not None, self.cell or 0, self.line, self.column, self.code,
            self.name, self.end_line, self.end_column, self.severity, self.message,
        )


def available_fix(diagnostic: Diagnostic, rule: RuleInfo | None) -> Applicability | None:
    """How safely `check --fix` can rewrite this finding; None when it cannot: the rule has no fixer or worked out
    no rewrite here, or the finding is in a notebook, which fixing never rewrites."""
    if rule is None or diagnostic.fix is None or diagnostic.path.endswith(NOTEBOOK_SUFFIX):
        return None
    return rule.fix


def applies(fix: Applicability | None, unsafe: bool) -> bool:
    """Whether a fix of this kind is made: safe ones always, unsafe ones only with `--unsafe-fixes`."""
    return fix == "safe" or (unsafe and fix == "unsafe")


PARSE_ERROR = RuleInfo(
    code="PFL000",
    name="parse-error",
    summary="The file could not be read, decoded or parsed, so no rule could check it; or it uses syntax newer than the project's target Python.",
    severity="error",
)
UNUSED_SUPPRESSION = RuleInfo(
    code="PFL001",
    name="unused-suppression",
    summary="A range suppression (`# pitfall-lint: disable[...]`) lists a code that nothing in its range is reported under.",
    severity="warning",
)
INVALID_SUPPRESSION = RuleInfo(
    code="PFL002",
    name="invalid-suppression",
    summary="A range suppression comment that does not do what it says: no matching enable (it silences to the end of its block), an enable that ends no range, no codes, an unknown code, or a comment after code.",
    severity="warning",
)
# The engine's own codes, reported whatever rules run: chosen by select and ignore as the rules are, but PFL000,
# which only ignore turns off.
SUPPRESSION_CHECKS = (UNUSED_SUPPRESSION, INVALID_SUPPRESSION)
ENGINE_CODES = frozenset(info.code for info in (PARSE_ERROR, *SUPPRESSION_CHECKS))
