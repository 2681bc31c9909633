"""PFL110: DataParallel splits the batch with `chunk`: a small batch leaves replicas idle or feeds BatchNorm one sample."""

from __future__ import annotations

from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule


class BatchSmallerThanReplicas(Rule):
    """Batch sizes are rarely known statically, so only `verify` reports this, from what the replicas received."""

    info = RuleInfo(
        code="PFL110",
        name="batch-smaller-than-replicas",
        summary="(verify only) A DataParallel batch leaves replicas idle, or a chunk of one sample reaches BatchNorm.",
        severity="warning",
        hint='give every replica at least two samples: `drop_last=True`, or a batch size that is a multiple of the device count',
        verifiable=True,
    )
    triggers = ()
    runtime_only = True
