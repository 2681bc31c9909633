"""PFL308, observed by running the notebook's cells: the spawned children fail as the rule predicts."""

from __future__ import annotations

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import SPAWN_ECHOES, Probe, errors_predicted, predicted_error, signature
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord
from pitfall_lint.harness.words import counted


class SpawnFromNotebookProbe(Probe):
    code = "PFL308"
    kinds = frozenset({"notebook"})
    # The rule's message quotes the error word for word; this is its form whatever the function's name.
    signatures = (signature("AttributeError", r"Can't get attribute '\w+' on <module '__main__'",
                            "a spawned process, a new interpreter, could not import the notebook's __main__ to find "
                            "the function"),)

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        predicted = predicted_error(finding)
        matched = errors_predicted(run, predicted) if predicted else []
        if matched:
            index, raised = matched[0]
            error = run.errors[index]
            echoes = tuple(i for i, e in enumerate(run.errors) if e.get("type") in SPAWN_ECHOES)
            return Judgement(
                "confirmed",
                Evidence(
                    f"{counted(len(matched), 'spawned process', 'spawned processes')} failed on start: each is a new "
                    "interpreter, which cannot import the notebook's __main__ to find the function",
                    error.get("type"),
                    raised,
                    error.get("user_frame"),
                ),
                tuple(i for i, _ in matched) + echoes,
            )
        if run.returncode == 0:
            return Judgement("not-reproduced", Evidence("every spawned process found the function and the notebook ran to its end"))
        return None
