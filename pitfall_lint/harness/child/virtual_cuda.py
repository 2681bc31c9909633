"""N virtual CUDA devices on a machine with fewer GPUs: CUDA tensors that are CPU tensors underneath.

A `VirtualTensor` wraps a CPU tensor and carries the CUDA device it would live on (`cuda:1`). Every
aten operation on it reaches `__torch_dispatch__`, which unwraps, runs the CPU kernel and rewraps the
results on the operation's device, after the check PyTorch makes on real devices: tensors of two
different CUDA devices in one operation raise "Expected all tensors to be on the same device". To the
C++ side (autograd, the distributed backends, DDP's reducer) the wrapper is a CPU tensor, so all of
them run; to Python (`.device`, `.is_cuda`, `repr`) it is a CUDA tensor.

Tensors become virtual where a program asks for CUDA: `.cuda()`, `.to("cuda:1")`, `.to(rank)`,
`device=` arguments of factories and modules (a TorchFunctionMode in every thread), and `torch.load`
of a checkpoint saved from CUDA. `torch.cuda` and `torch.accelerator` answer as a node of N GPUs would:
`is_available()`, `device_count()`, `set_device`, `current_device`, properties, memory queries,
streams, events, synchronisation. A plain CPU tensor mixed with a virtual one is allowed, as CPU
scalars are on real devices: composite operations allocate plain tensors internally, so telling a
user's forgotten `.to(device)` from those is not possible here.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from pitfall_lint.harness.child.events import VerifyLimit

_CPU = torch.device("cpu")
_RealDevice = torch.device
_TENSOR_TO, _TENSOR_CUDA, _AS_TENSOR = torch.Tensor.to, torch.Tensor.cuda, torch.as_tensor
_state = threading.local()
_count = {"devices": 0}
_NAME = "pitfall-lint virtual CUDA device (CPU)"
_MEMORY = 80 * 1024**3


class NotEmulated(VerifyLimit, NotImplementedError):
    """What the virtual devices do not emulate: verify's limit, still a NotImplementedError (a RuntimeError) to the
    code that meets it."""


def device_count() -> int:
    return _count["devices"]


def current_device() -> int:
    return getattr(_state, "device", 0)


def _check_index(index: int) -> int:
    if not 0 <= index < _count["devices"]:
        raise RuntimeError(
            "CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously reported at some other API "
            f"call, so the stacktrace below might be incorrect. [pitfall-lint: {_count['devices']} virtual devices, "
            f"asked for {index}]"
        )
    return index


def set_device(device: Any) -> None:
    index = _index_of(device)
    if index >= 0:
        _state.device = _check_index(index)


def _index_of(device: Any) -> int:
    """An index as torch.cuda's functions take it: int, "cuda:1", torch.device or None (the current one)."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = _RealDevice(device) if isinstance(device, str) else device
    if isinstance(device, _RealDevice):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return current_device() if device.index is None else device.index
    raise ValueError(f"Expected a cuda device, but got: {device!r}")


def _cuda_target(device: Any) -> _RealDevice | None:
    """The virtual device a `device=` argument names, or None when it names no CUDA device."""
    if isinstance(device, int) and not isinstance(device, bool):
        return _RealDevice("cuda", _check_index(device))
    if isinstance(device, str):
        device = _RealDevice(device)
    if isinstance(device, _RealDevice) and device.type == "cuda":
        return _RealDevice("cuda", _check_index(current_device() if device.index is None else device.index))
    return None


def device_of(tensor: torch.Tensor) -> _RealDevice:
    return tensor._virtual if isinstance(tensor, VirtualTensor) else tensor.device


# --- the tensor ---------------------------------------------------------------------------------------------------


