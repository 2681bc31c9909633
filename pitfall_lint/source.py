"""Reading Python source the way the interpreter does (PEP 263 cookies, BOM, any newline)."""

from __future__ import annotations

import io
import re
import tokenize
from functools import cached_property

_NEWLINE = re.compile(r"\r\n|\r|\n")
# Every byte that cannot be part of an identifier, a space: an identifier is then a word between spaces, as `\b`
# bounds it in the source (never the tail of a longer one, nor of a number: `e5` in `1e5`).
WORDS_ONLY = bytes(c if c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_" else 0x20 for c in range(256))


def distinct_words(data: bytes) -> bytes:
    """Each run of identifier characters of the source once, between spaces: a string of such characters is in the
    source exactly where it is in these, which are a fraction of its bytes (a quarter in Lightning)."""
    return b" " + b" ".join(set(data.translate(WORDS_ONLY).split())) + b" "


def decoding_error(data: bytes) -> str | None:
    """Why the bytes are not text in their declared encoding (UTF-8 unless a BOM or cookie says so)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        return str(error)
    return None


def split_lines(text: str) -> list[str]:
    """The lines as Python and the Language Server Protocol count them, without their ends: only \\r\\n, \\r and \\n
    end a line (str.splitlines also splits at a form feed)."""
    return _NEWLINE.split(text)


class SourceText:
    """Decoded lines of a file, made only when a diagnostic needs them."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    @cached_property
    def lines(self) -> list[str]:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(self.data).readline)
        return split_lines(self.data.decode(encoding, errors="replace"))

    def line(self, number: int) -> str:
        """The text of a 1-based line, '' past the end."""
        lines = self.lines
        return lines[number - 1] if 0 < number <= len(lines) else ""

    def column(self, line: int, byte_offset: int) -> int:
        """A 1-based character column from the UTF-8 byte offset that `ast` reports."""
        text = self.line(line)
        if text.isascii():
            return byte_offset + 1
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1
