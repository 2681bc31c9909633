"""Property: on generated variations of the fixable fixtures, every fix keeps the file parseable and idempotent."""

from __future__ import annotations

import ast
import builtins
import keyword
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from marks import REPO

pytest.importorskip("libcst")

from pitfall_lint.fix import all_fixers, fix_source  # noqa: E402
from pitfall_lint.rules import all_rules  # noqa: E402

FIXABLE = sorted(all_fixers())
SOURCES = {code: next((REPO / "fixtures").glob(f"{code}-*")).joinpath("bad.py").read_text() for code in FIXABLE}
IDENTIFIER = re.compile(r"\b[a-z_][a-z0-9_]*\b")


def _renameable(source: str) -> list[str]:
    """Names the fixture binds itself (parameters, assignments, functions): renaming them keeps its meaning."""
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in [*n.args, *n.kwonlyargs]}
    names |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and not n.name.startswith("__")}
    foreign = {k.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords if k.arg}  # `sampler=` of DataLoader
    foreign |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # `loader.sampler`
    return sorted(names - foreign - {"self", "_"} - set(dir(builtins)))


@st.composite
def variations(draw: st.DrawFn) -> tuple[str, str]:
    code = draw(st.sampled_from(FIXABLE))
    source = SOURCES[code]
    for name in draw(st.lists(st.sampled_from(_renameable(source)), max_size=3, unique=True)):
        new = draw(st.from_regex(r"[a-z][a-z0-9_]{1,8}", fullmatch=True))
        assume(not keyword.iskeyword(new) and new not in dir(builtins) and not re.search(rf"\b{new}\b", source))
        source = re.sub(rf"\b{name}\b", new, source)
    lines = source.splitlines()
    for _ in range(draw(st.integers(0, 4))):  # comments and blank lines between statements, at the next line's indent
        at = draw(st.integers(0, len(lines)))
        following = lines[at] if at < len(lines) else ""
        indent = following[: len(following) - len(following.lstrip())]
        lines.insert(at, draw(st.sampled_from([f"{indent}# a note", "", f"{indent}# TODO: tidy  "])))
    if draw(st.booleans()):  # two-space indentation
        lines = [re.sub(r"^((?:    )+)", lambda m: "  " * (len(m.group(1)) // 4), line) for line in lines]
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return code, newline.join(lines) + newline


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(variations())
def test_fixes_on_variations_parse_and_are_idempotent(case: tuple[str, str]) -> None:
    code, source = case
    data = source.encode()
    try:
        ast.parse(data)
    except SyntaxError:
        assume(False)  # a comment inside a continued line, say: not a variation of a valid file
    fixed = fix_source("variation.py", data, all_rules(), unsafe=True)
    ast.parse(fixed.fixed)
    assert fixed.applied[code] >= 1  # the fix still applies however the file is spelled
    assert fix_source("variation.py", fixed.fixed, all_rules(), unsafe=True).fixed == fixed.fixed
    if "\r\n" in source:
        assert b"\n" not in fixed.fixed.replace(b"\r\n", b"")
