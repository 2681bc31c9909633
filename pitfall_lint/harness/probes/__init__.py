"""Runtime probes: each maps one rule to one way of observing it in a verify run."""

from __future__ import annotations

from functools import cache

from pitfall_lint.harness.probes.base import Probe
from pitfall_lint.plugins import subclasses_in


@cache
def all_probes() -> dict[str, Probe]:
    found = subclasses_in(__name__, __path__, Probe, frozenset({"base"}))
    return {cls.code: cls() for cls in found if hasattr(cls, "code")}  # shared bases declare no code
