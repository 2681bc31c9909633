"""PFL102: `total_length=<padded input>.size(1)`, the input traced back through pack_padded_sequence by the rule."""

from __future__ import annotations

from pitfall_lint.fix.base import KeywordFixer


class TotalLength(KeywordFixer):
    code = "PFL102"
    keyword = "total_length"
