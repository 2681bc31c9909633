"""PFL201 unguarded-torch-save: what makes a file distributed, and every guard form that restricts a save."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

DDP_SETUP = """
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
local_rank = int(os.environ["LOCAL_RANK"])
"""

CASES = {
    "unguarded-at-top-level": """
        torch.save({}, "ckpt.pt")  # expect: PFL201
    """,
    "aliased-save": """
        from torch import save as tsave
        def end():
            tsave({}, "ckpt.pt")  # expect: PFL201
    """,
    "torch-module-alias": """
        import torch as th
        th.save({}, "ckpt.pt")  # expect: PFL201
    """,
    "loop-guard-unrelated-to-rank": """
        for epoch in range(3):
            if epoch % 2 == 0:
                torch.save({}, "ckpt.pt")  # expect: PFL201
    """,
    # Restricted to one rank.
    "rank-equals-zero": """
        if rank == 0:
            torch.save({}, "ckpt.pt")
    """,
    "not-rank": """
        if not rank:
            torch.save({}, "ckpt.pt")
    """,
    "get-rank-call": """
        if dist.get_rank() == 0:
            torch.save({}, "ckpt.pt")
    """,
    "local-rank-in-list": """
        if local_rank in [-1, 0]:
            torch.save({}, "ckpt.pt")  # expect: PFL305
    """,
    "main-process-helper-and-conjunction": """
        def is_main_process():
            return dist.get_rank() == 0
        for epoch in range(3):
            if epoch % 10 == 0 and is_main_process():
                torch.save({}, "ckpt.pt")
    """,
    "master-process-flag": """
        master_process = rank == 0
        if master_process:
            torch.save({}, "ckpt.pt")
    """,
    "early-return": """
        def save_checkpoint(state):
            if rank != 0:
                return
            torch.save(state, "ckpt.pt")
    """,
    "decorator": """
        from lightning.pytorch.utilities import rank_zero_only
        @rank_zero_only
        def save_checkpoint(state):
            torch.save(state, "ckpt.pt")
    """,
    "helper-that-guards-inside-itself": """
        def save_on_master(*args, **kwargs):
            if dist.get_rank() == 0:
                torch.save(*args, **kwargs)
        save_on_master({}, "ckpt.pt")
    """,
    "helper-whose-callers-are-guarded": """
        def write(state):
            torch.save(state, "ckpt.pt")
        def train():
            if rank == 0:
                write({})
    """,
    "path-with-rank": """
        torch.save({}, f"ckpt_rank{rank}.pt")
    """,
    "path-variable-with-rank": """
        def end(state):
            path = os.path.join("out", f"shard-{dist.get_rank()}.pt")
            torch.save(state, path)
    """,
    "path-keyword-with-rank": """
        torch.save({}, f=f"ckpt_{local_rank}.pt")
    """,
    "in-memory-buffer": """
        import io
        def to_bytes(state):
            buffer = io.BytesIO()
            torch.save(state, buffer)
            torch.save(state, io.BytesIO())
            return buffer
    """,
    "accelerate-process-index-and-per-rank-name-through-variables": """
        def save(accelerator, state, output_dir):
            if accelerator.process_index == 0:
                torch.save(state, "full.bin")
            weights_name = f"model_rank{accelerator.process_index}.bin"
            output_file = os.path.join(output_dir, weights_name)
            torch.save(state, output_file)
    """,
    # A branch on a parameter runs for the calls that pass a literal of its truth, or anything else.
    "branch-that-no-caller-takes": """
        def save_progress(state, path, safe_serialization=False):
            if safe_serialization:
                pass
            else:
                torch.save(state, path)
        save_progress({}, "a.pt", safe_serialization=True)
        save_progress({}, "b.pt", True)
    """,
    "branch-that-one-caller-takes": """
        def save_progress(state, path, safe_serialization=False):
            if not safe_serialization:
                torch.save(state, path)  # expect: PFL201
        save_progress({}, "a.pt", safe_serialization=True)
        save_progress({}, "b.pt", safe_serialization=0)
    """,
    "branch-that-a-caller-leaves-to-the-default": """
        def save_progress(state, path, safe_serialization=False):
            if safe_serialization:
                pass
            else:
                torch.save(state, path)  # expect: PFL201
        save_progress({}, "a.pt", safe_serialization=True)
        save_progress({}, "b.pt")
    """,
    "branch-on-a-variable-passed": """
        def save_progress(state, path, safe_serialization=False):
            if not safe_serialization:
                torch.save(state, path)  # expect: PFL201
        save_progress({}, "a.pt", safe_serialization=os.environ.get("SAFE") == "1")
    """,
    "branch-on-a-parameter-the-function-assigns": """
        def save_progress(state, path, safe_serialization=False):
            safe_serialization = safe_serialization and path.endswith(".safetensors")
            if not safe_serialization:
                torch.save(state, path)  # expect: PFL201
        save_progress({}, "a.pt", safe_serialization=True)
    """,
    "branch-after-a-spread-of-positional-arguments": """
        def save_progress(state, path, safe_serialization=False):
            if not safe_serialization:
                torch.save(state, path)  # expect: PFL201
        def resume(*head):
            save_progress(*head, "a.pt", True)  # `resume()` passes True as the path
        resume()
    """,
    # A name that a helper of the file builds from the rank: every rank writes its own file.
    "per-rank-name-built-by-a-helper": """
        def shard_path(step):
            return f"shard-{dist.get_rank()}-{step}.pt"
        def shared_path(step):
            return f"shared-{step}.pt"
        class Saver:
            def path(self):
                return os.path.join("out", f"rank{rank}.pt")
            def save(self):
                torch.save({}, self.path())
        torch.save({}, shard_path(3))
        torch.save({}, shared_path(3))  # expect: PFL201
    """,
    "local-function-named-save": """
        def save(obj, path):
            pass
        save({}, "ckpt.pt")
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(DDP_SETUP + dedent(CASES[name]))


