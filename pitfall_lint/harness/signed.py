"""Failures of a run that no verdict explained, classified against the rules' signatures: one that names a pitfall by
itself (the error of a replica given the whole list of lengths) is a finding of that rule, found at run time at the
user's frame, with the real error."""

from __future__ import annotations

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import Probe, predicted_failure
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord
from pitfall_lint.rules import registered_rules


def found_at_run_time(run: RunRecord, probes: dict[str, Probe], selected: set[str],
                      explained: set[int]) -> list[tuple[Diagnostic, Judgement]]:
    """A finding for each place where an unexplained failure is the telling signature of a selected rule; the other
    failures stay unexplained."""
    chosen = {code: probe for code, probe in probes.items() if code in selected}
    found: dict[tuple[str, str, int], tuple[Diagnostic, Judgement]] = {}
    for index, error in enumerate(run.errors):
        frame = error.get("user_frame")
        predicted = predicted_failure(chosen, error) if index not in explained and frame else None
        if predicted is None:
            continue
        probe, known, (kind, said) = predicted
        key = (probe.code, frame["file"], frame["line"])
        if key in found:
            diagnostic, judgement = found[key]
            found[key] = diagnostic, Judgement("confirmed", judgement.evidence, (*judgement.explains, index))
            continue
        info = next(rule.info for rule in registered_rules() if rule.info.code == probe.code)
        message = f"{known.means}; {probe.remedy}" if probe.remedy else known.means
        mechanism = f"the error is the failure {probe.code} predicts, on a stack where the static check flagged nothing"
        diagnostic = Diagnostic(frame["file"], frame["line"], 1, info.code, info.name, frame["line"], 1, info.severity,
                                message)
        found[key] = diagnostic, Judgement("confirmed", Evidence(mechanism, kind, said, frame), (index,))
    return list(found.values())

