"""PFL301, observed by running the script unchanged: spawn children re-import it."""

from __future__ import annotations

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import SPAWN_ECHOES, Probe
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

BOOTSTRAPPING = "An attempt has been made to start a new process before the current process has finished its bootstrapping phase"


class MainGuardProbe(Probe):
    code = "PFL301"
    kinds = frozenset({"script"})

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        flat = " ".join(run.output.split())
        explained = tuple(i for i, e in enumerate(run.errors) if BOOTSTRAPPING in " ".join((e.get("message") or "").split()))
        if BOOTSTRAPPING in flat or explained:
            # The parent then learns that its children died: part of the same failure.
            explained += tuple(i for i, e in enumerate(run.errors) if e.get("type") in SPAWN_ECHOES)
            child = next((run.errors[i] for i in explained), None)
            return Judgement(
                "confirmed",
                Evidence(
                    f"a spawned child re-imported the script and reached {run.line_name(finding.path, finding.line)} again, "
                    "starting processes before it had finished bootstrapping",
                    "RuntimeError",
                    BOOTSTRAPPING + ".",
                    child.get("user_frame") if child else None,
                ),
                explained,
            )
        if run.returncode == 0:
            return Judgement("not-reproduced", Evidence("the workers started and the script ran to the end"))
        return None
