"""Patches installed in every child process the moment torch is imported.

- `torch.save` is recorded per rank (caller line, absolute path) and redirected into the scratch
  folder, so the user's tree is never written; `torch.load` of such a path reads the redirected copy.
- `nn.DataParallel` becomes N-way: real devices when there are N, the emulation otherwise.
- `init_process_group` asking for nccl without enough GPUs gets gloo, and says so.
- After K optimizer steps, DataLoader iteration ends on that rank, so epochs wind down and the
  code after training (checkpoints, above all) still runs.
- What the probes need is recorded: saved keys, the devices a checkpoint was saved from, lenient
  `load_state_dict` results, what each rank's DataLoader and DistributedSampler yielded.
- On request, saves are delayed (to expose a missing barrier) and given ports are held (to expose a
  hard-coded port), as a slower disk or a second job on the machine would.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
import socket
import time
from typing import Any

from pitfall_lint.harness.child import collectives, ddp
from pitfall_lint.harness.child.coverage import LineRecorder
from pitfall_lint.harness.child.events import SCRIPT, current_rank, emit, emit_error, user_line
from pitfall_lint.harness.child.wrapper_observers import observe_wrappers

SCRATCH = "PITFALL_LINT_SCRATCH"
SAVE_DELAY = "PITFALL_LINT_SAVE_DELAY"  # seconds, for the first saves of each process
HELD_PORTS = "PITFALL_LINT_HOLD_PORTS"  # comma-separated ports the first process binds before the script runs
_DELAYED_SAVES = 2
_SAMPLED_INDICES = 64
_held: list[socket.socket] = []
DEVICE = "PITFALL_LINT_DEVICE"  # "cpu" (emulate) or "cuda" (real devices)
REPLICAS = "PITFALL_LINT_NPROC"
STEPS = "PITFALL_LINT_STEPS"


def _redirected(path: str, rank: int | None) -> str:
    digest = hashlib.sha1(path.encode()).hexdigest()[:12]
    folder = os.path.join(os.environ[SCRATCH], "saved", digest, f"rank{rank if rank is not None else 'none'}")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, os.path.basename(path) or "file")


def _latest_redirect(path: str) -> str | None:
    digest = hashlib.sha1(path.encode()).hexdigest()[:12]
    folder = os.path.join(os.environ[SCRATCH], "saved", digest)
    if not os.path.isdir(folder):
        return None
    rank = current_rank()
    candidates = [os.path.join(folder, f"rank{rank}"), *sorted(os.path.join(folder, d) for d in os.listdir(folder))]
    for candidate in candidates:
        target = os.path.join(candidate, os.path.basename(path) or "file")
        if os.path.exists(target):
            return target
    return None


def _patch_serialization(torch: Any) -> None:
    original_save, original_load = torch.save, torch.load

    delays = {"left": _DELAYED_SAVES}

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        delay = float(os.environ.get(SAVE_DELAY, "0"))
        if delay and delays["left"]:
            delays["left"] -= 1
            time.sleep(delay)
        prefixed = _module_prefixed_key(obj)
        if isinstance(f, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(f))
            target = _redirected(path, current_rank())
            emit("save", path=path, redirected_to=target, line=user_line(), prefixed_key=prefixed)
            return original_save(obj, target, *args, **kwargs)
        emit("save", path=None, line=user_line(), prefixed_key=prefixed)
        return original_save(obj, f, *args, **kwargs)

    def load(f: Any, *args: Any, **kwargs: Any) -> Any:
        mapped = bool(args) or "map_location" in kwargs
        if isinstance(f, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(f))
            f = _latest_redirect(path) or f
            emit("load", path=path, line=user_line(), map_location=mapped, saved_on=[] if mapped else _saved_devices(original_load, f))
        return original_load(f, *args, **kwargs)

    torch.save, torch.load = save, load


def _module_prefixed_key(obj: Any) -> str | None:
    """A key like `module.weight` when obj is (or holds) a state_dict whose every key has the prefix."""
    from collections.abc import Mapping

    candidates = [obj, *obj.values()] if isinstance(obj, Mapping) else []
    for candidate in candidates:
        if isinstance(candidate, Mapping) and candidate and all(isinstance(k, str) for k in candidate):
            if all(k.startswith("module.") for k in candidate):
                return next(iter(candidate))
    return None


def _saved_devices(original_load: Any, f: Any) -> list[str]:
    """The devices a checkpoint's storages were saved from, read without touching any device."""
    devices: set[str] = set()

    def record(storage: Any, location: str) -> Any:
        devices.add(location)
        return storage

    try:
        original_load(f, map_location=record, weights_only=False)
    except Exception:
        pass  # the real load below reports the real error
    return sorted(devices)


