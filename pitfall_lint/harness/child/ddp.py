"""Inside each rank: a checksum of every DistributedDataParallel module's parameters after each optimizer step.

Replicas whose gradients are averaged stay equal; ones that train on their own gradients (a forward through
`.module`, a model cast after wrapping) drift apart, and the checksums of the ranks then differ.
"""

from __future__ import annotations

import weakref
from typing import Any

from pitfall_lint.harness.child.events import emit, user_place


def patch(torch: Any) -> None:
    if not torch.distributed.is_available():
        return
    from torch.nn.parallel import DistributedDataParallel
    from torch.optim.optimizer import register_optimizer_step_post_hook

    wrapped: list[weakref.ref] = []
    original_init = DistributedDataParallel.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        wrapped.append(weakref.ref(self))
        emit("ddp", index=len(wrapped) - 1, **user_place())

    steps = {"done": 0}

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        steps["done"] += 1
        for index, reference in enumerate(wrapped):
            module = reference()
            if module is not None:
                with torch.no_grad():
                    total = sum(float(p.detach().double().sum()) for p in module.module.parameters())
                emit("ddp-parameters", index=index, step=steps["done"], checksum=total)

    DistributedDataParallel.__init__ = init
    register_optimizer_step_post_hook(after_step)
