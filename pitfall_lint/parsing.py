"""A file's tree, whichever Python runs pitfall-lint: what this interpreter cannot parse is parsed again with its
newer syntax lowered (pitfall_lint.lowering), so that a file written for Python 3.14 gives on 3.11 the findings it
gives on 3.14; and the newer syntax a file uses that the project's target Python lacks, told alike on every
interpreter."""

from __future__ import annotations

import ast
import io
import sys
import tokenize
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pitfall_lint.config import TargetVersion
    from pitfall_lint.lowering import Feature

RUNNING = sys.version_info[:2]
# The oldest Python that any syntax pitfall_lint.lowering knows needs: a file an older one parsed uses none of it.
OLDEST_LOWERED = (3, 12)


@dataclass(frozen=True)
class ParsedSource:
    tree: ast.Module
    # The bytes the tree's positions refer to: the source, or the source lowered (its lines and columns the same).
    data: bytes
    # The newer syntax met where the source had to be lowered; None where this interpreter parsed it as it is.
    features: tuple[Feature, ...] | None = None


def _parse(data: bytes, path: str) -> ast.Module:
    with warnings.catch_warnings():
        # The compiler's own warnings (invalid escapes, `1()`) are not ours to print.
        warnings.simplefilter("ignore")
        return ast.parse(data, filename=path)


def _decoded(data: bytes) -> tuple[str, str]:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding), encoding


def parse_source(data: bytes, path: str) -> ParsedSource:
    """Raises what ast.parse raises: for a file that still does not parse, the SyntaxError of the lowered text
    (its place is the file's), which names the Python version the file needs where newer syntax this interpreter
    lacks could not be lowered."""
    try:
        return ParsedSource(_parse(data, path), data)
    except SyntaxError as error:
        original = error
    try:
        text, encoding = _decoded(data)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        raise original from None
    from pitfall_lint.lowering import lower  # here: a run whose files all parse never pays for its import

    lowered = lower(text)
    if not lowered.features:
        raise original  # a broken file, as any interpreter finds it
    try:
        lowered_data = lowered.text.encode(encoding)
        return ParsedSource(_parse(lowered_data, path), lowered_data, lowered.features)
    except SyntaxError as error:
        unreadable = [feature for feature in lowered.kept if feature.version > RUNNING]
        if unreadable:
            error.msg = f"{error.msg} ({unreadable[0].needs()}; pitfall-lint runs on Python {RUNNING[0]}.{RUNNING[1]} here)"
        raise error from None


def newer_than_target(parsed: ParsedSource, target: TargetVersion) -> list[Feature]:
    """The newer syntax the file uses that the project's target Python lacks."""
    features = parsed.features
    if features is None:
        # Parsed as it is: it holds no syntax newer than this interpreter, and lowering knows none older than
        # OLDEST_LOWERED; so the text is scanned only where both leave room above the target.
        if RUNNING < OLDEST_LOWERED or target.version >= RUNNING:
            return []
        from pitfall_lint.lowering import lower, may_use_newer_syntax

        if not may_use_newer_syntax(parsed.data):
            return []
        features = lower(_decoded(parsed.data)[0]).features
    return [feature for feature in features if feature.version > target.version]


def target_message(feature: Feature, target: TargetVersion) -> str:
    return f"{feature.needs()}; the project targets Python {target} ({target.source})"
