"""Syntax newer than the running Python, rewritten into text it parses, so that a file written for Python 3.12-3.14
is checked on 3.11 as it is on 3.14: every line kept, and every column but the name of a `type` statement, so
that findings point at the file's own places.

Run only where `ast.parse` failed (and, where the project targets an older Python than the one running, to tell
which newer syntax a parsed file uses). A scanner of its own: it knows strings (every prefix, both quotes, single
and triple, escapes), comments and brackets, and the few statements whose syntax is new; nothing else.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class Feature:
    """A piece of newer syntax, and where a file first uses it (1-based line, 1-based character column)."""

    what: str
    version: tuple[int, int]
    pep: int
    line: int = 0
    column: int = 0

    def needs(self) -> str:
        return f"{self.what} needs Python {self.version[0]}.{self.version[1]} (PEP {self.pep})"


QUOTE_REUSE = Feature("f-string reusing its quotes inside a replacement field", (3, 12), 701)
FIELD_BACKSLASH = Feature("backslash inside an f-string's replacement field", (3, 12), 701)
FIELD_COMMENT = Feature("comment inside an f-string's replacement field", (3, 12), 701)
FIELD_LINE_BREAK = Feature("line break inside a single-quoted f-string", (3, 12), 701)
DEEP_FORMAT_SPEC = Feature("replacement field nested three deep in format specifications", (3, 12), 701)
TYPE_PARAMETERS = Feature("type parameter list", (3, 12), 695)
TYPE_STATEMENT = Feature("`type` statement", (3, 12), 695)
TYPE_PARAMETER_DEFAULT = Feature("type parameter default", (3, 13), 696)
EXCEPT_WITHOUT_PARENTHESES = Feature("`except` naming several exceptions without parentheses", (3, 14), 758)
TEMPLATE_STRING = Feature("template string (t-string)", (3, 14), 750)


@dataclass(frozen=True)
class Lowered:
    text: str
    # The first place of each newer feature the text uses, in the order of the text.
    features: tuple[Feature, ...]
    # Those left as they are where no rewrite of the same length could express them: the text still holds them.
    kept: tuple[Feature, ...]


# Where something the scanner follows may start: a quote (its prefix is read backwards from it), a comment, or a
# keyword of a statement whose syntax is new. Plain alternatives: a search for them runs at the speed of `re`.
_CODE = re.compile(r"""['"#]|\b(?:def|class|type|except)\b""")
_DEFINITION = re.compile(r"(?:def|class)[ \t]+\w+[ \t]*\[")
_ALIAS = re.compile(r"type[ \t]+(?P<name>\w+)[ \t]*(?P<after>\[|=(?!=))")
_FIELD = re.compile(r"""['"\[\](){}:#\\\n]""")
_BRACKETED = re.compile(r"""['"#\[\](){}]|(?<![=<>!:])=(?!=)""")
_CLAUSE = re.compile(r"""['"#\[\](){},:\n]|\bas\b""")
_PREFIXES = frozenset(("r", "u", "b", "f", "t", "rb", "br", "rf", "fr", "rt", "tr"))
_LINE_END = re.compile(r"[\r\n]")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# What ends the body of a plain string, and what matters in the text of an f-string (or of a format specification).
_PLAIN = {q: re.compile(r"\\|" + (q if len(q) == 3 else q + r"|\n")) for q in ("'", '"', "'''", '"""')}
_FORMATTED = {q: re.compile(r"[{}\\]|" + (q if len(q) == 3 else q + r"|\n")) for q in ("'", '"', "'''", '"""')}
# A quick look at the bytes, never narrower than the scanner: a file none of these occur in uses none of the
# features (an f-string or t-string; a definition with brackets after its name; `type` first on a line; an `except`
# line with a comma, or with a bracket or a backslash that may carry it on to the next line).
_MAY_BE_NEWER = re.compile(
    rb"(?<![\w])(?:[rR]?[fFtT]|[fFtT][rR])['\"]|(?:def|class)[ \t]+[^\s(\[:]+[ \t]*\[|(?:^|\r)[ \t]*type[ \t]"
    rb"|except\b[^\n]*[,(\[{\\]",
    re.MULTILINE,
)


def may_use_newer_syntax(data: bytes) -> bool:
    return _MAY_BE_NEWER.search(data) is not None


class _Unscannable(Exception):
    """Text the scanner does not understand (an unterminated string): then nothing is rewritten."""


@dataclass(eq=False)
class _Literal:
    start: int
    prefix: str
    quote: str
    end: int = 0
    # The strings inside its replacement fields, in order.
    children: list[_Literal] = field(default_factory=list)
    # What it holds that no new quote can make valid inside the fields around it (a backslash, a line break), or
    # that its own fields hold that no rewrite of the same length can express (a comment), and where.
    problems: list[tuple[Feature, int]] = field(default_factory=list)

    @property
    def formatted(self) -> bool:
        return any(c in "fFtT" for c in self.prefix)

    @property
    def template(self) -> bool:
        return any(c in "tT" for c in self.prefix)

    @property
    def raw(self) -> bool:
        return any(c in "rR" for c in self.prefix)


def _is_name_character(char: str) -> bool:
    return char == "_" or char.isalnum()


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.edits: list[tuple[int, str]] = []  # (offset, replacement): each replaces as many characters as it has
        self.found: dict[Feature, int] = {}  # each feature met, at its first offset
        self.kept: dict[Feature, int] = {}

    # -- what was met

    def met(self, feature: Feature, offset: int) -> None:
        if offset < self.found.get(feature, offset + 1):
            self.found[feature] = offset

    def keep(self, feature: Feature, offset: int) -> None:
        if offset < self.kept.get(feature, offset + 1):
            self.kept[feature] = offset

    def problem(self, owner: _Literal, feature: Feature, offset: int) -> None:
        self.met(feature, offset)
        owner.problems.append((feature, offset))

    def placed(self, features: dict[Feature, int]) -> tuple[Feature, ...]:
        """The features with the line and column of their offsets, in the order of the text."""
        placed = []
        for feature, offset in sorted(features.items(), key=lambda item: item[1]):
            line_start = self.line_start(offset)
            line = len(_LINE_BREAK.findall(self.text, 0, line_start)) + 1
            placed.append(replace(feature, line=line, column=offset - line_start + 1))
        return tuple(placed)

    def rewritten(self) -> str:
        pieces, at = [], 0
        for offset, replacement in sorted(self.edits, key=lambda edit: edit[0]):
            pieces += [self.text[at:offset], replacement]
            at = offset + len(replacement)
        pieces.append(self.text[at:])
        return "".join(pieces)

    # -- the statements

    def scan(self) -> None:
        text, at = self.text, 0
        while (match := _CODE.search(text, at)) is not None:
            token, at = match.group(), match.end()
            if token in "'\"":
                literal = self.literal_at(match.start(), ())
                self.rewrite(literal, ())
                at = literal.end
            elif token == "#":
                at = self.line_end(at)
            elif token in ("def", "class"):
                if _DEFINITION.match(text, match.start()):
                    at = self.type_parameters(text.index("[", at))
            elif token == "type":
                alias = _ALIAS.match(text, match.start())
                if alias is not None and not text[self.line_start(match.start()) : match.start()].strip(" \t"):
                    at = self.type_statement(alias)
            else:
                at = self.except_clause(match.start(), at)

    def line_start(self, at: int) -> int:
        return max(self.text.rfind("\n", 0, at), self.text.rfind("\r", 0, at)) + 1

    def line_end(self, at: int) -> int:
        found = _LINE_END.search(self.text, at)
        return found.start() if found is not None else len(self.text)

    def blank(self, start: int, end: int) -> bool:
        """Spaces for the text from start to end, its line breaks kept, each after a backslash that carries the
        statement on to the next line as the brackets did. False (nothing blanked) where a line has nothing to
        turn into that backslash."""
        characters = list(self.text[start:end])
        for index, char in enumerate(characters):
            if char in "\r\n":
                continue
            characters[index] = " "
            if index + 1 < len(characters) and characters[index + 1] in "\r\n":
                characters[index] = "\\"
        breaks = [i for i, char in enumerate(characters) if char in "\r\n" and (i == 0 or characters[i - 1] != "\r")]
        if any(i == 0 or characters[i - 1] != "\\" for i in breaks):
            return False
        self.edits.append((start, "".join(characters)))
        return True

    def type_parameters(self, opening: int) -> int:
        """`def f[T](...)`, `class C[T: int = str](Base)`: the brackets blanked."""
        closing, defaults = self.bracket_end(opening)
        self.met(TYPE_PARAMETERS, opening)
        for offset in defaults:
            self.met(TYPE_PARAMETER_DEFAULT, offset)
        if not self.blank(opening, closing + 1):
            self.keep(TYPE_PARAMETERS, opening)
        return closing + 1

    def bracket_end(self, opening: int) -> tuple[int, list[int]]:
        """The offset of the bracket that closes the one at `opening`, and of the `=` of each default in it."""
        defaults: list[int] = []
        for token, start, _, depth in self.outside_literals(_BRACKETED, opening):
            if token in ")]}" and depth == 0:
                return start, defaults
            if token not in "([{)]}" and depth == 1:
                defaults.append(start)
        raise _Unscannable

    def outside_literals(self, pattern: re.Pattern[str], at: int) -> Iterator[tuple[str, int, int, int]]:
        """Each match of `pattern` from `at` outside strings and comments: its text, start and end, and the bracket
        depth after it. The scans of bracketed syntax share this walk."""
        depth = 0
        while (match := pattern.search(self.text, at)) is not None:
            token, at = match.group(), match.end()
            if token in "'\"":
                at = self.literal_at(match.start(), ()).end
            elif token == "#":
                at = self.line_end(at)
            else:
                depth += (token in "([{") - (token in ")]}")
                yield token, match.start(), at, depth

    def type_statement(self, match: re.Match[str]) -> int:
        """`type X[T] = expr` -> `X        = expr`: an assignment on the same line, `expr` in its columns (the name
        moves left to where `type` was, keeping the statement's indentation)."""
        name = match["name"]
        if keyword.iskeyword(name):  # `type in [...]`, `type if ... else`: the name, in an expression
            return match.start("name")
        start = match.start()
        self.met(TYPE_STATEMENT, start)
        self.edits.append((start, name.ljust(match.end("name") - start)))
        if match["after"] == "[":
            return self.type_parameters(match.start("after"))
        return match.end()

    def except_clause(self, start: int, at: int) -> int:
        """`except A, B:` -> `except A   :`: what follows the first exception blanked up to the colon."""
        comma = None
        for token, found, end, depth in self.outside_literals(_CLAUSE, at):
            if token in "([{)]}" or depth > 0:
                continue
            if token == ",":
                comma = found if comma is None else comma
            elif token == ":":
                if comma is not None:
                    self.met(EXCEPT_WITHOUT_PARENTHESES, start)
                    if not self.blank(comma, found):
                        self.keep(EXCEPT_WITHOUT_PARENTHESES, start)
                return end
            elif token != "\n" or not self.continued(found):
                return end  # `as`, or the end of the line: no list of exceptions to lower
        return len(self.text)  # the clause runs to the end of the text: nothing after it to scan

    def continued(self, line_break: int) -> bool:
        """Whether the line that ends here ends in a backslash."""
        before = line_break - (self.text.startswith("\r", line_break - 1))
        return self.text.startswith("\\", before - 1)

    # -- the strings

    def after_escape(self, backslash: int) -> int:
        return backslash + (3 if self.text.startswith("\r\n", backslash + 1) else 2)

    def literal_at(self, quote_at: int, around: tuple[_Literal, ...]) -> _Literal:
        """The string whose (first) quote is at `quote_at`: its prefix read backwards, unless the letters before
        the quote end a name (`if"a"in x`: the keyword, then a string)."""
        text = self.text
        quote = text[quote_at] * 3 if text.startswith(text[quote_at] * 3, quote_at) else text[quote_at]
        start = quote_at
        while start > quote_at - 2 and start > 0 and text[start - 1] in "rRbBuUfFtT":
            start -= 1
        if start > 0 and _is_name_character(text[start - 1]) or text[start:quote_at].lower() not in _PREFIXES:
            start = quote_at
        return self.literal(start, text[start:quote_at], quote, around)

    def literal(self, start: int, prefix: str, quote: str, around: tuple[_Literal, ...]) -> _Literal:
        """The string that starts at `start`, inside the replacement fields of the f-strings `around` (outermost
        first), with every string inside its own fields."""
        node = _Literal(start, prefix, quote)
        if node.template:
            self.met(TEMPLATE_STRING, start)
        body = start + len(prefix) + len(quote)
        node.end = self.formatted_end(node, body, (*around, node)) if node.formatted else self.plain_end(body, quote)
        if around:  # inside a replacement field: what an older Python rejects there
            own = self.own_text(node)
            if any(outer.quote in piece for outer in around for piece in own):
                self.met(QUOTE_REUSE, start)
            if any("\\" in piece for piece in own):
                self.problem(node, FIELD_BACKSLASH, start)
            if any(len(outer.quote) == 1 for outer in around) and any(_LINE_END.search(piece) for piece in own):
                self.problem(node, FIELD_LINE_BREAK, start)
        return node

    def plain_end(self, at: int, quote: str) -> int:
        pattern = _PLAIN[quote]
        while (match := pattern.search(self.text, at)) is not None:
            if match.group() == "\\":
                at = self.after_escape(match.start())
            elif match.group() == "\n":
                raise _Unscannable
            else:
                return match.end()
        raise _Unscannable

    def formatted_end(self, node: _Literal, at: int, chain: tuple[_Literal, ...]) -> int:
        text, pattern = self.text, _FORMATTED[node.quote]
        while (match := pattern.search(text, at)) is not None:
            token, at = match.group(), match.end()
            if token == "{":
                at = at + 1 if text.startswith("{", at) else self.field(at, chain, 0)
            elif token == "}":
                at += text.startswith("}", at)
            elif token == "\\":
                if not node.raw and text.startswith("N{", at):  # a character by its name: `\N{DASH}`
                    at = text.find("}", at) + 1
                    if at == 0:
                        raise _Unscannable
                elif not text.startswith(("{", "}"), at):  # a brace after a backslash is still one
                    at = self.after_escape(match.start())
            elif token == "\n":
                raise _Unscannable
            else:
                return at
        raise _Unscannable

    def field(self, at: int, chain: tuple[_Literal, ...], spec_depth: int) -> int:
        """The end of the replacement field whose code starts at `at`, in the innermost f-string of `chain`."""
        owner, depth = chain[-1], 0
        while (match := _FIELD.search(self.text, at)) is not None:
            char, at = match.group(), match.end()
            if char in "'\"":
                child = self.literal_at(match.start(), chain)
                owner.children.append(child)
                at = child.end
            elif char in "([{":
                depth += 1
            elif char in ")]":
                depth -= 1
            elif char == "}":
                if depth == 0:
                    return at
                depth -= 1
            elif char == ":" and depth == 0:
                return self.format_spec(at, chain, spec_depth + 1)
            elif char == "#":
                self.problem(owner, FIELD_COMMENT, match.start())
                at = self.line_end(at)
            elif char == "\\":
                self.problem(owner, FIELD_BACKSLASH, match.start())
                at = self.after_escape(match.start())
            elif char == "\n" and any(len(literal.quote) == 1 for literal in chain):
                self.problem(owner, FIELD_LINE_BREAK, match.start())
        raise _Unscannable

    def format_spec(self, at: int, chain: tuple[_Literal, ...], spec_depth: int) -> int:
        """The end of the replacement field whose format specification starts at `at`."""
        owner = chain[-1]
        pattern = _FORMATTED[owner.quote]
        while (match := pattern.search(self.text, at)) is not None:
            token, at = match.group(), match.end()
            if token == "{":
                if spec_depth >= 2:
                    self.problem(owner, DEEP_FORMAT_SPEC, match.start())
                at = self.field(at, chain, spec_depth)
            elif token == "}":
                return at
            elif token == "\\":
                if not self.text.startswith(("{", "}"), at):
                    at = self.after_escape(match.start())
            else:
                raise _Unscannable  # the string or the line ends inside the field
        raise _Unscannable

    def own_text(self, node: _Literal) -> list[str]:
        """The pieces of the literal's text between the strings of its fields."""
        pieces, at = [], node.start
        for child in node.children:
            pieces.append(self.text[at : child.start])
            at = child.end
        pieces.append(self.text[at : node.end])
        return pieces

    def rewrite(self, node: _Literal, terminators: tuple[str, ...]) -> None:
        """The edits that make the literal valid inside f-strings closed by `terminators` (as rewritten, outermost
        first) on an older Python: a t-string made an f-string; a string that holds one of the terminators
        quoted with the other quote, or, where it cannot be, made a name of underscores of its length."""
        reasons, quote = list(node.problems), node.quote
        if terminators and not reasons and any(t in piece for t in terminators for piece in self.own_text(node)):
            requoted = self.requoted(node, terminators)
            if requoted is None:
                reasons.append((QUOTE_REUSE, node.start))
            else:
                quote = requoted
        if reasons and terminators and self.underscored(node):
            return
        for feature, offset in reasons:
            self.keep(feature, offset)
        if node.template:
            at = node.start + next(i for i, c in enumerate(node.prefix) if c in "tT")
            self.edits.append((at, "f" if self.text[at] == "t" else "F"))
        for child in node.children:
            self.rewrite(child, (*terminators, quote))

    def requoted(self, node: _Literal, terminators: tuple[str, ...]) -> str | None:
        """The literal's quotes changed for the other kind, where its text then holds none of the terminators."""
        width = len(node.quote)
        inner = self.own_text(node)  # then without the prefix and the quotes
        inner[0] = inner[0][len(node.prefix) + width :]
        inner[-1] = inner[-1][: len(inner[-1]) - width]
        for char in "'\"":
            quote = char * width
            if quote == node.quote or any(char in piece for piece in inner):
                continue
            pieces = list(inner)
            pieces[0] = node.prefix + quote + pieces[0]
            pieces[-1] += quote
            if not any(t in piece for t in terminators for piece in pieces):
                self.edits.append((node.start + len(node.prefix), quote))
                self.edits.append((node.end - width, quote))
                return quote
        return None

    def underscored(self, node: _Literal) -> bool:
        """The whole literal made a name of underscores of its length, where it is on one line and no name or
        number touches it."""
        text = self.text
        touching = (node.start > 0 and _is_name_character(text[node.start - 1])) or (
            node.end < len(text) and _is_name_character(text[node.end])
        )
        if touching or _LINE_END.search(text, node.start, node.end):
            return False
        self.edits.append((node.start, "_" * (node.end - node.start)))
        return True


def lower(text: str) -> Lowered:
    """The text with its newer syntax rewritten, and what was met. Unchanged where it uses none (or where the
    scanner cannot follow it: an unterminated string)."""
    scanner = _Scanner(text)
    try:
        scanner.scan()
    except (_Unscannable, RecursionError):  # strings nested past Python's recursion limit are no real source
        features = scanner.placed(scanner.found)
        return Lowered(text, features, features)
    return Lowered(scanner.rewritten(), scanner.placed(scanner.found), scanner.placed(scanner.kept))
