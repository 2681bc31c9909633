"""PFL104, PFL105, PFL106 and PFL212: what a DataParallel/DDP wrapper does to the model, measured around torch's own
code by harness/child/wrapper_observers.py (real devices or the CPU emulation)."""

from __future__ import annotations

import re
from typing import Any

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import Probe, at, errors_matching, errors_signed, last_line, signature
from pitfall_lint.harness.probes.data_parallel import DEVICE_MISMATCH
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord
from pitfall_lint.harness.words import counted

_DATA_PARALLEL = frozenset({"script", "example", "model", "notebook"})
_ATTRIBUTE = re.compile(r"`(\w+)\.(\w+)")  # each rule's message starts with the expression it flags
_BACKWARD_OF_A_VECTOR = "grad can be implicitly created only for scalar outputs"
_NOT_GATHERED = signature("TypeError", "object is not iterable", "the replicas returned Python numbers, which the gather "
                          "cannot take apart")
_VECTOR_OF_SCALARS = signature("RuntimeError", _BACKWARD_OF_A_VECTOR, "the gather made a vector of the replicas' 0-dim "
                               "outputs, and `.backward()` on it failed")
_REPLICATED_INTO_ORIGINAL = signature("AttributeError", "object has no attribute", "replicating the compiled module "
                                      "rewrote the original model's submodules")
_COMPILED_ON_THE_ORIGINAL = signature("RuntimeError", DEVICE_MISMATCH, "the replicas ran the compiled forward bound to "
                                      "the original module, on its parameters")


def _attribute(finding: Diagnostic) -> str | None:
    found = _ATTRIBUTE.search(finding.message)
    return found[2] if found else None


def _ran_in_parallel(run: RunRecord) -> bool:
    return bool(run.of("data-parallel")) or any(e.get("mode") == "cuda" for e in run.of("device"))


def _error_evidence(error: dict[str, Any], mechanism: str) -> Evidence:
    kind, _, rest = last_line(error.get("message")).partition(": ")
    if rest and kind.isidentifier():  # a replica's error arrives wrapped; its last line is the error itself
        return Evidence(mechanism, kind, rest, error.get("user_frame"))
    return Evidence(mechanism, error.get("type"), last_line(error.get("message")), error.get("user_frame"))


class LostStateProbe(Probe):
    code = "PFL104"
    kinds = _DATA_PARALLEL

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        if not _ran_in_parallel(run):
            return None
        attribute = _attribute(finding)
        lost = [e for e in run.of("dp-lost-state") if e["attribute"] == attribute]
        if lost:
            event = lost[-1]
            original = f"is {event['original']}" if event["original"] is not None else "does not exist"
            return Judgement(
                "confirmed",
                Evidence(
                    f"after {counted(len(lost), 'DataParallel step')}, `{attribute}` of the original {event['module']} "
                    f"{original}; the replicas had set it to {', '.join(event['replicas'])}, and were thrown away"
                ),
            )
        if run.returncode == 0 and not run.errors:
            return Judgement("not-reproduced", Evidence(f"no replica rebound `{attribute}` in the DataParallel steps of this run"))
        return None


class GatheredOutputProbe(Probe):
    code = "PFL105"
    kinds = _DATA_PARALLEL
    signatures = (_NOT_GATHERED, _VECTOR_OF_SCALARS)

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        if not _ran_in_parallel(run):
            return None
        kind = "scalar" if "a 0-dim tensor" in finding.message else "number" if "a Python number" in finding.message else "string"
        for event in run.of("dp-gather"):
            leaves = [leaf for leaf in event["leaves"] if leaf[1] == kind]
            if not leaves:
                continue
            place, _, python_type = leaves[0]
            where = f" as output{place}" if place else ""
            replicas = event["replicas"]
            if kind == "number" and event.get("error"):
                failures = errors_signed(run, (_NOT_GATHERED,))
                mechanism = f"each of the {replicas} replicas returned a Python {python_type}{where}, which the gather cannot take apart"
                if failures:
                    return Judgement("confirmed", _error_evidence(run.errors[failures[0]], mechanism), tuple(failures))
                error_type, _, message = event["error"].partition(": ")
                return Judgement("confirmed", Evidence(mechanism, error_type, message))
            if kind == "scalar" and event.get("warnings"):
                failures = errors_signed(run, (_VECTOR_OF_SCALARS,))
                mechanism = (
                    f"each of the {replicas} replicas returned a 0-dim tensor{where}; the gather made a vector of "
                    f"{replicas} of them" + (f", and `.backward()` on it failed: {_BACKWARD_OF_A_VECTOR}" if failures else "")
                )
                return Judgement("confirmed", Evidence(mechanism, "UserWarning", event["warnings"][0]), tuple(failures))
            if kind == "string" and event.get("strings"):
                gathered_place, text = event["strings"][0]
                mechanism = (
                    f"each of the {replicas} replicas returned a string{where}; the gather returned the text "
                    f"{text!r}{f' as output{gathered_place}' if gathered_place else ''} instead"
                )
                return Judgement("confirmed", Evidence(mechanism))
        if run.returncode == 0 and not run.errors:
            return Judgement("not-reproduced", Evidence("every DataParallel output of this run gathered as tensors with a batch dimension"))
        return None


