"""PFL214 rank-divergent-loop-exit: a loop left on some ranks only, while its body runs a collective."""

from __future__ import annotations

import pytest
from fsdp_cases import findings, marked, places


def test_the_message_names_the_guard_and_the_collective() -> None:
    (finding,) = findings("PFL214", """
        import torch.distributed as dist
        def fit(loss, rank, stopper):
            for epoch in range(100):
                dist.all_reduce(loss)
                if rank == 0 and stopper(loss):
                    break
    """, path="scripts/fit.py")
    assert (finding.code, finding.path, finding.line, finding.column) == ("PFL214", "scripts/fit.py", 7, 13)
    assert finding.message == (
        "`break` leaves the loop only where `rank == 0 and stopper(loss)` holds (line 6), but the loop runs "
        "`dist.all_reduce` at line 5 on every rank: the other ranks go round again and wait in it until the process "
        "group times out; decide on one rank, broadcast the decision (`dist.broadcast_object_list`), and leave the "
        "loop on every rank"
    )


FLAGGED = {
    "ddp-forward": """
        from torch.nn.parallel import DistributedDataParallel as DDP
        def train(model, loader, local_rank, early_stop):
            model = DDP(model)
            for epoch in range(10):
                for x in loader:
                    model(x).sum().backward()
                if local_rank == 0:
                    if early_stop(epoch):
                        break  # expect: PFL214
    """,
    "return-from-the-loop": """
        import torch.distributed as dist
        def fit(loss):
            while True:
                dist.all_reduce(loss)
                if dist.get_rank() == 0 and loss.item() < 0.1:
                    return loss  # expect: PFL214
    """,
    "main-process-predicate": """
        import torch.distributed as dist
        def fit(loss, is_main_process, done):
            for step in range(10):
                dist.barrier()
                if is_main_process and done():
                    break  # expect: PFL214
    """,
}


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged(name: str) -> None:
    assert places("PFL214", FLAGGED[name]) == marked("PFL214", FLAGGED[name]) != []


CLEAN = {
    "a-decision-broadcast": """
        import torch
        import torch.distributed as dist
        def fit(loss, rank):
            for epoch in range(10):
                dist.all_reduce(loss)
                stop = torch.tensor([int(rank == 0 and loss.item() < 0.1)])
                dist.broadcast(stop, src=0)
                if stop.item():
                    break
    """,
    "no-collective-in-the-loop": """
        def report(rank, lines):
            for line in lines:
                if rank == 0 and not line:
                    break
                print(line)
    """,
    "a-collective-after-the-guard-is-pfl207s": """
        import torch.distributed as dist
        def fit(loss, rank):
            for epoch in range(10):
                if rank == 0 and loss.item() < 0.1:
                    break
                dist.all_reduce(loss)
    """,
    "the-collective-under-the-same-kind-of-guard": """
        import torch.distributed as dist
        def fit(loss, rank):
            for epoch in range(10):
                if rank == 0:
                    dist.all_reduce(loss)
                if rank == 0 and loss.item() < 0.1:
                    break
    """,
    "a-distributed-switch": """
        import torch.distributed as dist
        def fit(loss, local_rank):
            for epoch in range(10):
                dist.all_reduce(loss)
                if local_rank == -1:
                    break
    """,
    "a-loop-in-a-nested-function": """
        import torch.distributed as dist
        def fit(loss, rank):
            for epoch in range(10):
                dist.all_reduce(loss)
                def check():
                    if rank == 0:
                        return True
    """,
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL214", CLEAN[name]) == []
