"""PFL305 rank-vs-local-rank: the global rank picking a device, a local rank 0 picking the one writer, and the
spellings that are right (LOCAL_RANK devices, global writers, `rank % device_count()`, fallbacks, one machine)."""

from __future__ import annotations

import os
from pathlib import Path
from textwrap import dedent

import pytest

from marks import assert_marks, expected
from pitfall_lint.checking import ProjectSettings, check_paths
from pitfall_lint.engine import Engine
from pitfall_lint.files import Excluder
from pitfall_lint.rules import all_rules

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
    # pytorch/examples' ImageNet script (and its copies: MoCo, DeepSpeed's ViT fine-tuning): the first process of
    # every node, the global rank modulo the node's processes, writes the one checkpoint.
    "global-rank-modulo-the-node-size-is-local": """
        import os
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def main_worker(gpu, ngpus_per_node, args):
            if args.dist_url == "env://" and args.rank == -1:
                args.rank = int(os.environ["RANK"])
            if args.multiprocessing_distributed:
                args.rank = args.rank * ngpus_per_node + gpu
            dist.init_process_group(args.dist_backend, init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
            if not args.multiprocessing_distributed or (args.multiprocessing_distributed
                    and args.rank % ngpus_per_node == 0):
                torch.save({}, "checkpoint.pth.tar")  # expect: PFL305
            if args.rank % torch.cuda.device_count() == 0 or args.local_rank == 0:
                torch.save({}, "model_best.pth.tar")  # expect: PFL305
            local = dist.get_rank() % int(os.environ["LOCAL_WORLD_SIZE"])
            if local == 0:
                torch.save({}, "last.pth.tar")  # expect: PFL305
            torch.cuda.set_device(args.rank % ngpus_per_node)
            if args.rank % 2 == 0 or args.rank % ngpus_per_node == 0 and dist.get_rank() == 0:
                torch.save({}, "global.pth.tar")
        def main(args):
            ngpus_per_node = torch.cuda.device_count()
            mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
    """,
    "a-helper-that-writes-under-a-local-guard": """
        import os
        import shutil
        import torch
        def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
            torch.save(state, filename)
            if is_best:
                shutil.copyfile(filename, "model_best.pth.tar")
        def save_all(state):
            save_checkpoint(state, False)
        def save_own(state, rank):
            torch.save(state, f"rank{rank}.pt")
        def save_main(state, rank):
            if rank == 0:
                torch.save(state, "main.pt")
        def main_worker(gpu, ngpus_per_node, args, state):
            args.rank = int(os.environ["RANK"])
            if args.rank % ngpus_per_node == 0:
                save_checkpoint(state, True)  # expect: PFL305
                save_checkpoint(state, False, filename="checkpoint_{:04d}.pth.tar".format(args.epoch))  # expect: PFL305
                save_all(state)  # expect: PFL305
                save_checkpoint(state, False, f"node{args.node_rank}.pth.tar")
                save_checkpoint(state, False, **args.options)
                save_own(state, args.rank)
                save_main(state, args.rank)
                print(state)
    """,
    "a-method-that-writes-under-a-local-guard": """
        import io
        import os
        import torch
        def upload_to_s3(obj, destination):
            buffer = io.BytesIO()
            torch.save(obj, buffer)
            send(buffer, destination)
        class Trainer:
            def __init__(self, model, path):
                self.local_rank = int(os.environ["LOCAL_RANK"])
                self.model, self.path = model, path
            def _save_snapshot(self, epoch):
                snapshot = {"model": self.model.state_dict(), "epoch": epoch}
                if self.path.startswith("s3://"):
                    upload_to_s3(snapshot, self.path)
                else:
                    torch.save(snapshot, self.path)
            def _log(self, epoch):
                print(epoch)
            def train(self, epochs, save_every):
                for epoch in range(epochs):
                    if self.local_rank == 0 and epoch % save_every == 0:
                        self._save_snapshot(epoch)  # expect: PFL305
                        self._log(epoch)
                        upload_to_s3({}, "s3://bucket/snapshot.pt")
                        torch.save({}, io.BytesIO())
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
    # DeepSpeed-Chat: each node's first process writes the index files that the helper then loads back.
    "a-helper-that-makes-a-per-node-cache": """
        import os
        import numpy as np
        import torch.distributed as dist
        def split_index(output_path, name, split_index, splits):
            index_file = f"{output_path}/{name}_{split_index}.npy"
            if not os.path.isfile(index_file):
                for i, split in enumerate(splits):
                    split_file = f"{output_path}/{name}_{i}.npy"
                    np.save(split_file, split)
            return np.load(index_file)
        def create_dataset(local_rank, output_path, name):
            return split_index(output_path, name, 0, [[1], [2]])
        def create_prompt_dataset(local_rank, output_path, name):
            if local_rank <= 0:
                create_dataset(local_rank, output_path, name)
            dist.barrier()
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


