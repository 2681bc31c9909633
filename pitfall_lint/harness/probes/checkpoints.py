"""PFL201, observed by recording every torch.save on every rank."""

from __future__ import annotations

from collections import defaultdict

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import Probe
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord


class UnguardedSaveProbe(Probe):
    code = "PFL201"
    kinds = frozenset({"distributed", "script"})

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        writers: dict[str, set[int]] = defaultdict(set)
        for save in run.of("save"):
            if save.get("line") == finding.line and save.get("path") and save.get("rank") is not None:
                writers[save["path"]].add(save["rank"])
        if not writers:
            return None
        path, ranks = max(writers.items(), key=lambda item: len(item[1]))
        if len(ranks) > 1:
            *others, last = [str(r) for r in sorted(ranks)]
            listed = f"{', '.join(others)} and {last}"
            return Judgement(
                "confirmed",
                Evidence(
                    f"ranks {listed} each wrote {path} from line {finding.line}: concurrent writers of one file "
                    "corrupt it (the writes went to the scratch folder)"
                ),
            )
        (rank,) = ranks
        return Judgement("not-reproduced", Evidence(f"only rank {rank} wrote {path}"))