@pytest.mark.parametrize(
    "setup",
    [
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n",
        "import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\n",
        "import os\nworld = int(os.getenv('WORLD_SIZE', '1'))\n",
        "def main():\n    from torch import distributed\n    distributed.init_process_group('gloo')\n",
    ],
)
def test_distributed_files_are_recognised(setup: str) -> None:
    assert_marks("import torch\n" + setup + "torch.save({}, 'c.pt')  # expect: PFL201\n")


@pytest.mark.parametrize(
    "setup",
    [
        "import deepspeed\nengine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters())\n",
        "from accelerate import Accelerator\naccelerator = Accelerator()\n",
        "import lightning as L\nfabric = L.Fabric(strategy='ddp', devices=2)\n",
        "from lightning.pytorch import Trainer\ntrainer = Trainer(devices=4)\n",
        "import pytorch_lightning as pl\ntrainer = pl.Trainer(strategy='deepspeed_stage_2')\n",
        "import colossalai\ncolossalai.launch_from_torch()\n",
        "import horovod.torch as hvd\nhvd.init()\n",
    ],
)
def test_frameworks_that_set_up_distributed_training(setup: str) -> None:
    assert_marks("import torch\n" + setup + "torch.save({}, 'c.pt')  # expect: PFL201\n")


@pytest.mark.parametrize(
    "setup",
    [
        "import lightning as L\nfabric = L.Fabric(accelerator='cpu')\n",
        "from lightning.pytorch import Trainer\ntrainer = Trainer(devices=1)\n",
        "from accelerate.utils import set_seed\nset_seed(0)\n",
    ],
)
def test_framework_calls_that_run_one_process(setup: str) -> None:
    assert_marks("import torch\n" + setup + "torch.save({}, 'c.pt')\n")


@pytest.mark.parametrize(
    "setup",
    [
        "import os\nos.environ['RANK'] = '0'\nos.environ['WORLD_SIZE'] = '1'\n",
        "import os\nos.environ.setdefault('RANK', '0')\n",
    ],
)
def test_setting_the_launcher_variables_sets_up_nothing(setup: str) -> None:
    assert_marks("import torch\n" + setup + "torch.save({}, 'c.pt')\n")


