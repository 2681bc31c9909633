"""nn.DataParallel made N-way without N GPUs, by running torch's own DataParallel code.

Only the communication primitives that need CUDA are swapped, for the length of one forward:
`Scatter` (torch's comm.cpp chunks the batch with `tensor.chunk`), `Gather` (the same size check
and message as comm.cpp), and the parameter broadcast (replica 0 shares storage with the
original, as on device 0; the others get differentiable copies). torch's `replicate()` itself —
the shallow `__dict__` copy at the root of PFL101 — `scatter_kwargs` and `gather_map` run as they
are. Replicas run in threads, as in `parallel_apply`. So that a replica computing with another
device's tensors fails as loudly as across real GPUs, replica j >= 1 runs under a TorchFunctionMode
that raises when it touches storage owned by the original module (device 0).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
import warnings
from collections.abc import Iterator
from itertools import chain
from typing import Any

import torch
import torch.nn as nn
import torch.nn.parallel  # noqa: F401  (loads the submodules looked up below)
from torch._subclasses.fake_tensor import is_fake
from torch._utils import ExceptionWrapper, _get_device_index
from torch.autograd import Function
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from pitfall_lint.harness.child.events import emit, user_place

EMULATION_TAG = "[pitfall-lint DataParallel emulation"
_replicate_module = sys.modules["torch.nn.parallel.replicate"]
_scatter_gather_module = sys.modules["torch.nn.parallel.scatter_gather"]
_patch_lock = threading.RLock()


class _Placement:
    """Where the emulated communication puts its tensors: virtual CUDA devices, or the CPU for a CPU module."""

    virtual = False


_placement = _Placement()


def _on(tensor: torch.Tensor, device: int) -> torch.Tensor:
    if not _placement.virtual:
        return tensor.clone()  # the real scatter copies to each device
    from pitfall_lint.harness.child import virtual_cuda

    return virtual_cuda._relocate(tensor, torch.device("cuda", device))


class _Scatter(Function):
    @staticmethod
    def forward(ctx: Any, target_gpus: list[int], chunk_sizes: Any, dim: int, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.dim = dim
        ctx.source, ctx.virtual = tensor.device, _placement.virtual
        chunks = tensor.chunk(len(target_gpus), dim) if chunk_sizes is None else tensor.split(list(chunk_sizes), dim)
        return tuple(_on(chunk, device) for chunk, device in zip(chunks, target_gpus))

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[Any, ...]:
        return (None, None, None, torch.cat([_back(g, ctx.source, ctx.virtual) for g in grads], ctx.dim))


def _back(tensor: torch.Tensor, device: torch.device, virtual: bool) -> torch.Tensor:
    if not virtual:
        return tensor
    from pitfall_lint.harness.child import virtual_cuda

    return virtual_cuda._relocate(tensor, device)


class _Gather(Function):
    @staticmethod
    def forward(ctx: Any, target_device: Any, dim: int, *inputs: torch.Tensor) -> torch.Tensor:
        ctx.dim = dim
        ctx.sources, ctx.virtual = [t.device for t in inputs], _placement.virtual
        ctx.unsqueezed = all(t.dim() == 0 for t in inputs) and dim == 0
        if ctx.unsqueezed:  # as torch's Gather.forward does
            inputs = tuple(t.view(1) for t in inputs)
            warnings.warn(
                "Was asked to gather along dimension 0, but all input tensors were scalars; "
                "will instead unsqueeze and return a vector.",
                stacklevel=2,
            )
        shapes = [list(t.shape) for t in inputs]
        emit("gather", shapes=shapes, dim=dim)
        for shape in shapes:  # the check and message of torch/csrc/cuda/comm.cpp gather()
            expected = list(shapes[0])
            expected[dim] = shape[dim]
            if shape != expected:
                raise RuntimeError(f"Gather got an input of invalid size: got {shape}, but expected {expected}")
        ctx.sizes = [t.size(dim) for t in inputs]
        if _placement.virtual:
            target = torch.device("cpu") if target_device == -1 else torch.device("cuda", target_device)
            inputs = tuple(_back(t, target, True) for t in inputs)
        return torch.cat(inputs, dim)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        grads = grad.split(ctx.sizes, ctx.dim)
        if ctx.unsqueezed:
            grads = tuple(g[0] for g in grads)
        return (None, None, *(_back(g, source, ctx.virtual) for g, source in zip(grads, ctx.sources)))


def _broadcast_coalesced_reshape(tensors: list[torch.Tensor], devices: list[Any], detach: bool = False) -> list[list[torch.Tensor]]:
    """Replica 0 shares storage with the original (device 0); the others get copies on their devices."""
    copies = []
    for index, device in enumerate(devices):
        if index == 0:
            copies.append([t if detach else t.view_as(t) for t in tensors])
        elif not _placement.virtual:
            copies.append([t.detach().clone() if detach else t.clone() for t in tensors])
        else:
            from pitfall_lint.harness.child import virtual_cuda

            target = torch.device("cuda", device)
            copies.append([virtual_cuda._relocate(t.detach(), target) if detach else virtual_cuda._to_target(t, target, copy=True) for t in tensors])
    return copies


@contextlib.contextmanager
def _communication_swapped(virtual: bool) -> Iterator[None]:
    with _patch_lock:
        saved = (_scatter_gather_module.Scatter, _scatter_gather_module.Gather, _replicate_module._broadcast_coalesced_reshape)
        _scatter_gather_module.Scatter, _scatter_gather_module.Gather = _Scatter, _Gather
        _replicate_module._broadcast_coalesced_reshape = _broadcast_coalesced_reshape
        _placement.virtual = virtual
        try:
            yield
        finally:
            (_scatter_gather_module.Scatter, _scatter_gather_module.Gather, _replicate_module._broadcast_coalesced_reshape) = saved
            _placement.virtual = False


class _OriginalDeviceGuard(TorchFunctionMode):
    """Replica j >= 1 sits on "device j"; the original module's tensors sit on device 0."""

    # Questions about a tensor, not computations on it: they work across devices (torch.compile asks them of the
    # original's parameters while it traces a replica's forward).
    _SHAPE_ONLY = frozenset({"size", "dim", "shape", "dtype", "device", "requires_grad", "is_cuda", "numel", "ndim",
                             "layout", "is_sparse", "__len__", "stride", "is_floating_point", "names", "data_ptr",
                             "nbytes", "itemsize", "element_size", "storage_offset", "is_contiguous", "is_leaf",
                             "untyped_storage", "is_inference", "is_nested", "is_quantized", "is_complex"})

    def __init__(self, owners: dict[int, str], replica: int) -> None:
        super().__init__()
        self.owners = owners
        self.replica = replica

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "__get__":
            name = getattr(getattr(func, "__self__", None), "__name__", name)
        if name not in self._SHAPE_ONLY:
            for value in tree_flatten((args, kwargs))[0]:
                # While torch.compile traces a replica's forward its tensors are fakes, which own no memory to compare.
                if isinstance(value, torch.Tensor) and not value.is_meta and not is_fake(value):
                    owner = self.owners.get(value.untyped_storage().data_ptr())
                    if owner is not None:
                        raise RuntimeError(
                            "Expected all tensors to be on the same device, but found at least two devices, "
                            f"cuda:{self.replica} and cuda:0! {EMULATION_TAG}: replica {self.replica} called "
                            f"{name}() on '{owner}', a tensor of the original module]"
                        )
        return func(*args, **kwargs)


