"""PFL101 and PFL102, observed through an N-way DataParallel run (real devices or the emulation)."""

from __future__ import annotations

import linecache
import re
from typing import Any, ClassVar

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import Probe, at, errors_signed, signature
from pitfall_lint.harness.reasons import shown_path
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord
from pitfall_lint.harness.words import counted

_SHAPES = re.compile(r"got (\[[^\]]*\]), but expected (\[[^\]]*\])")
# A replica's error, as DataParallel re-raises it in the caller ("Caught RuntimeError in replica 1 on device 1.").
_IN_A_REPLICA = r"in replica \d+ on device"
# A replica computing with the original module's tensors, across torch's wordings (cudnn's in torch 0.4 and 1.x).
DEVICE_MISMATCH = (r"Expected all tensors to be on the same device|is not on the expected device"
                   r"|found two different devices|device \d+ does not equal 0")


def _evidence(error: dict[str, Any], mechanism: str) -> Evidence:
    message = error.get("message") or ""
    # A replica's error arrives wrapped ("Caught RuntimeError in replica 1 ..."); its last line is the error.
    last = message.strip().splitlines()[-1] if message.strip() else message
    kind, _, rest = last.partition(": ")
    if rest and kind.isidentifier():
        return Evidence(mechanism, kind, rest, error.get("user_frame"))
    return Evidence(mechanism, error.get("type"), last, error.get("user_frame"))


class _DataParallelProbe(Probe):
    kinds = frozenset({"script", "example", "model", "notebook"})
    clean_run: ClassVar[str]

    def mechanism(self, error: dict[str, Any], run: RunRecord) -> str:
        raise NotImplementedError

    def explains(self, finding: Diagnostic, error: dict[str, Any], run: RunRecord) -> bool:
        """Whether this finding, rather than another, caused the error (the failing frames point at it)."""
        return True

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        ran_in_parallel = bool(run.of("data-parallel")) or any(e.get("mode") == "cuda" for e in run.of("device"))
        if not ran_in_parallel:
            return None
        for index, error in enumerate(run.errors):
            if any(known.matches(error) for known in self.signatures) and self.explains(finding, error, run):
                return Judgement("confirmed", _evidence(error, self.mechanism(error, run)), (index,))
        if run.returncode == 0 and not run.errors:
            return Judgement("not-reproduced", Evidence(self.clean_run))
        return None


class BoundMethodProbe(_DataParallelProbe):
    code = "PFL101"
    signatures = (signature("RuntimeError", DEVICE_MISMATCH, "a replica computed with the original module's parameters "
                            "through a callable stored on the module"),)
    clean_run = "every replica ran to the end on its own parameters"

    def explains(self, finding: Diagnostic, error: dict[str, Any], run: RunRecord) -> bool:
        """The error passed through the finding's line (a lambda), or through the callable the line stored and a
        replica called: a stored method that no replica called proves nothing."""
        frames = error.get("frames") or ([error["user_frame"]] if error.get("user_frame") else [])
        if any(at(frame, finding) for frame in frames):
            return True
        called = {frame.get("function") for frame in frames}
        text = linecache.getline(finding.path, finding.line)
        return any(
            b["callable"] in called and b["callable"] in text and f".{b['attribute'].rsplit('.', 1)[-1]}" in text
            for b in self._bound(run)
        )

    @staticmethod
    def _bound(run: RunRecord) -> list[dict[str, Any]]:
        return [b for e in run.of("data-parallel") for b in e.get("bound", [])]

    def mechanism(self, error: dict[str, Any], run: RunRecord) -> str:
        called = {frame.get("function") for frame in error.get("frames") or ()}
        bound = [b for b in self._bound(run) if b["callable"] in called] or self._bound(run)
        if not bound:
            return "a replica computed with the original module's parameters through a callable stored on the module"
        b = bound[0]
        made = b.get("made_at") or {}
        written = f", made at {shown_path(made['file'])}:{made['line']}" if made.get("file") and made.get("line") else ""
        return (
            f"replica {b['replica']} ran `{b['callable']}` (stored in `{b['attribute']}`{written}), bound to the original "
            f"{b['module']}, on the original's parameters"
        )


