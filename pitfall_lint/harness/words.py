"""Counts in plain words for the verify report: '1 rank', '2 ranks', never 'rank(s)'."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