def _bound_to_originals(replica: nn.Module, originals: dict[int, type]) -> list[dict[str, str]]:
    """Callables in a replica's `__dict__` that are still bound to (or close over) an original module."""
    found = []
    for prefix, module in replica.named_modules():
        for attribute, value in vars(module).items():
            target = value.func if isinstance(value, functools.partial) else value
            owner = getattr(target, "__self__", None) if inspect.ismethod(target) else None
            if owner is None and inspect.isfunction(target) and target.__closure__:
                owner = next((v for v in map(_cell, target.__closure__) if id(v) in originals), None)
            if owner is not None and id(owner) in originals:
                found.append({
                    "attribute": f"{prefix}.{attribute}" if prefix else attribute,
                    "callable": getattr(target, "__name__", type(target).__name__),
                    "module": originals[id(owner)].__name__,
                    **({"made_at": _made_at(target)} if inspect.isfunction(target) else {}),
                })
    return found


def _made_at(function: Any) -> dict[str, Any]:
    """Where a function (a lambda, a closure) was written: the line to fix, which a method would not need."""
    return {"file": function.__code__.co_filename, "line": function.__code__.co_firstlineno}


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def emit_scatter(data_parallel: nn.DataParallel, chunks: Any) -> None:
    """How the batch was split (PFL110): chunk sizes along the scatter dimension, and whether BatchNorm trains."""
    dim = data_parallel.dim
    sizes = [next((t.size(dim) for t in tree_flatten(c)[0] if isinstance(t, torch.Tensor) and t.dim() > dim), None) for c in chunks]
    batch_norm = any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training for m in data_parallel.module.modules())
    emit("scatter", replicas=len(data_parallel.device_ids), chunks=sizes, **user_place(), batch_norm=batch_norm)


