"""Where a statement runs (analysis/ranks.py), seen through PFL201: guards read by what they test, with their
direction; values derived from a rank; helpers; the spawn index; the branches of a distributed switch; folders
that are per process."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

DDP = """
import argparse
import os
import tempfile
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
dist.init_process_group("gloo")
rank = dist.get_rank()
args = argparse.ArgumentParser().parse_args()
"""

CASES = {
    # 1. a value derived from a rank, not a name that looks like one
    "leader-variable": """
        leader = dist.get_rank() == 0
        if leader:
            torch.save({}, "c.pt")
    """,
    "flag-from-a-conjunction-with-a-predicate": """
        def is_primary(args):
            return args.rank == 0
        do_log = args.log_dir and is_primary(args)
        if do_log:
            torch.save({}, "c.pt")
    """,
    "flag-two-assignments-away": """
        def end(model):
            me = int(os.environ["RANK"])
            first = me == 0
            writer = first
            if writer:
                torch.save(model, "c.pt")
    """,
    "helper-returning-a-rank-test": """
        def should_write():
            return dist.get_rank() == 0
        if should_write():
            torch.save({}, "c.pt")
    """,
    "lora-rank-is-no-rank": """
        if args.lora_rank > 0:
            torch.save({}, "lora.pt")  # expect: PFL201
    """,
    "master-weights-is-no-process": """
        if args.master_weights:
            torch.save({}, "master_weights.pt")  # expect: PFL201
    """,
    "else-of-a-rank-zero-test-runs-on-the-others": """
        if rank == 0:
            print("saved elsewhere")
        else:
            torch.save({}, "c.pt")  # expect: PFL201
    """,
    "rank-zero-returns-early-the-others-save": """
        def end():
            if rank == 0:
                return
            torch.save({}, "c.pt")  # expect: PFL201
    """,
    "not-main-returns-early": """
        def is_main_process():
            return rank == 0
        def end():
            if not is_main_process():
                return
            torch.save({}, "c.pt")
    """,
    "truthy-rank-means-every-other-rank": """
        if args.local_rank:
            torch.save({}, "c.pt")  # expect: PFL201
    """,
    "rank-test-of-unknown-direction-still-counts": """
        if rank % 2 == 0:
            torch.save({}, "c.pt")
    """,
    "zero-on-the-left": """
        if 0 == args.rank:
            torch.save({}, "c.pt")
    """,
    "disjunction-with-an-unrelated-flag": """
        if args.save_all or rank == 0:
            torch.save({}, "c.pt")  # expect: PFL201
    """,
    # 2. the spawn index, whatever its name
    "spawn-index-named-gpu": """
        def worker(gpu, args):
            if gpu == 0:
                torch.save({}, "c.pt")
        if __name__ == "__main__":
            mp.spawn(worker, args=(args,), nprocs=2)
    """,
    "spawn-index-named-anything": """
        def run(proc, world):
            if proc == 0:
                torch.save({}, "c.pt")
        if __name__ == "__main__":
            mp.spawn(run, args=(2,), nprocs=2)
    """,
    "same-parameter-when-nothing-spawns-it": """
        def run(proc, world):
            if proc == 0:
                torch.save({}, "c.pt")  # expect: PFL201
    """,
    # 3. the branches of a distributed switch
    "else-of-args-distributed": """
        if args.distributed:
            print("rank 0 saves later")
        else:
            torch.save({}, "c.pt")
    """,
    "else-of-world-size-above-one": """
        world_size = dist.get_world_size()
        if world_size > 1:
            pass
        else:
            torch.save({}, "c.pt")
    """,
    "else-of-is-initialized": """
        if dist.is_initialized():
            pass
        else:
            torch.save({}, "c.pt")
    """,
    "else-of-ddp-flag": """
        ddp = int(os.environ.get("RANK", -1)) != -1
        if ddp:
            pass
        else:
            torch.save({}, "c.pt")
    """,
    "not-distributed-branch": """
        if not args.distributed or args.rank == 0:
            torch.save({}, "c.pt")
    """,
    "world-size-one": """
        if args.world_size == 1:
            torch.save({}, "c.pt")
    """,
    "inside-the-distributed-branch": """
        if args.distributed:
            torch.save({}, "c.pt")  # expect: PFL201
    """,
    # 8. folders of their own per process
    "pytest-tmp-path": """
        def test_saves(tmp_path):
            torch.save({}, tmp_path / "m.pt")
    """,
    "pytest-tmp-path-factory-through-a-variable": """
        def test_saves(tmp_path_factory):
            folder = tmp_path_factory.mktemp("ckpt")
            torch.save({}, folder / "m.pt")
    """,
    "unique-temporary-folder": """
        folder = tempfile.mkdtemp()
        torch.save({}, os.path.join(folder, "m.pt"))
    """,
    "unique-temporary-folder-kept-on-the-test-case": """
        import unittest
        class TestRunner(unittest.TestCase):
            def setUp(self):
                self.temp_dir = tempfile.mkdtemp()
            def test_resume(self):
                torch.save({}, os.path.join(self.temp_dir, "modified.pth"))
    """,
    "saved-by-the-parent-before-it-spawns-the-workers": """
        def worker(index, path):
            dist.init_process_group("gloo", rank=index, world_size=2)
            state = torch.load(path, map_location="cpu")
        def test_shared_weights():
            torch.save({}, "weights.pt")
            mp.spawn(worker, args=("weights.pt",), nprocs=2)
    """,
    "single-process-side-of-a-fabric-switch": """
        class LLM:
            def save(self, path):
                if self.fabric is None:
                    torch.save({}, path)
                else:
                    self.fabric.save(path, {})
    """,
    "the-fabric-side-is-not": """
        class LLM:
            def save(self, path):
                if self.fabric is not None:
                    torch.save({}, path)  # expect: PFL201
    """,
    "shared-temporary-folder": """
        torch.save({}, os.path.join(tempfile.gettempdir(), "m.pt"))  # expect: PFL201
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(DDP + dedent(CASES[name]))


def test_the_else_of_a_distributed_switch_loads_on_one_process() -> None:
    """The same reading for PFL202 (off by default, but checked by the marks' engine, which runs every rule)."""
    assert_marks(DDP + dedent("""
        local_rank = int(os.environ["LOCAL_RANK"])
        if args.distributed:
            state = torch.load("c.pt", map_location=f"cuda:{local_rank}")
        else:
            state = torch.load("c.pt")
    """))


def test_a_negated_number_is_not_read_as_a_test() -> None:
    """`-x` as a branch test is a value, not `not x`: reading it must end (it recursed without end on
    pytorch/examples' legacy SNLI script)."""
    assert_marks(DDP + "offset = -rank\nif -offset:\n    torch.save({}, 'c.pt')  # expect: PFL201\n")