class VirtualTensor(torch.Tensor):
    _inner: torch.Tensor
    _virtual: _RealDevice

    @staticmethod
    def __new__(cls, inner: torch.Tensor, device: _RealDevice) -> VirtualTensor:
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls, inner.size(), strides=inner.stride(), storage_offset=inner.storage_offset(), dtype=inner.dtype,
            layout=inner.layout, device=inner.device, requires_grad=inner.requires_grad,
        )
        wrapper._inner = inner
        wrapper._virtual = device
        return wrapper

    def __init__(self, inner: torch.Tensor, device: _RealDevice) -> None:
        super().__init__()

    # The C++ side sees a CPU tensor; Python sees the CUDA device.
    @property
    def device(self) -> _RealDevice:  # type: ignore[override]
        return self._virtual

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True

    @property
    def is_cpu(self) -> bool:  # type: ignore[override]
        return False

    def get_device(self) -> int:  # type: ignore[override]
        return int(self._virtual.index)

    # Module._apply swaps parameters of this class in place (torch.utils.swap_tensors), so an optimizer built before
    # `model.cuda()` keeps its parameters, as set_data keeps them on real devices.
    def __tensor_flatten__(self) -> tuple[list[str], _RealDevice]:
        return ["_inner"], self._virtual

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, torch.Tensor], device: _RealDevice, size: Any, stride: Any) -> VirtualTensor:
        return VirtualTensor(inner["_inner"], device)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        method = _TENSOR_METHODS.get(func)
        if method is not None:
            return method(*args, **kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            result = func(*args, **kwargs)
        if func in _ALLOCATED_ON_THE_CPU:
            return _on_the_inputs_device(result, _ALLOCATED_ON_THE_CPU[func], args)
        return result

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        device = _common_device(func, args, kwargs)
        if "device" in kwargs and kwargs["device"] is not None:  # an explicit device: a factory-like operation
            device = _cuda_target(kwargs["device"])
            kwargs = {**kwargs, "device": _CPU} if device is not None else kwargs
        result = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        return _rewrap(func, args, kwargs, result, device)


def _unwrap(value: Any) -> Any:
    return value._inner if isinstance(value, VirtualTensor) else value


_CROSS_DEVICE = frozenset({"copy_", "_to_copy", "_foreach_copy_", "to", "set_", "_copy_from", "_copy_from_and_resize"})


def _common_device(func: Any, args: Any, kwargs: Any) -> _RealDevice | None:
    found: _RealDevice | None = None
    for value in tree_flatten((args, kwargs))[0]:
        if isinstance(value, VirtualTensor):
            if found is None:
                found = value._virtual
            elif value._virtual != found and func._schema.name.split("::")[-1] not in _CROSS_DEVICE:
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found at least two devices, {found} and "
                    f"{value._virtual}!"
                )
    return found


# Composite operations that make their result in C++ from the options of the wrapper, whose device is the CPU, and
# copy the inputs into it: the result belongs on the inputs' device, as on real devices (function -> the index of
# that result in a returned tuple, None when the result is the tensor itself).
_ALLOCATED_ON_THE_CPU: dict[Any, int | None] = {torch._VF._pad_packed_sequence: 0, torch._C._nn.pad_sequence: None}


def _on_the_inputs_device(result: Any, index: int | None, args: Any) -> Any:
    device = next((v._virtual for v in tree_flatten(args)[0] if isinstance(v, VirtualTensor)), None)
    made = result if index is None else result[index]
    if device is None or type(made) is not torch.Tensor:
        return result
    placed = _to_target(made, device)
    return placed if index is None else type(result)((*result[:index], placed, *result[index + 1:]))


# Outputs that stay on the CPU on real devices too: (operation, output index).
_HOST_OUTPUTS = frozenset({("_pack_padded_sequence", 1)})


def _rewrap(func: Any, args: Any, kwargs: Any, result: Any, device: _RealDevice | None) -> Any:
    name = func._schema.name.split("::")[-1]
    written = _written_arguments(func, args, kwargs)
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    rewrapped = []
    for index, output in enumerate(outputs):
        if index in written:
            rewrapped.append(written[index])
        elif device is not None and (name, index) not in _HOST_OUTPUTS:
            rewrapped.append(tree_map(lambda t: VirtualTensor(t, device) if type(t) is torch.Tensor else t, output))
        else:
            rewrapped.append(output)
    if isinstance(result, (tuple, list)):
        return type(result)(rewrapped)
    return rewrapped[0]


def _written_arguments(func: Any, args: Any, kwargs: Any) -> dict[int, Any]:
    """In-place and out= operations return the very tensors they were given (output index -> argument)."""
    schema = func._schema
    written = {}
    for index, returned in enumerate(schema.returns):
        alias = returned.alias_info
        if alias is None or not alias.is_write:
            continue
        for position, argument in enumerate(schema.arguments):
            if argument.alias_info is not None and argument.alias_info.before_set == alias.before_set:
                value = kwargs[argument.name] if argument.name in kwargs else args[position] if position < len(args) else None
                if value is not None:
                    written[index] = value
                break
    return written


# --- moving between devices, differentiably ------------------------------------------------------------------------