def test_the_message_names_the_helper_and_its_write() -> None:
    """The write to a file, not the one to a buffer before it."""
    source = dedent("""
        import io
        import torch
        def save_checkpoint(state, filename="checkpoint.pth.tar"):
            torch.save(state, io.BytesIO())
            torch.save(state, filename)
        def main(local_rank, state):
            if local_rank == 0:
                save_checkpoint(state)
    """)
    result = Engine(all_rules()).check_source("train.py", source.encode())
    assert [(d.code, d.line, d.message) for d in result.diagnostics] == [
        (
            "PFL305",
            9,
            "`local_rank == 0` (line 8) picks the one process that runs `save_checkpoint(...)`, which writes with "
            "`torch.save` (line 6), but it tests the local rank and a local rank 0 exists on every node: on two nodes "
            "two processes write, the same file when the file system is shared; pick the writer with the global rank "
            "(`dist.get_rank() == 0`)",
        )
    ]


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


# A torchrun script whose global rank picks the device, with `{rendezvous}` where its process group is set up.
RENDEZVOUS = """
import argparse
import os
import tempfile
import torch
import torch.distributed as dist
def main(args, port):
    rank = int(os.environ["RANK"])
    {rendezvous}
    torch.cuda.set_device(rank){mark}
"""


@pytest.mark.parametrize(
    "rendezvous",
    [
        'dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)',
        'dist.init_process_group("nccl", f"tcp://localhost:{port}", rank=rank, world_size=2)',
        'dist.init_process_group("nccl", init_method="tcp://localhost:" + str(port), rank=rank, world_size=2)',
        'dist.init_process_group("nccl", init_method="tcp://[::1]:{}".format(port), rank=rank, world_size=2)',
        'os.environ["MASTER_ADDR"] = "localhost"; dist.init_process_group("nccl")',
        'os.environ["MASTER_ADDR"] = "127.0.0.1"; dist.init_process_group("nccl", init_method="env://")',
        'dist.init_process_group("gloo", init_method="file:///tmp/rendezvous", rank=rank, world_size=2)',
        'dist.init_process_group("gloo", init_method="file://" + tempfile.mkstemp()[1], rank=rank, world_size=2)',
        'url = f"file://{temp_file_name}"; dist.init_process_group("gloo", init_method=url, rank=rank, world_size=2)',
        'store = dist.TCPStore("localhost", port, 2, rank == 0); dist.init_process_group("gloo", store=store, rank=rank, world_size=2)',
        'assert int(os.environ["WORLD_SIZE"]) <= torch.cuda.device_count(); dist.init_process_group("nccl")',
    ],
)
def test_a_rendezvous_on_this_machine_spans_one_node(rendezvous: str) -> None:
    """Peers on another node would meet at their own machine: every rank is on this one, the global rank is local."""
    assert_marks(RENDEZVOUS.format(rendezvous=rendezvous.replace("; ", "\n    "), mark=""))


