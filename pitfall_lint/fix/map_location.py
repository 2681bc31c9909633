"""PFL202: `map_location=<the local device variable>`, else `"cpu"`.

Unsafe: the loaded tensors land on another device than before, which code that uses them directly may notice.
"""

from __future__ import annotations

from pitfall_lint.fix.base import KeywordFixer


class MapLocation(KeywordFixer):
    code = "PFL202"
    keyword = "map_location"