def record_scatters(data_parallel_class: type[nn.DataParallel]) -> None:
    """On real devices, torch's own DataParallel reports its splits the same way."""
    original = data_parallel_class.scatter

    def scatter(self: nn.DataParallel, inputs: Any, kwargs: Any, device_ids: Any) -> Any:
        chunks, chunk_kwargs = original(self, inputs, kwargs, device_ids)
        emit_scatter(self, chunks)
        return chunks, chunk_kwargs

    data_parallel_class.scatter = scatter  # type: ignore[method-assign]


def over_first_device(data_parallel_class: type[nn.DataParallel]) -> None:
    """The control run's DataParallel: over the first of the devices the script lists (`device_ids=[0, 1, 2, 3]`),
    where torch's DataParallel calls the module itself, as on a machine of one GPU."""
    original = data_parallel_class.__init__

    def __init__(self: nn.DataParallel, module: nn.Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0) -> None:
        first = list(device_ids)[:1] if device_ids is not None else None
        original(self, module, first, first[0] if first else output_device, dim)

    data_parallel_class.__init__ = __init__  # type: ignore[method-assign]


class EmulatedDataParallel(nn.DataParallel):
    """Stands in for nn.DataParallel when there are fewer than N CUDA devices.

    A module on the virtual CUDA devices runs as on real ones (torch's device checks included); a module left on
    the CPU runs as if the CPU were device 0, so that a script written without GPUs can still be run N-way.
    """

    replicas = 2

    def __init__(self, module: nn.Module, device_ids: Any = None, output_device: Any = None, dim: int = 0) -> None:
        nn.Module.__init__(self)
        self.module = module
        self.dim = dim
        ids = list(range(self.replicas)) if device_ids is None else [_get_device_index(d, True) for d in device_ids]
        self.device_ids = ids
        self.output_device = ids[0] if output_device is None else _get_device_index(output_device, True)
        self.src_device_obj = torch.device("cuda", ids[0])
        if len(ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        first = next(chain(self.module.parameters(), self.module.buffers()), None)
        virtual = first is not None and first.device.type == "cuda"
        if not virtual:
            self.src_device_obj = first.device if first is not None else torch.device("cpu")
        with _communication_swapped(virtual):
            return super().forward(*inputs, **kwargs)  # torch's own DataParallel.forward

    def scatter(self, inputs: Any, kwargs: Any, device_ids: Any) -> Any:
        chunks, chunk_kwargs = super().scatter(inputs, kwargs, device_ids)
        emit_scatter(self, chunks)
        return chunks, chunk_kwargs

    def parallel_apply(self, replicas: Any, inputs: Any, kwargs: Any) -> list[Any]:
        originals = {id(m): type(m) for m in self.module.modules()}
        owners = {
            t.untyped_storage().data_ptr(): name
            for name, t in chain(self.module.named_parameters(), self.module.named_buffers())
            if t.numel()
        }
        emit("data-parallel", replicas=len(replicas), mode="emulated",
             bound=[dict(b, replica=j) for j, r in enumerate(replicas) if j for b in _bound_to_originals(r, originals)])
        results: list[Any] = [None] * len(replicas)
        grad_enabled = torch.is_grad_enabled()

        virtual = _placement.virtual

        def run(index: int, replica: nn.Module, args: Any, options: Any) -> None:
            torch.set_grad_enabled(grad_enabled)
            # On virtual devices torch's own device check catches a replica computing with the original's tensors.
            guard = _OriginalDeviceGuard(owners, index) if index and not virtual else contextlib.nullcontext()
            try:
                if virtual:
                    torch.cuda.set_device(self.device_ids[index])
                with guard:
                    args = args if isinstance(args, (list, tuple)) else (args,)
                    results[index] = replica(*args, **options)
            except Exception:
                results[index] = ExceptionWrapper(where=f"in replica {index} on device {index}")

        threads = [threading.Thread(target=run, args=work) for work in zip(range(len(replicas)), replicas, inputs, kwargs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for result in results:
            if isinstance(result, ExceptionWrapper):
                result.reraise()
        return results


# Messages name the class as torch's own does: "'DataParallel' object has no attribute 'freeze_trunk'".
EmulatedDataParallel.__name__ = EmulatedDataParallel.__qualname__ = "DataParallel"