def _patch_state_dict_loading(torch: Any) -> None:
    original = torch.nn.Module.load_state_dict

    def load_state_dict(self: Any, state_dict: Any, strict: bool = True, *args: Any, **kwargs: Any) -> Any:
        result = original(self, state_dict, strict, *args, **kwargs)
        if not strict:
            emit("lenient-load", line=user_line(), missing=len(result.missing_keys), loaded=len(state_dict) - len(result.unexpected_keys),
                 unexpected_prefixed=[k for k in result.unexpected_keys if k.startswith("module.")][:3])
        return result

    torch.nn.Module.load_state_dict = load_state_dict


def _patch_data_loading(torch: Any) -> None:
    from torch.utils.data import DataLoader, DistributedSampler

    original_init, original_iter = DataLoader.__init__, DataLoader.__iter__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._pitfall_lint_line = user_line()

    def iterate(self: Any) -> Any:
        try:
            size = len(self.dataset)
        except TypeError:
            size = None
        emit("loader", line=getattr(self, "_pitfall_lint_line", None), sampler=type(self.sampler).__name__, dataset_size=size)
        sampler = getattr(self.batch_sampler, "sampler", self.sampler)
        if isinstance(sampler, DistributedSampler):
            # The epoch's order is a pure function of (seed, epoch, rank): record it when the epoch starts, since
            # the batch sampler draws from it lazily and the step budget may end the epoch before the first batch.
            indices = list(sampler)
            emit("sampler", sampler=id(sampler), epoch=sampler.epoch, seed=sampler.seed, shuffle=sampler.shuffle,
                 indices=indices[:_SAMPLED_INDICES])
        return original_iter(self)

    DataLoader.__init__, DataLoader.__iter__ = init, iterate


def _hold_ports() -> None:
    """Binds the ports a second job would hold, in the first process only (its children inherit nothing)."""
    for port in filter(None, os.environ.pop(HELD_PORTS, "").split(",")):
        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            holder.bind(("", int(port)))
            holder.listen()
            _held.append(holder)
            emit("port-held", port=int(port))
        except OSError as error:
            emit("port-held", port=int(port), error=str(error))


def _patch_process_group(torch: Any) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    original = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend", args[0] if args else None)
        if backend is not None and "nccl" in str(backend) and os.environ.get(DEVICE) != "cuda":
            emit("backend", requested=str(backend), used="gloo")
            if "backend" in kwargs:
                kwargs["backend"] = "gloo"
            else:
                args = ("gloo", *args[1:])
            kwargs.pop("device_id", None)
        return original(*args, **kwargs)

    dist.init_process_group = init_process_group
    sys.modules["torch.distributed.distributed_c10d"].init_process_group = init_process_group


def _patch_data_parallel(torch: Any) -> None:
    replicas = int(os.environ.get(REPLICAS, "2"))
    gpus = torch.cuda.device_count()
    from pitfall_lint.harness.child.dp_emulation import EmulatedDataParallel, record_scatters

    if os.environ.get(DEVICE) == "cuda" and gpus >= replicas:
        record_scatters(torch.nn.DataParallel)
        emit("device", mode="cuda", gpus=gpus)
        return

    EmulatedDataParallel.replicas = replicas
    torch.nn.DataParallel = EmulatedDataParallel
    torch.nn.parallel.DataParallel = EmulatedDataParallel
    sys.modules["torch.nn.parallel.data_parallel"].DataParallel = EmulatedDataParallel
    emit("device", mode="cpu-emulation", gpus=gpus)


def _patch_step_budget(torch: Any) -> None:
    budget = int(os.environ.get(STEPS, "0"))
    if budget <= 0:
        return
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data import dataloader

    steps = {"done": 0}

    def count(optimizer: Any, args: Any, kwargs: Any) -> None:
        steps["done"] += 1
        if steps["done"] == budget:
            emit("step-budget", steps=budget)

    register_optimizer_step_post_hook(count)
    original_next = dataloader._BaseDataLoaderIter.__next__

    def next_batch(self: Any) -> Any:
        if steps["done"] >= budget:
            raise StopIteration
        return original_next(self)

    dataloader._BaseDataLoaderIter.__next__ = next_batch


def _patch_torch(torch: Any) -> None:
    from pitfall_lint.harness.child import nodes

    _patch_serialization(torch)
    _patch_state_dict_loading(torch)
    _patch_data_loading(torch)
    _patch_process_group(torch)
    collectives.patch(torch)
    ddp.patch(torch)
    _patch_data_parallel(torch)
    observe_wrappers(torch)
    _patch_step_budget(torch)
    nodes.patch(torch)


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Patches torch right after `import torch` finishes, in whichever module imports it first."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            _patch_torch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _excepthook(kind: type[BaseException], error: BaseException, trace: Any) -> None:
    emit_error(error.with_traceback(trace), where="uncaught")
    sys.__excepthook__(kind, error, trace)


def arm() -> None:
    sys.excepthook = _excepthook
    _hold_ports()
    if os.environ.get(SCRIPT):
        LineRecorder(os.environ[SCRIPT]).start()
    if "torch" in sys.modules:
        _patch_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportHook())
