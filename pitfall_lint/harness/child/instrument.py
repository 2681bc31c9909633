"""Patches installed in every child process the moment torch is imported.

- `torch.save` is recorded per rank (caller line, absolute path) and redirected into the scratch
  folder, so the user's tree is never written; `torch.load` of such a path reads the redirected copy.
- `nn.DataParallel` becomes N-way: real devices when there are N, the emulation otherwise.
- `init_process_group` asking for nccl without enough GPUs gets gloo, and says so.
- With fewer GPUs than replicas or ranks, N virtual CUDA devices (child/virtual_cuda.py); under a launcher,
  one per local process of the node.
- A step budget per DataLoader iterator (child/loading.py), so epochs wind down and the code after
  training (checkpoints, above all) still runs.
- Public datasets whose files are absent get synthetic stand-ins (child/stand_ins.py).
- What the probes need is recorded: saved keys, the devices a checkpoint was saved from, lenient
  `load_state_dict` results, what each rank's DataLoader and DistributedSampler yielded, the collectives each
  rank entered (child/collectives.py), DDP replicas' parameters (child/ddp.py), what wrappers did to the model
  (child/wrapper_observers.py), where a launcher put each process and the device it picked (child/nodes.py).
- On request, saves are delayed (to expose a missing barrier) and given ports are held (to expose a
  hard-coded port), as a slower disk or a second job on the machine would.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import sys
import time
import urllib.parse
from typing import Any

from pitfall_lint.harness import isolation
from pitfall_lint.harness.child import collectives, ddp, exits, loading, nodes, stand_ins
from pitfall_lint.harness.child.coverage import LineRecorder
from pitfall_lint.harness.child.events import (
    OVER_ONE_DEVICE,
    SCRATCH,
    SCRIPT,
    current_rank,
    emit,
    emit_error,
    user_place,
)
from pitfall_lint.harness.child.imports import after_import
from pitfall_lint.harness.child.wrapper_observers import observe_wrappers

SAVE_DELAY = "PITFALL_LINT_SAVE_DELAY"  # seconds, for the first saves of each process
HELD_PORTS = "PITFALL_LINT_HOLD_PORTS"  # comma-separated ports the first process binds before the script runs
_DELAYED_SAVES = 2
_held: list[socket.socket] = []
DEVICE = "PITFALL_LINT_DEVICE"  # "cpu" (virtual devices) or "cuda" (real devices, also when unset)
REPLICAS = "PITFALL_LINT_NPROC"


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


def _patch_serialization(torch: Any, virtual: bool) -> None:
    original_save, original_load = torch.save, torch.load
    if virtual:
        from pitfall_lint.harness.child import virtual_cuda

        saving, loading = virtual_cuda.saving, virtual_cuda.load
    else:
        saving, loading = contextlib.nullcontext, lambda load, f, args, kwargs: load(f, *args, **kwargs)

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
            emit("save", path=path, redirected_to=target, **user_place(), prefixed_key=prefixed)
            f = target
        else:
            emit("save", path=None, **user_place(), prefixed_key=prefixed)
        with saving():
            return original_save(obj, f, *args, **kwargs)

    def load(f: Any, *args: Any, **kwargs: Any) -> Any:
        mapped = bool(args) or "map_location" in kwargs
        if isinstance(f, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(f))
            f = _latest_redirect(path) or f
            emit("load", path=path, **user_place(), map_location=mapped, saved_on=[] if mapped else _saved_devices(original_load, f))
        return loading(original_load, f, args, kwargs)

    torch.save, torch.load = save, load


def _patch_saved_file_operations() -> None:
    """Removing, renaming or copying a checkpoint the run saved acts on its redirected copy, as it would on the file:
    a script that keeps only its newest checkpoint (`os.remove(previous)`) or saves atomically (`os.replace(tmp,
    path)`) runs on, and the user's tree is still never touched. A path that exists there is left to the real call."""
    import shutil

    remove, unlink, rename, replace, copyfile = os.remove, os.unlink, os.rename, os.replace, shutil.copyfile

    def saved(path: Any) -> str | None:
        if not isinstance(path, (str, os.PathLike)) or os.path.lexists(path):
            return None
        return _latest_redirect(os.path.abspath(os.fspath(path)))

    def removing(original: Any) -> Any:
        def remove_saved(path: Any, *args: Any, **kwargs: Any) -> None:
            copy = None if args or kwargs else saved(path)  # dir_fd= names a path relative to a folder: the real call
            original(copy or path, *args, **kwargs)

        return remove_saved

    def moving(original: Any) -> Any:
        def move_saved(source: Any, destination: Any, *args: Any, **kwargs: Any) -> None:
            copy = None if args or kwargs else saved(source)
            if copy is None:
                original(source, destination, *args, **kwargs)
            else:
                original(copy, _redirected(os.path.abspath(os.fspath(destination)), current_rank()))

        return move_saved

    def copy_saved(source: Any, destination: Any, *args: Any, **kwargs: Any) -> Any:
        copy = saved(source)
        if copy is None:
            return copyfile(source, destination, *args, **kwargs)
        copyfile(copy, _redirected(os.path.abspath(os.fspath(destination)), current_rank()), *args, **kwargs)
        return destination

    os.remove, os.unlink = removing(remove), removing(unlink)
    os.rename, os.replace = moving(rename), moving(replace)
    shutil.copyfile = copy_saved


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
            emit("lenient-load", **user_place(), missing=len(result.missing_keys), loaded=len(state_dict) - len(result.unexpected_keys),
                 unexpected_prefixed=[k for k in result.unexpected_keys if k.startswith("module.")][:3])
        return result

    torch.nn.Module.load_state_dict = load_state_dict


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