@pytest.mark.parametrize(
    "rendezvous",
    [
        'dist.init_process_group("nccl")',
        'dist.init_process_group("nccl", init_method=f"tcp://10.1.2.3:{port}", rank=rank, world_size=2)',
        'dist.init_process_group("nccl", init_method=args.dist_url, rank=rank, world_size=2)',
        'dist.init_process_group("nccl", init_method="tcp://" + args.ip + ":" + args.port, rank=rank, world_size=2)',
        'dist.init_process_group("gloo", init_method="file:///shared/rendezvous", rank=rank, world_size=2)',
        'os.environ.setdefault("MASTER_ADDR", "localhost"); dist.init_process_group("nccl")',
        'os.environ["MASTER_ADDR"] = args.master; dist.init_process_group("nccl")',
        'argparse.ArgumentParser().add_argument("--dist-url", default=f"tcp://127.0.0.1:{port}")',
        (
            'dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}"); parser = argparse.ArgumentParser(); '
            'parser.add_argument("--dist-url", default=f"tcp://127.0.0.1:{port}")'
        ),
    ],
)
def test_a_rendezvous_that_can_be_elsewhere_still_reports(rendezvous: str) -> None:
    """The launcher's environment, a remote address, the user's option, a shared file, a default the launcher
    overrides: another node can join."""
    assert_marks(RENDEZVOUS.format(rendezvous=rendezvous.replace("; ", "\n    "), mark="  # expect: PFL305"))


def test_each_function_is_judged_by_its_own_rendezvous_or_its_callers() -> None:
    """A test module whose single-node fixtures meet at localhost and whose multi-node fixture takes the launcher's
    address: a helper called only by the former writes a per-machine file from each node's local rank 0 by design;
    the multi-node fixture's own writer is reported."""
    assert_marks(dedent("""
        import os
        import torch
        import torch.distributed as dist
        def setup_free_port(local_rank):
            if local_rank == 0:
                with open("/tmp/free_port", "w") as handle:
                    handle.write("29500")
        def create_context(options):
            dist.init_process_group(**options)
            torch.cuda.set_device(dist.get_rank())
        def single_node_nccl(local_rank, world_size):
            setup_free_port(local_rank)
            os.environ["MASTER_ADDR"] = "localhost"
            create_context({"backend": "nccl", "init_method": "env://", "rank": local_rank, "world_size": world_size})
        def single_node_gloo(local_rank, world_size, windows, temp_file):
            if windows:
                init_method = f"file:///{temp_file.name}"
            else:
                setup_free_port(local_rank)
                init_method = "env://"
                os.environ["MASTER_ADDR"] = "localhost"
            create_context({"backend": "gloo", "init_method": init_method, "rank": local_rank, "world_size": world_size})
        def multi_node(local_rank):
            dist.init_process_group("nccl", init_method="env://")
            if local_rank == 0:
                torch.save({}, "shared.pt")  # expect: PFL305
    """))


def test_functions_run_by_a_local_test_harness_span_one_node() -> None:
    assert_marks(dedent("""
        import torch
        import torch.distributed as dist
        from torch.testing._internal.common_distributed import MultiProcessTestCase
        class DistributedTest(MultiProcessTestCase):
            def test_device(self):
                torch.cuda.set_device(dist.get_rank())
        class Other:
            def run(self):
                torch.cuda.set_device(dist.get_rank())  # expect: PFL305
    """))


# sherlcok314159/dl-tools: one helper module serves a torchrun script and an mp.spawn script (which imports it with
# `*`), both of which meet at the loopback address of their config; the spawn script stores the spawn index as the rank.
DL_TOOLS = {
    "utils.py": """
        import os
        import torch
        import torch.distributed as dist
        def dist_setup_launch(args):
            args.rank = int(os.environ["RANK"])
            dist.init_process_group(args.backend, args.init_method, rank=args.rank, world_size=args.world_size)
            torch.cuda.set_device(args.rank){mark}
        def dist_setup_mp(args):
            dist.init_process_group(args.backend, args.init_method, rank=args.rank, world_size=args.world_size)
            torch.cuda.set_device(args.rank){mark}
    """,
    "main_launch.py": """
        from dataclasses import dataclass
        from utils import dist_setup_launch
        @dataclass
        class Config:
            backend: str = "nccl"
            init_method: str = {address}
            world_size: int = 2
        def main():
            dist_setup_launch(Config())
        if __name__ == "__main__":
            main()
    """,
    "main_mp.py": """
        from dataclasses import dataclass
        import torch.multiprocessing as mp
        from utils import *
        @dataclass
        class Config:
            backend: str = "nccl"
            init_method: str = {address}
            world_size: int = 2
            rank: int = 0
        def main(rank, args):
            args.rank = {spawn_rank}
            dist_setup_mp(args)
        if __name__ == "__main__":
            mp.spawn(main, args=(Config(),), nprocs=2)
    """,
}


