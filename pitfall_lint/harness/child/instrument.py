"""Patches installed in every child process the moment torch is imported.

- `torch.save` is recorded per rank (caller line, absolute path) and redirected into the scratch
  folder, so the user's tree is never written; `torch.load` of such a path reads the redirected copy.
- `nn.DataParallel` becomes N-way: real devices when there are N, the emulation otherwise.
- `init_process_group` asking for nccl without enough GPUs gets gloo, and says so.
- After K optimizer steps, DataLoader iteration ends on that rank, so epochs wind down and the
  code after training (checkpoints, above all) still runs.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
import traceback
from typing import Any

from pitfall_lint.harness.child.events import current_rank, emit, emit_error, user_script

SCRATCH = "PITFALL_LINT_SCRATCH"
DEVICE = "PITFALL_LINT_DEVICE"  # "cpu" (emulate) or "cuda" (real devices)
REPLICAS = "PITFALL_LINT_NPROC"
STEPS = "PITFALL_LINT_STEPS"


def _caller_line() -> int | None:
    script = user_script()
    for frame in reversed(traceback.extract_stack()):
        if os.path.realpath(frame.filename) == script:
            return frame.lineno
    return None


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

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(f))
            target = _redirected(path, current_rank())
            emit("save", path=path, redirected_to=target, line=_caller_line())
            return original_save(obj, target, *args, **kwargs)
        emit("save", path=None, line=_caller_line())
        return original_save(obj, f, *args, **kwargs)

    def load(f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, os.PathLike)):
            redirect = _latest_redirect(os.path.abspath(os.fspath(f)))
            if redirect is not None:
                f = redirect
        return original_load(f, *args, **kwargs)

    torch.save, torch.load = save, load


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
    if os.environ.get(DEVICE) == "cuda" and gpus >= replicas:
        emit("device", mode="cuda", gpus=gpus)
        return
    from pitfall_lint.harness.child.dp_emulation import EmulatedDataParallel

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
    _patch_serialization(torch)
    _patch_process_group(torch)
    _patch_data_parallel(torch)
    _patch_step_budget(torch)


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
    if "torch" in sys.modules:
        _patch_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportHook())