def _own_store_served(init_method: str) -> None:
    """A script started one process per rank by hand (verify gives each its `--rank`) has rank 0 serve its own
    `tcp://` address; under verify's launcher torch before 2.14 made every rank a client of the agent's store whatever
    the address, so nobody served it and the ranks waited (torch 2.14 checks the address, as here)."""
    from pitfall_lint.harness.child.run_script import RANK_OPTIONS

    url = urllib.parse.urlparse(init_method)
    agents = (os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))
    if RANK_OPTIONS in os.environ and url.scheme == "tcp" and (url.hostname, str(url.port)) != agents:
        os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)


def _patch_process_group(torch: Any, virtual: bool) -> None:
    """nccl without enough GPUs becomes gloo; joining the group is recorded, with the rank asked for, to tell a rank
    that waited from one that failed and two processes that joined as one rank (PFL302)."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    c10d = sys.modules["torch.distributed.distributed_c10d"]
    original_init, original_new_group = dist.init_process_group, dist.new_group

    def gloo_for_nccl(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        backend = kwargs.get("backend", args[0] if args else None)
        if virtual and backend is not None and "nccl" in str(backend):
            emit("backend", requested=str(backend), used="gloo")
            if "backend" in kwargs or not args:
                kwargs["backend"] = "gloo"
            else:
                args = ("gloo", *args[1:])
            kwargs.pop("device_id", None)
        return args, kwargs

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = gloo_for_nccl(args, kwargs)
        _own_store_served(str(kwargs.get("init_method", args[1] if len(args) > 1 else "") or ""))
        rank = kwargs.get("rank", args[4] if len(args) > 4 else -1)  # the rank it asks for (-1: from the environment)
        emit("group-joining", **user_place(), world_size=kwargs.get("world_size", os.environ.get("WORLD_SIZE")),
             init_method=str(kwargs.get("init_method") or "env://"), asked_rank=rank if isinstance(rank, int) else -1)
        result = original_init(*args, **kwargs)
        emit("group-joined", world_size=dist.get_world_size())
        return result

    def new_group(*args: Any, **kwargs: Any) -> Any:
        if virtual and "nccl" in str(kwargs.get("backend", "")):
            kwargs["backend"] = "gloo"
        return original_new_group(*args, **kwargs)

    dist.init_process_group = c10d.init_process_group = init_process_group
    dist.new_group = c10d.new_group = new_group


def _patch_data_parallel(torch: Any, virtual: bool) -> None:
    from pitfall_lint.harness.child.dp_emulation import EmulatedDataParallel, over_first_device, record_scatters

    if os.environ.get(OVER_ONE_DEVICE) == "1":
        over_first_device(EmulatedDataParallel if virtual else torch.nn.DataParallel)
    if not virtual:
        record_scatters(torch.nn.DataParallel)
        emit("device", mode="cuda", gpus=torch.cuda.device_count())
        return
    EmulatedDataParallel.replicas = int(os.environ.get(REPLICAS, "2"))
    torch.nn.DataParallel = EmulatedDataParallel
    torch.nn.parallel.DataParallel = EmulatedDataParallel
    sys.modules["torch.nn.parallel.data_parallel"].DataParallel = EmulatedDataParallel

    def data_parallel(module: Any, inputs: Any, device_ids: Any = None, output_device: Any = None, dim: int = 0,
                      module_kwargs: Any = None) -> Any:
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        return EmulatedDataParallel(module, device_ids, output_device, dim)(*inputs, **(module_kwargs or {}))

    torch.nn.parallel.data_parallel = data_parallel
    sys.modules["torch.nn.parallel.data_parallel"].data_parallel = data_parallel
    emit("device", mode="cpu-emulation")


def _patch_torch(torch: Any) -> None:
    virtual = os.environ.get(DEVICE) == "cpu"  # set by verify only: a real multi-node launch keeps its GPUs
    if virtual:
        from pitfall_lint.harness.child import virtual_cuda

        devices = _devices_per_node()
        virtual_cuda.install(torch, devices)
        emit("virtual-devices", count=devices)
    _patch_serialization(torch, virtual)
    _patch_saved_file_operations()
    _patch_state_dict_loading(torch)
    loading.patch_data_loading(torch)
    _patch_process_group(torch, virtual)
    collectives.patch(torch)
    ddp.patch(torch)
    _patch_data_parallel(torch, virtual)
    observe_wrappers(torch)
    loading.patch_step_budget(torch)
    nodes.patch(torch)


def _devices_per_node() -> int:
    """A launcher's node has one GPU per local process, as `--nproc-per-node` is sized on a GPU node (two nodes of
    one rank each have one device each); a process started alone has one per replica."""
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(local) if local.isdigit() and int(local) > 0 else int(os.environ.get(REPLICAS, "2"))


def _watch_worker_processes() -> None:
    """multiprocessing prints a worker's exception and exits 1: record it first, with its frames."""
    from multiprocessing import process

    original = process.BaseProcess.run

    def run(self: Any) -> None:
        try:
            original(self)
        except Exception as error:  # sys.exit in a worker is its own choice, not a failure
            emit_error(error, where="process")
            raise

    process.BaseProcess.run = run  # type: ignore[method-assign]


def _excepthook(kind: type[BaseException], error: BaseException, trace: Any) -> None:
    emit_error(error.with_traceback(trace), where="uncaught")
    sys.__excepthook__(kind, error, trace)


def arm() -> None:
    isolation.die_with_parent(signal.SIGKILL)  # where no PID namespace holds the run: each process follows its parent
    sys.excepthook = _excepthook
    exits.watch()
    _watch_worker_processes()
    _hold_ports()
    if os.environ.get(SCRIPT):
        LineRecorder().start()
    stand_ins.install()
    after_import("torch", _patch_torch)
