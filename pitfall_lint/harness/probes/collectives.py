"""PFL207: the collectives each rank entered, in order, under a short process-group timeout: a rank-divergent
collective shows as a call that some ranks entered and the others never did, and the hang ends in seconds."""

from __future__ import annotations

from typing import Any

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.child.collectives import COLLECTIVE_TIMEOUT
from pitfall_lint.harness.probes.base import Probe, at, errors_matching, last_line
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

# Short enough for a verify run of a few seconds, long enough for the ranks of a loaded CI machine to meet at the
# collectives they all make (the rendezvous keeps its own timeout).
TIMEOUT_SECONDS = "5"
_STUCK = (
    "Timed out waiting", "timed out", "Connection closed by peer", "Connection reset by peer",
    "Detected mismatch between collectives", "EnforceNotMet", "remote worker",
)
_ECHOES = ("ChildFailedError",)


def _listed(ranks: set[int]) -> str:
    *others, last = [str(r) for r in sorted(ranks)]
    return f"ranks {', '.join(others)} and {last}" if others else f"rank {last}"


def _name(event: dict[str, Any]) -> str:
    op = event.get("op", "?")
    return "the DistributedDataParallel forward" if op == "DistributedDataParallel.forward" else f"`{op}`"


class RankDivergentCollectiveProbe(Probe):
    code = "PFL207"
    kinds = frozenset({"distributed", "script", "notebook"})

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        return {COLLECTIVE_TIMEOUT: TIMEOUT_SECONDS} if findings else {}

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        entered = [e for e in run.of("collective") if e.get("phase") == "enter" and e.get("rank") is not None]
        here = [e for e in entered if at(e, finding)]
        if not here:
            return None
        ranks = {e["rank"] for e in run.events if isinstance(e.get("rank"), int)}
        joined = {e["rank"] for e in here}
        first = min(here, key=lambda e: (e["seq"], e["rank"]))
        line = run.line_name(finding.path, finding.line)
        if joined >= ranks:
            return Judgement("not-reproduced", Evidence(f"every rank ({_listed(ranks)}) entered {_name(first)} at {line}"))
        absent = ranks - joined
        stuck = tuple(i for i in errors_matching(run, *_STUCK))
        failure = next((run.errors[i] for i in stuck if run.errors[i].get("rank") in joined), run.errors[stuck[0]] if stuck else None)
        timeout = next((e["seconds"] for e in run.of("collective-timeout")), None)
        waited = f"after the {timeout:g} s process-group timeout set for this run" if timeout else "at the process-group timeout"
        mechanism = (
            f"{_listed(joined)} entered {_name(first)} at {line} and waited for the others: "
            + "; ".join(self._where(run, rank, first["seq"], entered) for rank in sorted(absent))
            + f"; it ended {waited}" + (" with the error below" if failure else "")
        )
        explains = stuck + tuple(i for i, e in enumerate(run.errors) if e.get("type") in _ECHOES)
        if failure is None:
            return Judgement("confirmed", Evidence(mechanism), explains)
        return Judgement(
            "confirmed",
            Evidence(mechanism, failure.get("type"), last_line(failure.get("message")), failure.get("user_frame")),
            explains,
        )

    @staticmethod
    def _where(run: RunRecord, rank: int, sequence: int, entered: list[dict[str, Any]]) -> str:
        """Where a rank that never entered the collective was instead: the collective it made at that point of its
        sequence, the end of the script, or nowhere that was recorded."""
        own = sorted((e for e in entered if e["rank"] == rank), key=lambda e: e["seq"])
        counterpart = next((e for e in own if e["seq"] == sequence), own[-1] if own else None)
        if counterpart is not None:
            where = run.line_name(counterpart.get("file"), counterpart.get("line"))
            return f"rank {rank} never entered it: at that point it was in {_name(counterpart)} at {where}"
        if any(e.get("rank") == rank and e.get("status") == "ok" for e in run.of("exit")):
            return f"rank {rank} never entered it: it ran to the end of the script"
        return f"rank {rank} never entered it"