class _Move(torch.autograd.Function):
    """A copy onto another (virtual or CPU) device; the gradient goes back to the source device."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, target: _RealDevice) -> torch.Tensor:  # type: ignore[override]
        ctx.source = device_of(tensor)
        return _relocate(tensor, target)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return _relocate(grad, ctx.source), None


def _relocate(tensor: torch.Tensor, target: _RealDevice) -> torch.Tensor:
    copied = _unwrap(tensor).clone()
    if target.type != "cuda":
        return copied
    _used()
    return VirtualTensor(copied, target)


def _used() -> None:
    """The first tensor placed on a virtual device, said once per process."""
    if not _count.get("used"):
        _count["used"] = 1
        from pitfall_lint.harness.child.events import emit

        emit("virtual-device-used")


def _to_target(tensor: torch.Tensor, target: _RealDevice, copy: bool = False) -> torch.Tensor:
    if (device_of(tensor) == target and not copy) or _kept_on_the_cpu(tensor):
        return tensor
    if torch.is_grad_enabled() and tensor.requires_grad:
        return _Move.apply(tensor, target)
    return _relocate(tensor, target)


def _parse_to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, torch.dtype | None, bool, Any]:
    """`Tensor.to`'s three signatures: (device, dtype, ...), (dtype, ...), (other tensor, ...)."""
    rest = list(args)
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    if rest and isinstance(rest[0], torch.Tensor):
        other = rest.pop(0)
        device, dtype = device_of(other), other.dtype
    elif rest and isinstance(rest[0], torch.dtype):
        dtype = rest.pop(0)
    elif rest:
        device = rest.pop(0)
        if rest and isinstance(rest[0], torch.dtype):
            dtype = rest.pop(0)
    names = ["non_blocking", "copy", "memory_format"]
    options = dict(zip(names, rest))
    options.update({k: v for k, v in kwargs.items() if k in names})
    return device, dtype, bool(options.get("copy", False)), options.get("memory_format")