# A script run two ways, picked by a value every process of a launch shares (an argparse option): the side whose
# other side holds every set-up of distributed training runs in one plain process.
LAUNCH_MODES = {
    # LinB203/FSDP-Training tests/verify_2d_equivalence.py: `--mode single` writes the reference files as one plain
    # process, `torchrun ... --mode dist` reads torchrun's environment in dist_run and saves nothing.
    "mode-chosen-between-two-functions": """
        import argparse, os
        import torch
        def single_run(args):
            torch.save({}, f"{args.out}/single.pt")
        def dist_run(args):
            rank = int(os.environ["RANK"])
            world_size = int(os.environ["WORLD_SIZE"])
        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--mode", choices=["single", "dist"], required=True)
            args = parser.parse_args()
            if args.mode == "single":
                single_run(args)
            elif args.mode == "dist":
                dist_run(args)
            else:
                raise RuntimeError("unknown mode")
    """,
    "save-on-the-single-side-itself": """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main(args, model):
            if args.mode in ("single", "debug"):
                torch.save(model.state_dict(), "reference.pt")
            else:
                dist.init_process_group("nccl")
                model = DDP(model)
    """,
    "flag-at-module-level-with-an-elif": """
        import os
        import torch
        import torch.distributed as dist
        model = torch.nn.Linear(2, 2)
        if args.export_only:
            torch.save(model.state_dict(), "model.pt")
        elif args.evaluate:
            print("evaluating")
        else:
            dist.init_process_group("nccl")
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    """,
    "trainer-class-used-only-on-the-other-side": """
        import torch
        import torch.distributed as dist
        class DistributedTrainer:
            def __init__(self, args):
                dist.init_process_group("nccl")
        def evaluate(args):
            torch.save({}, "predictions.pt")
        def main(args):
            if args.eval_only:
                evaluate(args)
            else:
                DistributedTrainer(args)
    """,
    # Still flagged: a distributed launch can reach the save.
    "set-up-before-the-switch": """
        import torch
        import torch.distributed as dist
        dist.init_process_group("nccl")
        def main(args):
            if args.eval_only:
                torch.save({}, "predictions.pt")  # expect: PFL201
            else:
                dist.barrier()
    """,
    "set-up-used-on-both-sides": """
        import torch
        import torch.distributed as dist
        def setup():
            dist.init_process_group("nccl")
        def main(args):
            if args.mode == "single":
                setup()
                torch.save({}, "model.pt")  # expect: PFL201
            else:
                setup()
    """,
    "both-modes-in-one-process": """
        import torch
        import torch.distributed as dist
        def single_run():
            torch.save({}, "model.pt")  # expect: PFL201
        def dist_run():
            dist.init_process_group("nccl")
        for mode in ("single", "dist"):
            if mode == "single":
                single_run()
            else:
                dist_run()
    """,
    "switch-on-a-call-that-may-differ-between-processes": """
        import torch
        import torch.distributed as dist
        def main(model):
            if should_export():
                torch.save(model.state_dict(), "model.pt")  # expect: PFL201
            else:
                dist.init_process_group("nccl")
    """,
    "set-up-in-a-function-the-file-never-uses": """
        import torch
        import torch.distributed as dist
        def dist_run():
            dist.init_process_group("nccl")
        def main(args):
            if args.mode == "single":
                torch.save({}, "model.pt")  # expect: PFL201
            else:
                print("run with torchrun")
    """,
}


@pytest.mark.parametrize("name", LAUNCH_MODES)
def test_launch_modes(name: str) -> None:
    assert_marks(dedent(LAUNCH_MODES[name]))


def test_single_process_script_is_not_flagged() -> None:
    assert_marks("import torch\nmodel = torch.nn.Linear(2, 2)\ntorch.save(model.state_dict(), 'c.pt')\n")


def test_two_thousand_saves_give_exactly_the_marked_diagnostics() -> None:
    """Correctness at scale (bench/scaling_bench.py times it): 2,000 saves at module level, in one long function and in
    helpers called with and without a rank guard; every unguarded one, and only those, is reported."""
    import importlib.util

    from marks import REPO, expected, reported

    spec = importlib.util.spec_from_file_location("scaling_bench", REPO / "bench" / "scaling_bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    source = bench.many_saves(2000)
    assert source.count("torch.save(") == 2000
    marked = expected(source)
    assert len(marked) == 934 and {code for code, _ in marked} == {"PFL201"}  # 134 + 400 + 400 unguarded
    assert reported(source) == marked
