"""Suppression comments: `# noqa` on a line, with flake8's and ruff's meaning, and ranges, with Ruff's
(`# ruff: disable[E501]` ... `# ruff: enable[E501]`): `# pitfall-lint: disable[PFL201]` on a line of its own
silences the codes it lists down to `# pitfall-lint: enable[PFL201]` with the same codes at the same indentation,
or, without one, to the end of its block (of the file at the top level). A range that silences nothing, and a
comment that does not do what it says, are reported (PFL001, PFL002), as Ruff reports them (RUF100, RUF103, RUF104).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from pitfall_lint.diagnostic import INVALID_SUPPRESSION, UNUSED_SUPPRESSION, Diagnostic, RuleInfo

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
# What a file holds when it may have a range comment: the files without it are never tokenized.
RANGE_MARKER = b"pitfall-lint:"
_RANGE = re.compile(r"#\s*pitfall-lint:\s*(?P<action>disable|enable)\b(?P<rest>.*)")
_RANGE_CODES = re.compile(r"\[(?P<codes>[^\]]*)\]")
_SPELLING = "`# pitfall-lint: disable[PFL201]` ... `# pitfall-lint: enable[PFL201]`"


def suppressed_codes(line: str) -> frozenset[str] | None:
    """None when the line has no noqa, an empty set for a bare `# noqa` (everything), else the codes."""
    if "noqa" not in line.lower():
        return None
    match = _NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    return frozenset(c.upper() for c in _CODE.findall(codes)) if codes else frozenset()


def is_suppressed(code: str, line: str) -> bool:
    codes = suppressed_codes(line)
    return codes is not None and (not codes or code in codes)


def with_noqa(line: str, code: str) -> str | None:
    """The line (without its end) with `code` added to its `# noqa: ...` codes, else with `  # noqa: CODE` at its
    end; None where no comment can go: after a backslash that continues the line."""
    match = _NOQA.search(line) if "noqa" in line.lower() else None
    if match is not None and match.group("codes"):
        end = match.end("codes")
        return f"{line[:end]}, {code}{line[end:]}"
    code_part = line.rstrip()
    if code_part.endswith("\\"):
        return None
    return f"{code_part}  # noqa: {code}"


@dataclass(frozen=True)
class _Comment:
    line: int
    column: int  # 0-based, in characters
    text: str

    @property
    def end_column(self) -> int:
        return self.column + len(self.text)


@dataclass
class _Range:
    start: _Comment
    codes: tuple[str, ...]
    last_line: int = 0  # set when the range ends
    closed: bool = False  # by its enable comment
    used: set[str] = field(default_factory=set)


def _spelled(action: str, codes: Sequence[str]) -> str:
    return f"`# pitfall-lint: {action}[{', '.join(codes)}]`"


@dataclass
class RangeSuppressions:
    """The ranges of one file, and what is wrong with its range comments, read from its tokens (so that a string
    that looks like a comment is none)."""

    ranges: list[_Range] = field(default_factory=list)
    problems: list[tuple[_Comment, str]] = field(default_factory=list)

    @classmethod
    def read(cls, data: bytes, known_codes: Collection[str]) -> RangeSuppressions:
        """Nothing for a file that cannot be tokenized: it cannot have been parsed either."""
        found = cls()
        try:
            found._scan(tokenize.tokenize(io.BytesIO(data).readline), known_codes)
        except (SyntaxError, tokenize.TokenError):
            return cls()
        found.ranges.sort(key=lambda r: r.start.line)
        return found

    def _scan(self, tokens: Iterator[tokenize.TokenInfo], known_codes: Collection[str]) -> None:
        open_ranges: list[_Range] = []
        logical_line_starts = True
        last_code_line = 0  # the last line of the last statement met
        for token in tokens:
            if token.type == tokenize.COMMENT:
                if "pitfall-lint:" in token.string:
                    self._comment(token, open_ranges, known_codes)
            elif token.type == tokenize.NEWLINE:
                logical_line_starts, last_code_line = True, token.start[0]
            elif token.type == tokenize.ENDMARKER:
                _end(open_ranges, 0, last_code_line)
            elif token.type not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
                if logical_line_starts:  # code indented less than a range's comment ends the block it was in
                    _end(open_ranges, token.start[1] + 1, last_code_line)
                logical_line_starts = False

    def _comment(self, token: tokenize.TokenInfo, open_ranges: list[_Range], known_codes: Collection[str]) -> None:
        match = _RANGE.match(token.string)
        if match is None:
            return
        comment = _Comment(token.start[0], token.start[1], token.string)
        if token.line[: token.start[1]].strip():
            self.problems.append((comment, "a range suppression must be on a line of its own"))
            return
        listed = _RANGE_CODES.match(match["rest"])
        parts = [part.strip().upper() for part in listed["codes"].split(",")] if listed else []
        if parts and not parts[-1]:
            parts.pop()  # a trailing comma
        if not parts or not all(_CODE.fullmatch(part) for part in parts):
            self.problems.append((comment, f"a range suppression lists its codes: {_SPELLING}"))
            return
        codes = tuple(parts)
        if match["action"] == "disable":  # an unknown code is told once, where the range starts
            unknown = [code for code in codes if code not in known_codes]
            self.problems.extend((comment, f"'{code}' matches no rule code") for code in unknown)
            range_ = _Range(comment, codes)
            self.ranges.append(range_)
            open_ranges.append(range_)
            return
        opened = next((r for r in reversed(open_ranges) if r.codes == codes and r.start.column == comment.column), None)
        if opened is None:
            message = f"{_spelled('enable', codes)} ends no range: no {_spelled('disable', codes)} is open above it"
            self.problems.append((comment, f"{message} at this indentation"))
            return
        opened.last_line, opened.closed = comment.line, True
        open_ranges.remove(opened)

    def silences(self, code: str, line: int) -> bool:
        """Whether a range holds this finding; the first that does (the outermost) counts as used."""
        for range_ in self.ranges:
            if range_.start.line < line <= range_.last_line and code in range_.codes:
                range_.used.add(code)
                return True
        return False

    def reports(self, path: str, judged: Collection[str]) -> list[Diagnostic]:
        """PFL001 for the codes of a range that silenced nothing, among `judged` (the rules that ran: of another,
        nothing can be told); PFL002 for the comments that do not do what they say."""
        found = [_diagnostic(path, comment, INVALID_SUPPRESSION, message) for comment, message in self.problems]
        for range_ in self.ranges:
            if not range_.closed:
                message = (
                    f"{_spelled('disable', range_.codes)} has no {_spelled('enable', range_.codes)} at its indentation: "
                    f"it silences down to line {range_.last_line}, the end of its block"
                )
                found.append(_diagnostic(path, range_.start, INVALID_SUPPRESSION, message))
            unused = [code for code in range_.codes if code in judged and code not in range_.used]
            if unused:
                message = f"unused range suppression: nothing in the range is reported under {', '.join(unused)}"
                found.append(_diagnostic(path, range_.start, UNUSED_SUPPRESSION, message))
        return found


def _end(open_ranges: list[_Range], indentation: int, last_line: int) -> None:
    """Ends, at `last_line`, the ranges without an enable comment opened at `indentation` or deeper."""
    for range_ in [r for r in open_ranges if r.start.column >= indentation]:
        range_.last_line = max(last_line, range_.start.line)
        open_ranges.remove(range_)


def _diagnostic(path: str, comment: _Comment, info: RuleInfo, message: str) -> Diagnostic:
    line, column, end_column = comment.line, comment.column + 1, comment.end_column + 1
    return Diagnostic(path, line, column, info.code, info.name, line, end_column, info.severity, message)


def without_suppressed(
    path: str, data: bytes, diagnostics: Iterable[Diagnostic], line_text: Callable[[int], str], judged: Collection[str]
) -> list[Diagnostic]:
    """The findings no `# noqa` on their line and no range silences, with what the ranges' comments deserve
    (themselves silenced by a `# noqa` on theirs, as in Ruff)."""
    kept = [d for d in diagnostics if not is_suppressed(d.code, line_text(d.line))]
    if RANGE_MARKER not in data:
        return kept
    from pitfall_lint.selection import known_codes  # here: only a file with a range comment needs them

    ranges = RangeSuppressions.read(data, known_codes())
    kept = [d for d in kept if not ranges.silences(d.code, d.line)]
    return kept + [d for d in ranges.reports(path, judged) if not is_suppressed(d.code, line_text(d.line))]
