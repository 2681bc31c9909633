"""PFL205, PFL208, PFL210, PFL211: what DistributedDataParallel did with the gradients, seen from every rank: its own
errors (unused parameters, a variable marked ready twice) and a checksum of each rank's parameters after each step
(replicas whose gradients are not averaged drift apart)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import ClassVar

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import Probe, Signature, errors_signed, last_line, signature
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

_DISTRIBUTED = frozenset({"distributed", "script", "notebook"})
_UNFINISHED_REDUCTION = "Expected to have finished reduction in the prior iteration"
_READY_TWICE = "Expected to mark a variable ready only once"
_DEVICE_IDS_ON_CPU = "device_ids and output_device arguments only work with single-device/multiple-device GPU modules"
_NO_GRADIENT_FOR_DDP = signature("RuntimeError", _UNFINISHED_REDUCTION, "parameters received no gradient in an "
                                 "iteration, so DDP's reduction never finished and the next forward failed", telling=True)
_NO_GRADIENT = re.compile(r"Parameters which did not receive grad for rank (\d+): ([\w.]+(?:, [\w.]+)*)")
_READY_TWICE_NAME = re.compile(r"Parameter at index \d+ with name (\S+) has been marked as ready twice")
_ATTRIBUTE = re.compile(r"^`\w+\.(\w+)` holds parameters")
# With names in DDP's errors (instead of parameter indices).
_DEBUG = {"TORCH_DISTRIBUTED_DEBUG": "INFO"}
_RELATIVE_TOLERANCE = 1e-9


def _first_line(message: str | None, fragment: str) -> str:
    """The line of a long multi-line message that holds the fragment."""
    return next((line.strip() for line in (message or "").splitlines() if fragment in line), last_line(message))


def drifted(run: RunRecord) -> tuple[int, dict[int, float]] | None:
    """The last optimizer step that every rank reported for the first DDP module, with each rank's checksum of its
    parameters then; None when fewer than two ranks reported."""
    checksums: dict[int, dict[int, float]] = defaultdict(dict)
    for event in run.of("ddp-parameters"):
        if event.get("index") == 0 and isinstance(event.get("rank"), int):
            checksums[event["step"]][event["rank"]] = event["checksum"]
    ranks = {rank for per_step in checksums.values() for rank in per_step}
    common = [step for step, per_step in checksums.items() if set(per_step) == ranks]
    if len(ranks) < 2 or not common:
        return None
    step = max(common)
    return step, checksums[step]


def _differ(values: dict[int, float]) -> bool:
    low, high = min(values.values()), max(values.values())
    return high - low > _RELATIVE_TOLERANCE * max(1.0, abs(high), abs(low))


def _checksums(values: dict[int, float]) -> str:
    return ", ".join(f"rank {rank} {value:.6f}" for rank, value in sorted(values.items()))


def _drift_judgement(run: RunRecord, cause: str) -> Judgement | None:
    found = drifted(run)
    if found is None:
        return None
    step, values = found
    if _differ(values):
        return Judgement(
            "confirmed",
            Evidence(f"after step {step} the ranks' copies of the model differ (sum of the parameters: {_checksums(values)}): {cause}"),
        )
    return Judgement("not-reproduced", Evidence(f"after step {step} every rank held the same parameters ({_checksums(values)})"))


def _error_judgement(run: RunRecord, known: Signature) -> Judgement | None:
    failures = tuple(errors_signed(run, (known,)))
    if not failures:
        return None
    error = run.errors[failures[0]]
    return Judgement(
        "confirmed",
        Evidence(known.means, error.get("type"), _first_line(error.get("message"), known.pattern.pattern),
                 error.get("user_frame")),
        failures + tuple(i for i, e in enumerate(run.errors) if e.get("type") == "ChildFailedError"),
    )


class UnusedParametersProbe(Probe):
    code = "PFL205"
    kinds = _DISTRIBUTED
    signatures = (_NO_GRADIENT_FOR_DDP,)
    remedy = ("pass find_unused_parameters=True to DistributedDataParallel, or make every parameter take part in the "
              "loss")

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        return dict(_DEBUG) if findings else {}

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        match = _ATTRIBUTE.search(finding.message)
        attribute = match[1] if match else None
        failures = errors_signed(run, self.signatures)
        if failures:
            error = run.errors[failures[0]]
            unused = _NO_GRADIENT.search(error.get("message") or "")
            names = [n.strip() for n in unused[2].split(",") if n.strip()] if unused else []
            ours = [n for n in names if attribute and (n.startswith(f"{attribute}.") or f".{attribute}." in n)]
            if names and not ours:
                return Judgement("not-reproduced", Evidence(f"DDP failed on other parameters ({', '.join(names)}); `{attribute}`'s received gradients"))
            detail = f"`{attribute}`'s parameters ({', '.join(ours)}) received no gradient on rank {unused[1]}" if ours and unused else "parameters received no gradient"
            return Judgement(
                "confirmed",
                Evidence(
                    f"{detail} in the first iteration, so DDP's reduction never finished and the next forward failed",
                    error.get("type"),
                    _first_line(error.get("message"), _UNFINISHED_REDUCTION),
                    error.get("user_frame"),
                ),
                tuple(failures) + tuple(i for i, e in enumerate(run.errors) if e.get("type") == "ChildFailedError"),
            )
        if run.returncode == 0 and drifted(run) is not None:
            return Judgement("not-reproduced", Evidence("every parameter received a gradient in every iteration that ran"))
        return None


class _DriftProbe(Probe):
    """Confirmed by the real error DDP raises, or by replicas that drifted apart."""

    kinds = _DISTRIBUTED
    drift_cause: ClassVar[str]

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        return dict(_DEBUG) if findings else {}

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        for known in self.signatures:
            judgement = _error_judgement(run, known)
            if judgement is not None:
                return judgement
        if run.errors and not errors_signed(run, self.signatures):
            return None  # the run failed some other way before the parameters could be compared
        return _drift_judgement(run, self.drift_cause)


class ModuleBypassProbe(_DriftProbe):
    code = "PFL208"
    drift_cause = "the forward ran outside DDP, so the gradients were never averaged and each rank stepped with its own"


class WrapOrderProbe(_DriftProbe):
    code = "PFL210"
    signatures = (
        signature("ValueError", _DEVICE_IDS_ON_CPU,
                  "DistributedDataParallel was given `device_ids` for a module whose parameters are on the CPU"),
        signature("RuntimeError", _UNFINISHED_REDUCTION, "parameters registered when DDP was built never received a "
                  "gradient after the change, so the next forward failed"),
    )
    drift_cause = "DDP kept all-reducing the parameters it registered when it was built, not the converted ones"


class ReentrantCheckpointProbe(_DriftProbe):
    code = "PFL211"
    signatures = (signature("RuntimeError", _READY_TWICE, "the reentrant backward pass of the checkpoint marked the "
                            "parameters ready a second time"),)
    drift_cause = "the module checkpointed twice got its gradients in two reentrant backward passes and DDP averaged only the first"

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        judgement = super().judge(finding, run)
        if judgement is not None and judgement.status == "confirmed" and judgement.evidence.message:
            named = _READY_TWICE_NAME.search(" ".join(e.get("message") or "" for e in run.errors))
            if named:
                mechanism = f"{judgement.evidence.mechanism} (`{named[1]}` first)"
                return Judgement("confirmed", Evidence(mechanism, judgement.evidence.error_type, judgement.evidence.message, judgement.evidence.user_frame), judgement.explains)
        return judgement


