"""PFL305 rank-vs-local-rank: the global rank picking a device, a local rank 0 picking the one writer, and the
spellings that are right (LOCAL_RANK devices, global writers, `rank % device_count()`, fallbacks, one machine)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

CASES = {
    "set-device-from-the-rank-variable": """
        import os
        import torch
        def main():
            rank = int(os.environ["RANK"])
            torch.cuda.set_device(rank)  # expect: PFL305
    """,
    "every-device-spelling": """
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main(model):
            dist.init_process_group("nccl")
            rank = dist.get_rank()
            device = torch.device(f"cuda:{rank}")  # expect: PFL305
            other = torch.device("cuda", rank)  # expect: PFL305
            third = "cuda:{}".format(rank)  # expect: PFL305
            fourth = "cuda:%d" % rank  # expect: PFL305
            fifth = "cuda:" + str(rank)  # expect: PFL305
            model = model.to(rank)  # expect: PFL305
            model = DDP(model, device_ids=[rank], output_device=rank)  # expect: PFL305, PFL305
            with torch.cuda.device(rank):  # expect: PFL305
                model.cuda(rank)  # expect: PFL305
    """,
    "get-rank-directly-and-environ-get": """
        import os
        import torch
        import torch.distributed as dist
        def main():
            torch.cuda.set_device(dist.get_rank())  # expect: PFL305
            torch.cuda.set_device(int(os.environ.get("RANK", 0)))  # expect: PFL305
            torch.cuda.set_device(int(os.getenv("RANK")))  # expect: PFL305
    """,
    "rank-on-an-object": """
        import os
        import torch
        class Trainer:
            def __init__(self):
                self.rank = int(os.environ["RANK"])
            def setup(self, model):
                return model.to(self.rank)  # expect: PFL305
    """,
    "lightning-global-rank": """
        import torch
        def restore(trainer, path):
            return torch.load(path, map_location=torch.device(trainer.global_rank))  # expect: PFL305
    """,
    "local-rank-zero-writes-the-checkpoint": """
        import os
        import torch
        def save(model, args):
            if args.local_rank in [-1, 0]:
                torch.save(model.state_dict(), "model.pt")  # expect: PFL305
    """,
    "local-rank-writers-and-guards": """
        import os
        import torch
        def main(model, config):
            local_rank = int(os.environ["LOCAL_RANK"])
            if local_rank == 0 and config.save:
                with open("config.json", "w") as handle:  # expect: PFL305
                    handle.write("{}")
            if not local_rank:
                model.save_pretrained("out")  # expect: PFL305
            if local_rank != 0:
                pass
            else:
                torch.save(model, "else.pt")  # expect: PFL305
            if local_rank > 0:
                return
            torch.save(model, "after-exit.pt")  # expect: PFL305
    """,
    "a-variable-named-rank-holding-the-local-rank": """
        import torch
        def main(model, args):
            rank = args.local_rank
            if rank == 0:
                torch.save(model.state_dict(), "model.pt")  # expect: PFL305
    """,
    # Right: the local rank picks the device, the global rank the writer.
    "local-rank-devices": """
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main(model):
            local_rank = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local_rank)
            model = DDP(model.to(local_rank), device_ids=[local_rank])
            device = torch.device(f"cuda:{local_rank}")
            torch.cuda.set_device(dist.get_node_local_rank())
    """,
    "derived-and-fallback-devices": """
        import os
        import torch
        import torch.distributed as dist
        def main(args):
            rank = dist.get_rank()
            torch.cuda.set_device(rank % torch.cuda.device_count())
            local = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", 0)))
            torch.cuda.set_device(local)
            torch.cuda.set_device(args.rank)
            torch.cuda.set_device(dist.get_rank(group=args.group))
    """,
    "global-writers": """
        import os
        import torch
        import torch.distributed as dist
        def main(model, args):
            rank = int(os.environ["RANK"])
            local_rank = int(os.environ["LOCAL_RANK"])
            if rank == 0:
                torch.save(model, "model.pt")
            if args.local_rank == -1 or dist.get_rank() == 0:
                torch.save(model, "model.pt")
            if local_rank == 0:
                print("hello from this node")
                with open("log.txt", "a") as handle:
                    handle.write("appended")
            if local_rank == 0:
                torch.save(model, f"node-{os.uname().nodename}.pt")
    """,
    "a-per-node-cache-read-back": """
        import torch
        import torch.distributed as dist
        def dataset(local_rank, path, build):
            if local_rank <= 0:
                torch.save(build(), path)
            dist.barrier()
            return torch.load(path)
    """,
    "mp-spawn-index-is-the-local-process": """
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def worker(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            torch.cuda.set_device(dist.get_rank())
            if rank == 0:
                torch.save({}, "model.pt")
        if __name__ == "__main__":
            mp.spawn(worker, args=(2,), nprocs=2)
    """,
    "mp-spawn-with-a-node-rank-is-not-one-machine": """
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def worker(gpu, args):
            rank = args.node_rank * args.gpus + gpu
            dist.init_process_group("nccl", rank=rank, world_size=args.world_size)
            torch.cuda.set_device(dist.get_rank())  # expect: PFL305
        def main(args):
            mp.spawn(worker, args=(args,), nprocs=args.gpus)
    """,
    "world-sized-by-the-machine": """
        import torch
        import torch.distributed as dist
        def main():
            dist.init_process_group("nccl", world_size=torch.cuda.device_count())
            torch.cuda.set_device(dist.get_rank())
    """,
    "started-by-a-spawn-helper": """
        import torch
        import torch.distributed as dist
        from testing import torch_spawn
        @torch_spawn([2])
        def check():
            torch.cuda.set_device(dist.get_rank())
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(CASES[name]))


def test_an_attribute_is_read_where_it_is_assigned() -> None:
    """`self.rank = rank` names __init__'s parameter, not a `rank` of the method that uses the attribute."""
    assert_marks(dedent("""
        import os
        import torch
        class Trainer:
            def __init__(self, rank):
                self.rank = rank
            def setup(self, model):
                rank = int(os.environ["RANK"])
                print(rank)
                return model.to(self.rank)
        class Worker:
            def __init__(self):
                rank = int(os.environ["RANK"])
                self.rank = rank
            def setup(self, model, rank=None):
                return model.to(self.rank)  # expect: PFL305
    """))