class PadPackedProbe(_DataParallelProbe):
    code = "PFL102"
    signatures = (signature("RuntimeError", "Gather got an input of invalid size", "each replica padded its chunk to "
                            "its own longest sequence, so the replicas' outputs could not be gathered"),)
    clean_run = (
        "every replica returned the same padded length: the chunks' longest sequences were equal in this data; the "
        "gather fails only when they differ (put the longest sequences in one chunk to test it)"
    )

    def mechanism(self, error: dict[str, Any], run: RunRecord) -> str:
        shapes = _SHAPES.search(error.get("message") or "")
        detail = f" (one replica returned {shapes[1]}, the gather expected {shapes[2]})" if shapes else ""
        return (
            "each replica padded its chunk to its own longest sequence, so the replicas' outputs differ in length and "
            f"cannot be gathered{detail}"
        )


class ScatterDimProbe(_DataParallelProbe):
    code = "PFL103"
    _split = ("nn.DataParallel split the batch along dim 0 and gave a replica lengths that are not those of its slice "
              "(a list of lengths is copied whole to every replica, not split)")
    signatures = (
        signature("RuntimeError", r"Expected `?len\(lengths\)`? to be equal to batch_size", _split, telling=True,
                  context=_IN_A_REPLICA),
        signature("ValueError", "lengths array has incorrect size", _split, telling=True, context=_IN_A_REPLICA),
        # enforce_sorted=False: the lengths sort the batch, and an index past the slice fails.
        signature("IndexError", "index out of range in self", _split, telling=True,
                  context=_IN_A_REPLICA + r"(?s:.*)in pack_padded_sequence"),
        signature("RuntimeError", r"start \(\d+\) \+ length \(\d+\) exceeds dimension size", _split),
        signature("IndexError", r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)",
                  "nn.DataParallel(dim=1) could not split the 1-D lengths along dim 1"),
    )
    remedy = "pass the lengths as a tensor, so that they are split with the batch"
    clean_run = "every replica received matching sequences and lengths"

    def mechanism(self, error: dict[str, Any], run: RunRecord) -> str:
        return (
            "DataParallel split every tensor along dim 0, so a replica received a slice that is not a slice of the batch "
            "(time steps of a time-major input, or the whole list of lengths with half the sequences)"
        )


_BATCH_NORM_FAILURE = signature("ValueError", "Expected more than 1 value per channel when training",
                                "BatchNorm got a chunk of one sample")


class SmallBatchProbe(Probe):
    """PFL110 has no static check: the run itself says where a batch was too small for the replicas."""

    code = "PFL110"
    kinds = frozenset({"script", "example", "model", "notebook"})
    signatures = (_BATCH_NORM_FAILURE,)

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        return None  # never a static finding

    def observe(self, script: str, run: RunRecord) -> list[tuple[Diagnostic, Judgement]]:
        from pitfall_lint.rules.batch_smaller_than_replicas import BatchSmallerThanReplicas

        info = BatchSmallerThanReplicas.info
        failures = errors_signed(run, self.signatures)
        found: dict[tuple[str, int], tuple[Diagnostic, Judgement]] = {}
        for event in run.of("scatter"):
            chunks = [c for c in event["chunks"] if c is not None]
            file, line = event.get("file") or script, event.get("line")
            idle = event["replicas"] - len(chunks)
            single = event.get("batch_norm") and 1 in chunks
            if line is None or (file, line) in found or not (idle > 0 or single):
                continue
            batch = sum(chunks)
            what = f"a batch of {batch} on {event['replicas']} replicas was split into chunks {chunks}"
            if single:
                mechanism = f"{what}: BatchNorm got a chunk of one sample"
                evidence = _evidence(run.errors[failures[0]], mechanism) if failures else Evidence(mechanism)
                judgement = Judgement("confirmed", evidence, tuple(failures))
            else:
                judgement = Judgement("confirmed", Evidence(f"{what}: {counted(idle, 'replica')} got nothing and idled"))
            message = f"{what}; use a batch of at least 2 per replica (drop_last=True, or a batch size divisible by them)"
            diagnostic = Diagnostic(file, line, 1, info.code, info.name, line, 1, info.severity, message)
            found[(file, line)] = (diagnostic, judgement)
        return list(found.values())