class CompiledReplicaProbe(Probe):
    code = "PFL106"
    kinds = _DATA_PARALLEL
    signatures = (_REPLICATED_INTO_ORIGINAL, _COMPILED_ON_THE_ORIGINAL)

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        compiled = run.of("dp-compiled")
        if not compiled or not _ran_in_parallel(run):
            return None
        event = compiled[0]
        module = event["module"]
        if event["form"] == "torch.compile":
            changed = event["before"] != event["after"]
            mechanism = (
                f"replicating the compiled module rewrote the original {module}'s submodules from {event['before']} to "
                f"{event['after']}: the replicas' tables were written onto the model inside the OptimizedModule"
            )
            failures = errors_signed(run, (_REPLICATED_INTO_ORIGINAL,))
            if failures:
                return Judgement("confirmed", _error_evidence(run.errors[failures[0]], mechanism), tuple(failures))
            if changed:
                return Judgement("confirmed", Evidence(mechanism))
        else:
            failures = errors_signed(run, (_COMPILED_ON_THE_ORIGINAL,))
            if failures:
                mechanism = (
                    f"`{module}.compile()` stored a compiled forward bound to the original {module}; the replicas copied "
                    "it and ran on the original's parameters"
                )
                return Judgement("confirmed", _error_evidence(run.errors[failures[0]], mechanism), tuple(failures))
        if run.returncode == 0 and not run.errors:
            return Judgement("not-reproduced", Evidence(f"the compiled {module} ran under DataParallel without failing or changing"))
        return None


class WrapperAttributeProbe(Probe):
    code = "PFL212"
    kinds = _DATA_PARALLEL | {"distributed"}

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        attribute, line = _attribute(finding), run.line_name(finding.path, finding.line)
        if "sets a new attribute on the wrapper" in finding.message:
            seen = [e for e in run.of("wrapper-attribute") if e["attribute"] == attribute and at(e["set_at"], finding)]
            if not seen:
                return None  # the wrapper never ran forward after the assignment
            event = seen[0]
            if event["module_value"] == event["wrapper_value"]:
                return Judgement("not-reproduced", Evidence(f"the wrapped {event['module']} had the same `{attribute}` as the wrapper"))
            module_value = "had none" if event["module_value"] is None else f"was still {event['module_value']}"
            return Judgement(
                "confirmed",
                Evidence(
                    f"{line} set `{attribute}` = {event['wrapper_value']} on the {event['wrapper']} wrapper; "
                    f"when forward ran, the wrapped {event['module']}'s own `{attribute}` {module_value}"
                ),
            )
        failures = tuple(
            i
            for i in errors_matching(run, f"object has no attribute '{attribute}'")
            if at(run.errors[i].get("user_frame") or {}, finding)
        )
        if failures:
            error = run.errors[failures[0]]
            wrapper = re.search(r"'(\w+)' object has no attribute", error.get("message") or "")
            mechanism = f"the {wrapper[1] if wrapper else 'wrapper'} has no `{attribute}`; it is the wrapped model's"
            echoes = tuple(errors_matching(run, "ChildFailedError"))
            return Judgement("confirmed", _error_evidence(error, mechanism), failures + echoes)
        if run.returncode == 0 and not run.errors:
            return Judgement("not-reproduced", Evidence(f"`{attribute}` was found on the wrapper when {line} ran"))
        return None