def check_project(root: Path, files: dict[str, str]) -> None:
    """Each file of a small project carries its own `# expect:` marks; the project is checked as a whole."""
    (root / "pyproject.toml").write_text("")
    for name, source in files.items():
        (root / name).write_text(dedent(source))
    previous = os.getcwd()
    os.chdir(root)
    try:
        results = check_paths(sorted(files), list(all_rules()), ProjectSettings(Excluder([], root)), root, use_cache=False).results
    finally:
        os.chdir(previous)
    # This rule's findings only: the same sources may hold another rule's (a fixed port of PFL306).
    found = {(r.path, d.code, d.line) for r in results for d in r.diagnostics if d.code == "PFL305"}
    assert found == {(name, code, line) for name in files for code, line in expected((root / name).read_text()) if code == "PFL305"}


def dl_tools(mark: str, address: str, spawn_rank: str) -> dict[str, str]:
    return {
        name: source.replace("{mark}", mark).replace("{address}", address).replace("{spawn_rank}", spawn_rank)
        for name, source in DL_TOOLS.items()
    }


def test_a_helper_runs_on_one_node_when_every_caller_does(tmp_path: Path) -> None:
    check_project(tmp_path, dl_tools("", '"tcp://127.0.0.1:" + str(23456)', "rank"))


def test_a_helper_with_a_caller_that_can_span_nodes_is_reported(tmp_path: Path) -> None:
    """The launcher's environment, and a spawn script that ranks its processes across nodes."""
    check_project(tmp_path, dl_tools("  # expect: PFL305", '"env://"', "args.node_rank * 2 + rank"))


def test_a_spawn_script_that_ranks_by_the_index_is_one_node_whatever_its_rendezvous(tmp_path: Path) -> None:
    """Every node would number its processes from 0: such a group cannot span two nodes."""
    files = dl_tools("", '"env://"', "rank")
    files["utils.py"] = files["utils.py"].replace("torch.cuda.set_device(args.rank)\n", "torch.cuda.set_device(args.rank)  # expect: PFL305\n", 1)
    check_project(tmp_path, files)



HANDED = {
    "harness.py": """
        import os
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def _run(rank, world_size, method):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            method()
        def spawn_local(world_size, method):
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = "0"
            mp.spawn(_run, args=(world_size, method), nprocs=world_size)
    """,
    "launched.py": """
        import torch.distributed as dist
        def under_the_launcher(world_size, method):
            dist.init_process_group("nccl")
            method()
    """,
    "test_gather.py": """
        import torch
        import torch.distributed as dist
        from {module} import {helper}
        class TestGather:
            def test_gather(self):
                {helper}(2, self._gather)
            @staticmethod
            def _gather():
                torch.cuda.set_device(dist.get_rank()){mark}
        def _broadcast():
            torch.cuda.set_device(dist.get_rank()){mark}
        def test_broadcast():
            {helper}(2, _broadcast)
    """,
}


@pytest.mark.parametrize(
    ("module", "helper", "mark"), [("harness", "spawn_local", ""), ("launched", "under_the_launcher", "  # expect: PFL305")]
)
def test_a_function_handed_to_a_helper_runs_where_the_helper_starts_it(tmp_path: Path, module: str, helper: str, mark: str) -> None:
    """A test body passed to a project helper that spawns its group on this machine (torchtnt's spawn_multi_process)
    runs on one node; handed to one that joins the launcher's group, which can span nodes, it is reported."""
    sources = {name: s.replace("{module}", module).replace("{helper}", helper).replace("{mark}", mark) for name, s in HANDED.items()}
    check_project(tmp_path, sources)
