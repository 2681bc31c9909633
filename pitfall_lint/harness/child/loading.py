"""What each rank's DataLoader yielded, and the step budget that keeps a verify run short.

The budget is counted per iterator: an iterator yields at most K batches while the process has made
fewer than K optimizer steps, and one batch afterwards. So every epoch still runs (and the code after
the loop), `next(iter(loader))` never meets an empty loader, and an evaluation loop sees a batch.
"""

from __future__ import annotations

import os
from typing import Any

from pitfall_lint.harness.child.events import emit, user_place

STEPS = "PITFALL_LINT_STEPS"
_SAMPLED_INDICES = 64
_steps = {"done": 0}


def steps_done() -> int:
    return _steps["done"]


def patch_data_loading(torch: Any) -> None:
    from torch.utils.data import DataLoader, DistributedSampler

    original_init, original_iter = DataLoader.__init__, DataLoader.__iter__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._pitfall_lint_place = user_place()

    def iterate(self: Any) -> Any:
        try:
            size = len(self.dataset)
        except TypeError:
            size = None
        emit("loader", **getattr(self, "_pitfall_lint_place", {}), sampler=type(self.sampler).__name__, dataset_size=size)
        sampler = getattr(self.batch_sampler, "sampler", self.sampler)
        if isinstance(sampler, DistributedSampler):
            # The epoch's order is a pure function of (seed, epoch, rank): record it when the epoch starts, since
            # the batch sampler draws from it lazily and the step budget may end the epoch before the first batch.
            indices = list(sampler)
            emit("sampler", sampler=id(sampler), epoch=sampler.epoch, seed=sampler.seed, shuffle=sampler.shuffle,
                 indices=indices[:_SAMPLED_INDICES])
        return original_iter(self)

    DataLoader.__init__, DataLoader.__iter__ = init, iterate


def patch_step_budget(torch: Any) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data import dataloader

    budget = int(os.environ.get(STEPS, "0"))

    def count(optimizer: Any, args: Any, kwargs: Any) -> None:
        _steps["done"] += 1
        emit("step", step=_steps["done"], **user_place())

    register_optimizer_step_post_hook(count)
    if budget <= 0:
        return
    original_next = dataloader._BaseDataLoaderIter.__next__

    def next_batch(self: Any) -> Any:
        limit = self.__dict__.setdefault("_pitfall_lint_limit", budget if _steps["done"] < budget else 1)
        yielded = self.__dict__.get("_pitfall_lint_yielded", 0)
        if yielded >= limit:
            raise StopIteration
        batch = original_next(self)
        self._pitfall_lint_yielded = yielded + 1
        return batch

    dataloader._BaseDataLoaderIter.__next__ = next_batch
