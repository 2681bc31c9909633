"""PFL601-PFL605: FSDP2 refuses what these rules find with an error of its own, raised on every rank, which the run
records with the frames it passed through. gloo runs `fully_shard` on CPU ranks, so these need no GPU."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import Probe, at, last_line
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord
from pitfall_lint.harness.torch_release import installed_torch

_MIXED = "got mixed torch.Tensor and DTensor"
_NAMED = re.compile(r"`(\w+)`")


class _Fsdp2Refusal(Probe):
    """Confirmed by FSDP2's own error, raised where the finding points (or, for an error that comes later, naming
    what the finding names); not reproduced when the script ran to the end without an error."""

    kinds = frozenset({"distributed", "script"})
    failure: ClassVar[str]
    mechanism: ClassVar[str]
    # Whether the error is raised by the flagged line itself (a frame of the error stands there).
    raised_at_the_line: ClassVar[bool] = True
    # The first torch that refuses it, where older ones let it run (and go wrong silently): there a clean run tells
    # nothing, and the verdict says why.
    refused_since: ClassVar[tuple[int, int] | None] = None
    silently: ClassVar[str] = ""

    def explains(self, finding: Diagnostic, error: dict[str, Any]) -> bool:
        if not self.raised_at_the_line:
            return True
        frames = error.get("frames") or ([error["user_frame"]] if error.get("user_frame") else [])
        return any(at(frame, finding) for frame in frames)

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        matching = [
            index for index, error in enumerate(run.errors)
            if self.failure in (error.get("message") or "") and self.explains(finding, error)
        ]
        if matching:
            error = run.errors[matching[0]]
            ranks = sorted({run.errors[i].get("rank") for i in matching if isinstance(run.errors[i].get("rank"), int)})
            where = f" (on {'ranks' if len(ranks) > 1 else 'rank'} {', '.join(map(str, ranks))})" if ranks else ""
            evidence = Evidence(self.mechanism + where, error.get("type"), last_line(error.get("message")), error.get("user_frame"))
            return Judgement("confirmed", evidence, tuple(matching))
        if run.returncode == 0 and not run.errors:
            return Judgement("not-reproduced", Evidence("the script ran to the end without FSDP2 refusing it" + self._too_old()))
        return None

    def _too_old(self) -> str:
        """Why a clean run proves nothing on the torch that ran it, if it predates the refusal."""
        installed = installed_torch()
        if self.refused_since is None or installed is None or installed >= self.refused_since:
            return ""
        since = ".".join(map(str, self.refused_since))
        return (f"; but torch {'.'.join(map(str, installed))} does not check this (torch {since} refuses it), so the "
                f"run cannot tell: {self.silently}")


class TiedWeightsProbe(_Fsdp2Refusal):
    code = "PFL601"
    failure = "is shared with a parameter already managed by another FSDP group"
    mechanism = "at the first forward, FSDP2 found the tied parameter managed by two groups"
    raised_at_the_line = False  # raised by the lazy initialisation of the first forward
    refused_since = (2, 12)
    silently = "there, with uneven shards, the tied weight on the last rank is never updated (pytorch/pytorch#176076)"

    def explains(self, finding: Diagnostic, error: dict[str, Any]) -> bool:
        """The error names the parameter of one of the two modules the finding names."""
        modules = _NAMED.findall(finding.message)[:2]
        message = error.get("message") or ""
        return any(f"'{module}." in message or f".{module}." in message for module in modules)


class DeepcopyProbe(_Fsdp2Refusal):
    code = "PFL602"
    failure = "FSDP does not support deepcopy"
    mechanism = "`copy.deepcopy` reached a module that `fully_shard` had sharded, whose `__deepcopy__` refuses"


class ForwardMethodProbe(_Fsdp2Refusal):
    code = "PFL603"
    failure = _MIXED
    mechanism = "the method ran without FSDP2's pre-forward hook, on parameters that were still sharded DTensors"


class Fsdp1ApiProbe(_Fsdp2Refusal):
    code = "PFL604"
    failure = ""  # each API fails its own way: an AttributeError, a KeyError, ...
    mechanism = "FSDP1's or DDP's API met an FSDP2 module, which does not have it"

    def explains(self, finding: Diagnostic, error: dict[str, Any]) -> bool:
        return error.get("type") in ("AttributeError", "KeyError") and super().explains(finding, error)


class MixedClipProbe(_Fsdp2Refusal):
    code = "PFL605"
    failure = _MIXED
    mechanism = "the gradient norm met DTensor gradients of the sharded parts beside plain ones of the rest"
