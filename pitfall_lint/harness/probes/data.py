"""PFL401, PFL402, PFL404: what each rank's DataLoader and DistributedSampler actually yielded."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import Probe, at
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

_DISTRIBUTED = frozenset({"distributed", "script", "notebook"})
# The sampler torch gives a DataLoader over an IterableDataset.
_ITERABLE = "_InfiniteConstantSampler"


def _ranks(events: list[dict[str, Any]]) -> set[int]:
    return {e["rank"] for e in events if e.get("rank") is not None}


class MissingSamplerProbe(Probe):
    code = "PFL401"
    kinds = _DISTRIBUTED

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        loaders = [e for e in run.of("loader") if at(e, finding)]
        ranks = _ranks(loaders)
        if len(ranks) < 2:
            return None
        whole = [e for e in loaders if e.get("sampler") != "DistributedSampler"]
        if any(e.get("sampler") == _ITERABLE for e in whole):
            # No sampler of the loader says what each rank reads: the dataset's own code does (llama2.c's shards by
            # rank), which the run does not compare; a DistributedSampler is no remedy there.
            return Judgement("not-reproduced", Evidence(
                f"the loader reads an IterableDataset (its sampler is torch's {_ITERABLE}, and it takes no "
                "DistributedSampler): what each rank reads is decided by the dataset's own code"))
        if len(_ranks(whole)) > 1:
            size = whole[0].get("dataset_size")
            return Judgement(
                "confirmed",
                Evidence(f"ranks {', '.join(map(str, sorted(_ranks(whole))))} each iterated all {size} samples through a "
                         f"{whole[0]['sampler']}: every rank trains on the whole dataset, so an epoch is N times the data"),
            )
        return Judgement("not-reproduced", Evidence("each rank iterated its own shard"))


class MissingSetEpochProbe(Probe):
    code = "PFL402"
    kinds = _DISTRIBUTED

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        per_sampler: dict[tuple[int | None, int], list[dict[str, Any]]] = defaultdict(list)
        for event in run.of("sampler"):
            if event.get("shuffle"):
                per_sampler[(event.get("rank"), event["sampler"])].append(event)
        repeated = [(key, events) for key, events in per_sampler.items() if len(events) > 1]
        if not repeated:
            return None
        for (rank, _), events in repeated:
            first, second = events[0], events[1]
            if first["epoch"] == second["epoch"] and first["indices"] == second["indices"]:
                return Judgement(
                    "confirmed",
                    Evidence(f"rank {rank} drew the same order in two epochs ({first['indices'][:6]}...): the sampler's "
                             f"epoch stayed {first['epoch']}, so every epoch repeats the first shuffle"),
                )
        return Judgement("not-reproduced", Evidence("the sampler drew a new order each epoch"))


class RankSeedingProbe(Probe):
    code = "PFL404"
    kinds = _DISTRIBUTED

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        first_epoch: dict[int, dict[str, Any]] = {}
        for event in run.of("sampler"):
            if event.get("rank") is not None and event["rank"] not in first_epoch:
                first_epoch[event["rank"]] = event
        if len(first_epoch) < 2:
            return None
        events = [first_epoch[r] for r in sorted(first_epoch)]
        if len({e["seed"] for e in events}) == 1:
            return Judgement("not-reproduced", Evidence(f"every rank's sampler used seed {events[0]['seed']}"))
        shared = set(events[0]["indices"]).intersection(*(set(e["indices"]) for e in events[1:]))
        seeds = [e["seed"] for e in events]
        if not shared:
            return Judgement("not-reproduced", Evidence(f"seeds {seeds} differ per rank, yet the shards drawn did not overlap"))
        return Judgement(
            "confirmed",
            Evidence(f"seeds {seeds} gave the ranks different permutations, so their shards overlap: samples "
                     f"{sorted(shared)[:8]} went to more than one rank (and others to none)"),
        )