def _to(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    device, dtype, copy, memory_format = _parse_to(args, kwargs)
    target = _cuda_target(device)
    if target is None and device is not None and _RealDevice(device).type != "cpu":
        with torch._C.DisableTorchFunctionSubclass():
            return _TENSOR_TO(tensor, *args, **kwargs)  # another device type: torch's own answer
    converted = tensor
    if dtype is not None or memory_format is not None:
        options = {k: v for k, v in (("dtype", dtype), ("memory_format", memory_format)) if v is not None}
        with torch._C.DisableTorchFunctionSubclass():
            converted = _TENSOR_TO(tensor, **options, copy=copy)
        copy = copy and converted is tensor
    if target is not None:
        return _to_target(converted, target, copy)
    if device is not None:  # the CPU
        return _to_target(converted, _CPU, copy)
    return converted


def _cuda(tensor: torch.Tensor, device: Any = None, non_blocking: bool = False, memory_format: Any = None) -> torch.Tensor:
    target = _cuda_target(_RealDevice("cuda", _index_of(device)))
    assert target is not None
    moved = _to_target(tensor, target)
    return moved if memory_format is None else _to(moved, memory_format=memory_format)


def _cpu(tensor: torch.Tensor, memory_format: Any = None) -> torch.Tensor:
    moved = _to_target(tensor, _CPU)
    return moved if memory_format is None else moved.contiguous(memory_format=memory_format)


def _numpy(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(
        f"can't convert {device_of(tensor)} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
        "memory first."
    )


def _repr(tensor: VirtualTensor, *args: Any, **kwargs: Any) -> str:
    text = repr(tensor._inner)
    suffix = f", device='{tensor._virtual}'"
    if tensor.grad_fn is not None:
        suffix += f", grad_fn=<{type(tensor.grad_fn).__name__}>"
    elif tensor.requires_grad:
        suffix += ", requires_grad=True"
    return text[:-1] + suffix + ")" if text.endswith(")") else text


_SAVING: dict[int, str] = {}  # storage data_ptr -> "cuda:i", filled while torch.save pickles virtual tensors


def _reduce_ex(tensor: VirtualTensor, protocol: int) -> Any:
    """Pickled as the CPU tensor it holds, its storage tagged with the CUDA device (see `_tag_storage`)."""
    inner = tensor._inner.detach()
    _SAVING[inner.untyped_storage().data_ptr()] = str(tensor._virtual)
    reduced = torch.nn.Parameter(inner, tensor.requires_grad) if isinstance(tensor, torch.nn.Parameter) else inner
    return reduced.__reduce_ex__(protocol)


def _deepcopy(tensor: VirtualTensor, memo: dict[int, Any]) -> VirtualTensor:
    if id(tensor) in memo:
        return memo[id(tensor)]
    copied = VirtualTensor(tensor._inner.detach().clone(), tensor._virtual)
    copied.requires_grad_(tensor.requires_grad)
    if isinstance(tensor, torch.nn.Parameter):
        copied._is_param = True  # type: ignore[attr-defined]
    memo[id(tensor)] = copied
    return copied


_DATA = torch._C.TensorBase.data


def _rebind(tensor: VirtualTensor, inner: torch.Tensor, device: _RealDevice) -> None:
    """The wrapper takes the shape, strides and dtype of its new CPU tensor, as a real tensor takes its new data's."""
    if (inner.shape, inner.stride(), inner.storage_offset(), inner.dtype) != (
            tensor.shape, tensor.stride(), tensor.storage_offset(), tensor.dtype):
        with torch._C.DisableTorchFunctionSubclass():
            _DATA.__set__(tensor, VirtualTensor(inner, device))
    tensor._inner, tensor._virtual = inner, device


def _get_data(tensor: torch.Tensor) -> torch.Tensor:
    return _DATA.__get__(tensor)


def _set_data(tensor: torch.Tensor, data: torch.Tensor) -> None:
    """`param.data = ...` (FSDP's way of moving and sharding parameters). torch's own setter would give a CPU tensor
    the storage-less wrapper of a virtual one, which crashes the first kernel that reads it (SIGSEGV); a virtual one
    would keep its old shape over a resized CPU tensor."""
    if isinstance(tensor, VirtualTensor):
        _rebind(tensor, _unwrap(data).detach(), device_of(data) if isinstance(data, VirtualTensor) else tensor._virtual)
    elif isinstance(data, VirtualTensor):
        _become_virtual(tensor, data)
    else:
        _DATA.__set__(tensor, data)


def _become_virtual(tensor: torch.Tensor, data: VirtualTensor) -> None:
    """A plain tensor given virtual data becomes a VirtualTensor in place: the same object, its attributes kept."""
    replacement = VirtualTensor(data._inner.detach(), data._virtual)
    replacement.requires_grad_(tensor.requires_grad)
    replacement.__dict__.update(tensor.__dict__)
    if isinstance(tensor, torch.nn.Parameter):
        replacement._is_param = True  # type: ignore[attr-defined]
    try:
        torch.utils.swap_tensors(tensor, replacement)
    except RuntimeError as refused:  # another tensor or a weak reference holds it
        raise NotEmulated(
            f"pitfall-lint virtual devices: `.data = ` cannot move this tensor onto a virtual device ({refused})"
        ) from None


_TENSOR_SET = torch.Tensor.set_


def _set_storage(tensor: torch.Tensor, source: Any = None, *args: Any, **kwargs: Any) -> torch.Tensor:
    """`Tensor.set_` reaches no override before the CPU kernel, which would resize the CPU tensor under a wrapper of
    the old shape (FSDP swaps a flat parameter between its shard and the gathered whole this way)."""
    if isinstance(tensor, VirtualTensor) and isinstance(source, VirtualTensor) and not args and not kwargs:
        tensor._inner.set_(source._inner)
        _rebind(tensor, tensor._inner, source._virtual)
        return tensor
    return _TENSOR_SET(tensor, *(() if source is None else (source,)), *args, **kwargs)


def _with_device(method: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """`new_zeros` and friends make their tensor on self's device unless told otherwise."""

    def creating(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if isinstance(tensor, VirtualTensor):
            kwargs.setdefault("device", tensor._virtual)
        target = _cuda_target(kwargs["device"]) if kwargs.get("device") is not None else None
        if target is None:
            return method(tensor, *args, **kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            made = method(_unwrap(tensor), *args, **{**kwargs, "device": _CPU})
        return _placed(made, target)

    return creating


# Called on virtual tensors only: `to`, `cuda` and `new_*` are patched on torch.Tensor itself (see install).
_TENSOR_METHODS: dict[Any, Callable[..., Any]] = {
    _TENSOR_TO: _to,  # torch's own methods, where a caller reaches them directly
    _TENSOR_CUDA: _cuda,
    torch.Tensor.cpu: _cpu,
    torch.Tensor.numpy: _numpy,
    torch.Tensor.__array__: _numpy,
    torch.Tensor.tolist: lambda t: t._inner.tolist(),
    torch.Tensor.__repr__: _repr,
    torch.Tensor.__format__: lambda t, spec: t._inner.__format__(spec),
    torch.Tensor.__reduce_ex__: _reduce_ex,
    torch.Tensor.__deepcopy__: _deepcopy,
    torch.Tensor.data_ptr: lambda t: t._inner.data_ptr(),
    torch.Tensor.untyped_storage: lambda t: t._inner.untyped_storage(),
    torch.Tensor.pin_memory: lambda t, *a, **k: t,
    torch.Tensor.is_pinned: lambda t, *a, **k: False,
    torch.Tensor.share_memory_: lambda t: t,
}
_TENSOR_RECORD_STREAM = torch.Tensor.record_stream


def _record_stream(tensor: torch.Tensor, stream: Any) -> None:
    """Nothing to record where streams order nothing; torch's argument parser would refuse a virtual stream before any
    override could see it ("unknown parameter type"), so the method itself is replaced."""
    if type(tensor) is not VirtualTensor and not isinstance(stream, _Stream):
        _TENSOR_RECORD_STREAM(tensor, stream)


_NEW = ("new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "new_empty_strided")


def _kept_on_the_cpu(tensor: torch.Tensor) -> bool:
    """A DTensor (FSDP2's sharded parameters, tensor parallelism) keeps its shards on the CPU, which stands for its
    CUDA device: its wrapper takes the device of its shards, so over virtual ones it would be a CUDA tensor to torch's
    C++ side, which a machine without a GPU cannot run."""
    if type(tensor).__name__ != "DTensor":
        return False
    if not _count.get("dtensor"):
        _count["dtensor"] = 1
        from pitfall_lint.harness.child.events import emit

        emit("dtensor-on-the-cpu")
    return True


def _placed(result: Any, target: _RealDevice | None) -> Any:
    """A freshly made CPU result on the virtual device, a leaf as it was (requires_grad kept)."""
    if target is None:
        return result
    _used()

    def place(value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or isinstance(value, VirtualTensor) or _kept_on_the_cpu(value):
            return value
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise NotEmulated(
                f"{type(value).__name__} is not emulated on the virtual devices: run verify on a machine with N GPUs"
            )
        placed = VirtualTensor(value.detach(), target)
        if isinstance(value, torch.nn.Parameter):
            return torch.nn.Parameter(placed, value.requires_grad)
        return placed.requires_grad_() if value.requires_grad else placed

    return tree_map(place, result)


# --- plain tensors asking for CUDA ---------------------------------------------------------------------------------


def _as_tensor(data: Any, dtype: Any = None, device: Any = None) -> torch.Tensor:
    target = _cuda_target(device) if device is not None else None
    if isinstance(data, torch.Tensor):
        converted = data if dtype is None else data.to(dtype)
        return _to_target(converted, target) if target is not None else _AS_TENSOR(converted, device=device)
    return _placed(_AS_TENSOR(data, dtype=dtype, device=None if target is not None else device), target)


def _names_cuda(value: Any) -> bool:
    if isinstance(value, int):
        return not isinstance(value, bool)
    if isinstance(value, str):
        return value.startswith("cuda")
    return isinstance(value, VirtualTensor) or isinstance(value, _RealDevice) and value.type == "cuda"


def _tensor_to(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """Tensor.to: torch's own unless a virtual device is involved (the common case costs one check)."""
    if type(tensor) is not VirtualTensor and not (args and _names_cuda(args[0])) and not _names_cuda(kwargs.get("device")):
        return _TENSOR_TO(tensor, *args, **kwargs)
    return _to(tensor, *args, **kwargs)


_FACTORIES = (
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "range", "linspace",
    "logspace", "eye", "tensor", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "empty_strided", "empty_permuted", "scalar_tensor", "normal", "tril_indices", "triu_indices",
    "asarray", "sparse_coo_tensor", "bartlett_window", "blackman_window", "hamming_window", "hann_window",
    "kaiser_window", "frombuffer", "from_file",
)


def _factory(original: Callable[..., Any]) -> Callable[..., Any]:
    """A torch factory that makes its tensor on a virtual device when `device=` names CUDA."""

    def made(*args: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device")
        target = _cuda_target(device) if device is not None else None
        if target is None:
            return original(*args, **kwargs)
        return _placed(original(*args, **{**kwargs, "device": _CPU}), target)

    made.__name__, made.__qualname__, made.__doc__ = original.__name__, original.__name__, original.__doc__
    return made


def _patch_entry_points(torch_module: Any) -> None:
    """Where CUDA is asked for, before torch's bindings try to initialise it: conversions and `device=` arguments."""
    for name in _FACTORIES:
        if hasattr(torch_module, name):
            setattr(torch_module, name, _factory(getattr(torch_module, name)))
    torch_module.as_tensor = _as_tensor
    tensor = torch_module.Tensor
    tensor.to, tensor.cuda, tensor.record_stream, tensor.set_ = _tensor_to, _cuda, _record_stream, _set_storage
    tensor.data = property(_get_data, _set_data)
    for name in _NEW:
        setattr(tensor, name, _with_device(getattr(tensor, name)))


# --- torch.cuda, torch.accelerator and friends, as on a node of N GPUs --------------------------------------------


class _Properties:
    def __init__(self, index: int) -> None:
        self.name = _NAME
        self.total_memory = _MEMORY
        self.major, self.minor = 8, 0
        self.multi_processor_count = 108
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.uuid = f"virtual-{index}"
        self.L2_cache_size = 40 * 1024**2
        self.gcnArchName = "NVIDIA"

    def __repr__(self) -> str:
        return f"_CudaDeviceProperties(name='{self.name}', major=8, minor=0, total_memory={_MEMORY // 1024**2}MB)"


class _Stream:
    """Streams and events order nothing on the CPU: every operation has finished when it returns."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = _RealDevice("cuda", _index_of(device if not isinstance(device, _Stream) else None))
        self.priority = priority

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def wait_stream(self, stream: Any) -> None: ...
    def wait_event(self, event: Any) -> None: ...
    def synchronize(self) -> None: ...

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        return False

    def record_event(self, event: Any = None) -> _Event:
        event = event or _Event()
        event.record(self)
        return event


class _Event:
    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self._time: float | None = None

    def record(self, stream: Any = None) -> None:
        self._time = time.perf_counter()

    def wait(self, stream: Any = None) -> None: ...
    def synchronize(self) -> None: ...

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: _Event) -> float:
        if self._time is None or end._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end._time - self._time) * 1000.0


def _exchange_device(index: int) -> int:
    previous = current_device()
    if index >= 0:
        set_device(index)
    return previous


class _DeviceIndex:
    """torch.accelerator.device_index."""

    def __init__(self, device: Any, /) -> None:
        self.index, self.previous = device, -1

    def __enter__(self) -> None:
        if self.index is not None:
            self.previous = _exchange_device(_index_of(self.index))

    def __exit__(self, *exc: Any) -> None:
        if self.index is not None:
            set_device(self.previous)


def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


def _fresh(answer: Any) -> Any:
    """A function object of its own for each name: torch._dynamo keys its rules by the objects under torch's names."""
    if not callable(answer) or isinstance(answer, type):
        return answer

    def function(*args: Any, **kwargs: Any) -> Any:
        return answer(*args, **kwargs)

    return function


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


class _DeviceMeta(type):
    """`torch.device(0)` means a CUDA device where CUDA is the accelerator; the class stays torch's for isinstance."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, _RealDevice)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, _RealDevice)

    def __call__(cls, *args: Any, **kwargs: Any) -> _RealDevice:
        if len(args) == 1 and not kwargs and isinstance(args[0], int) and not isinstance(args[0], bool):
            return _RealDevice("cuda", args[0])
        return _RealDevice(*args, **kwargs)


class _Device(metaclass=_DeviceMeta):
    pass


def _patch_cuda_module(torch_module: Any) -> None:
    cuda = torch_module.cuda
    properties = {}

    def get_device_properties(device: Any = None) -> _Properties:
        index = _check_index(_index_of(device))
        return properties.setdefault(index, _Properties(index))

    answers: dict[str, Any] = {
        "is_available": lambda: True,
        "device_count": device_count,
        "current_device": current_device,
        "set_device": set_device,
        "_exchange_device": _exchange_device,
        "_maybe_exchange_device": _exchange_device,
        "is_initialized": lambda: True,
        "init": _no_op,
        "_lazy_init": _no_op,
        "get_device_name": lambda device=None: get_device_properties(device).name,
        "get_device_capability": lambda device=None: (8, 0),
        "get_device_properties": get_device_properties,
        "get_arch_list": lambda: ["sm_80"],
        "is_bf16_supported": lambda including_emulation=True: True,
        "is_tf32_supported": lambda: True,
        "can_device_access_peer": lambda device, peer: True,
        "synchronize": _no_op,
        "ipc_collect": _no_op,
        "empty_cache": _no_op,
        "reset_peak_memory_stats": _no_op,
        "reset_max_memory_allocated": _no_op,
        "reset_max_memory_cached": _no_op,
        "reset_accumulated_memory_stats": _no_op,
        "set_per_process_memory_fraction": _no_op,
        "memory_allocated": _zero,
        "max_memory_allocated": _zero,
        "memory_reserved": _zero,
        "max_memory_reserved": _zero,
        "memory_cached": _zero,
        "max_memory_cached": _zero,
        "memory_stats": lambda device=None: {},
        "memory_summary": lambda device=None, abbreviated=False: f"{_NAME}: no memory statistics\n",
        "mem_get_info": lambda device=None: (_MEMORY, _MEMORY),
        "utilization": _zero,
        "manual_seed": _no_op,
        "manual_seed_all": _no_op,
        "seed": _no_op,
        "seed_all": _no_op,
        "get_rng_state": lambda device="cuda": torch_module.get_rng_state(),
        "get_rng_state_all": lambda: [torch_module.get_rng_state() for _ in range(device_count())],
        "set_rng_state": _no_op,
        "set_rng_state_all": _no_op,
        "Stream": _Stream,
        "Event": _Event,
        "current_stream": lambda device=None: _Stream(device),
        "default_stream": lambda device=None: _Stream(device),
        "stream": lambda stream: contextlib.nullcontext(stream),
        "set_stream": _no_op,
        "is_current_stream_capturing": lambda: False,
    }
    for name, answer in answers.items():
        setattr(cuda, name, _fresh(answer))
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "empty_cache",
                 "reset_peak_memory_stats", "mem_get_info", "memory_stats", "memory_summary"):
        setattr(cuda.memory, name, getattr(cuda, name))  # one object under both names, as in torch
    for name in ("manual_seed", "manual_seed_all", "seed", "seed_all"):
        setattr(cuda.random, name, getattr(cuda, name))
    for name in ("range_push", "range_pop", "mark"):
        setattr(cuda.nvtx, name, _fresh(_no_op))
    cuda.nvtx.range = _fresh(lambda *a, **k: contextlib.nullcontext())


def _patch_accelerator(torch_module: Any) -> None:
    accelerator = getattr(torch_module, "accelerator", None)
    if accelerator is None:
        return
    answers: dict[str, Any] = {
        "is_available": lambda: True,
        "device_count": device_count,
        "current_accelerator": lambda check_available=False: _RealDevice("cuda"),
        "current_device_index": current_device,
        "current_device_idx": current_device,
        "set_device_index": set_device,
        "set_device_idx": set_device,
        "device_index": _DeviceIndex,
        "synchronize": _no_op,
        "current_stream": lambda device=None: _Stream(device),
        "set_stream": _no_op,
        "get_device_capability": lambda device=None: {"supported_dtypes": [torch.float32, torch.float16, torch.bfloat16]},
        "empty_cache": _no_op,
        "memory_allocated": _zero,
        "max_memory_allocated": _zero,
        "memory_reserved": _zero,
        "max_memory_reserved": _zero,
        "reset_peak_memory_stats": _no_op,
        "get_memory_info": lambda device=None: (_MEMORY, _MEMORY),
    }
    for name, answer in answers.items():
        if hasattr(accelerator, name):
            setattr(accelerator, name, _fresh(answer))


def _patch_parse_to(torch_module: Any) -> None:
    """nn.Module.to parses its arguments in C++, where an int device needs an accelerator this build lacks."""
    original = torch_module._C._nn._parse_to

    def parse_to(*args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], int) and not isinstance(args[0], bool):
            args = (_RealDevice("cuda", args[0]), *args[1:])
        if isinstance(kwargs.get("device"), int):
            kwargs["device"] = _RealDevice("cuda", kwargs["device"])
        if args and isinstance(args[0], VirtualTensor):  # `.to(other)`: the other's device and dtype
            args = (args[0].device, args[0].dtype, *args[1:])
        return original(*args, **kwargs)

    torch_module._C._nn._parse_to = parse_to


def _patch_generator(torch_module: Any) -> None:
    original = torch_module.Generator

    class _GeneratorMeta(type):
        def __instancecheck__(cls, instance: Any) -> bool:
            return isinstance(instance, original)

        def __call__(cls, device: Any = "cpu") -> Any:
            return original("cpu" if _cuda_target(device) is not None else device)

    class Generator(metaclass=_GeneratorMeta):
        pass

    torch_module.Generator = Generator


def _patch_serialization(torch_module: Any) -> None:
    """torch.save records the CUDA device of a virtual tensor's storage, as it would a real one's."""

    def tag(storage: Any) -> str | None:
        if not hasattr(storage, "data_ptr"):
            return None
        return _SAVING.get(storage.data_ptr())

    torch_module.serialization.register_package(5, tag, lambda storage, location: None)


def _patch_streams(torch_module: Any) -> None:
    functions = torch_module.nn.parallel._functions
    functions._get_stream = lambda device: _Stream(device)


def _patch_cudnn(torch_module: Any) -> None:
    """cuDNN is there, as on a GPU node, but never for a virtual tensor: its kernels are the CPU's. A CUDA build of
    torch would otherwise send an RNN's weights to `_cudnn_rnn_flatten_weight`, which has no CPU kernel."""
    cudnn = torch_module.backends.cudnn
    original = cudnn.is_acceptable
    cudnn.is_available = lambda: True
    cudnn.is_acceptable = lambda tensor: not isinstance(tensor, VirtualTensor) and original(tensor)


def _patch_backward(torch_module: Any) -> None:
    """`loss.backward()` on a virtual tensor reaches autograd through `__torch_function__`, with the overrides turned
    off for the call; the engine runs the module hooks (FSDP's reshard and gradient reduction) inside it, where
    virtual tensors must answer as they do in the forward (`untyped_storage`, `.cpu()`)."""
    autograd = torch_module.autograd
    original = autograd._engine_run_backward

    def run_backward(*args: Any, **kwargs: Any) -> Any:
        with torch_module._C._EnableTorchFunction():
            return original(*args, **kwargs)

    autograd._engine_run_backward = run_backward


def install(torch_module: Any, devices: int) -> None:
    """From now on this process sees `devices` CUDA devices that compute on the CPU."""
    _count["devices"] = devices
    _patch_cuda_module(torch_module)
    _patch_accelerator(torch_module)
    _patch_parse_to(torch_module)
    _patch_generator(torch_module)
    _patch_serialization(torch_module)
    _patch_streams(torch_module)
    _patch_backward(torch_module)
    _patch_entry_points(torch_module)
    torch_module.device = _Device
    _patch_cudnn(torch_module)
    torch_module.Tensor.pin_memory = lambda self, *a, **k: self  # host memory is host memory here


@contextlib.contextmanager
def saving() -> Iterator[None]:
    """Around torch.save: the storages of virtual tensors are tagged with their device while pickled."""
    _SAVING.clear()
    try:
        yield
    finally:
        _SAVING.clear()


def _load_target(location: str, map_location: Any) -> _RealDevice | None:
    if map_location is None:
        mapped: Any = location
    elif isinstance(map_location, dict):
        mapped = map_location.get(location, location)
    elif callable(map_location):
        return None  # the caller's function already placed it
    else:
        mapped = map_location
    if isinstance(mapped, int) and not isinstance(mapped, bool):
        mapped = _RealDevice("cuda", mapped)
    return _cuda_target(mapped)


def _map_tensors(value: Any, place: Callable[[torch.Tensor], torch.Tensor], seen: set[int]) -> Any:
    if isinstance(value, torch.Tensor):
        return place(value)
    if id(value) in seen:
        return value
    seen.add(id(value))
    if isinstance(value, torch.nn.Module):
        for module in value.modules():
            for name, tensor in list(module._parameters.items()):
                if tensor is not None:
                    module._parameters[name] = place(tensor)  # type: ignore[assignment]
            for name, tensor in list(module._buffers.items()):
                if tensor is not None:
                    module._buffers[name] = place(tensor)
        return value
    if isinstance(value, dict):
        for key in list(value):
            value[key] = _map_tensors(value[key], place, seen)
        return value
    if isinstance(value, list):
        value[:] = [_map_tensors(v, place, seen) for v in value]
        return value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_map_tensors(v, place, seen) for v in value)
    return value


def load(original_load: Callable[..., Any], f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """torch.load as on a node of N GPUs: tensors saved from CUDA come back on the (mapped) virtual device."""
    kwargs = dict(kwargs)
    map_location = kwargs.pop("map_location", args[0] if args else None)
    args = args[1:]
    targets: dict[int, _RealDevice | None] = {}

    def place(storage: Any, location: str) -> Any:
        targets[storage.data_ptr()] = _called_map(map_location, storage, location) if callable(map_location) else _load_target(location, map_location)
        return storage

    return _placed_tensors(original_load(f, *args, map_location=place, **kwargs), targets)


def _called_map(map_location: Callable[..., Any], storage: Any, location: str) -> _RealDevice | None:
    """Runs the program's own map_location function; `storage.cuda(i)` in it records a target instead of copying."""
    asked: list[_RealDevice | None] = []
    classes = [torch.UntypedStorage, torch.TypedStorage]
    saved = [cls.cuda for cls in classes]

    def cuda(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
        asked.append(_cuda_target(_RealDevice("cuda", _index_of(device))))
        return self

    for cls in classes:
        cls.cuda = cuda  # type: ignore[method-assign]
    try:
        map_location(storage, location)
    finally:
        for cls, original in zip(classes, saved):
            cls.cuda = original  # type: ignore[method-assign]
    return asked[-1] if asked else None


def _placed_tensors(result: Any, targets: dict[int, _RealDevice | None]) -> Any:
    if not any(targets.values()):
        return result

    def place(tensor: torch.Tensor) -> torch.Tensor:
        if isinstance(tensor, VirtualTensor) or tensor.device.type != "cpu":
            return tensor
        target = targets.get(tensor.untyped_storage().data_ptr())
        if target is None:
            return tensor
        placed = VirtualTensor(tensor.detach(), target)
        if isinstance(tensor, torch.nn.Parameter):
            return torch.nn.Parameter(placed, tensor.requires_grad)
        return placed.requires_grad_() if tensor.requires_grad else placed

    return _map_tensors(result, place, set())
