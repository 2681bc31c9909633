"""What a DataParallel/DDP wrapper does to the model it wraps, observed around torch's own code.

- PFL104: after each DataParallel step, the attributes that a replica rebound (its `__dict__` entry no longer the
  original's object) while the original kept its own: the replicas' values and the original's, measured.
- PFL105: what the replicas returned to the gather (0-dim tensors, Python numbers, strings), the gather's warnings,
  and what a string became.
- PFL106: a compiled module (`torch.compile`'s OptimizedModule, or `Module.compile()`) being replicated, with the
  submodules the original model had before the step and after it.
- PFL212: an attribute that the user's project sets on a wrapper, compared with the wrapped module's own at the next
  forward.
- Each module of the project wrapped in DataParallel, and where, and each one called through it: a flagged class the
  script wraps and never calls is run directly after the script.
Events are emitted a few times per attribute at most; the user's code sees torch's behaviour unchanged.
"""

from __future__ import annotations

import inspect
import sys
import threading
import warnings
import weakref
from typing import Any

from pitfall_lint.harness.child.events import emit, project_file, user_place

_EVENTS_PER_KIND = 3
_MISSING = object()
_state = threading.local()
_emitted: dict[tuple[Any, ...], int] = {}
_set_on_wrappers: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, int]]] = weakref.WeakKeyDictionary()
_registry: dict[Any, Any] = {}  # the gather's warnings, re-issued once per place as Python would


def _once(*key: Any) -> bool:
    """Whether an event with this key is still worth emitting."""
    count = _emitted.get(key, 0)
    _emitted[key] = count + 1
    return count < _EVENTS_PER_KIND


def _shown(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        if value.numel() <= 4:
            return repr(value.detach().cpu().tolist()) if value.dim() else repr(value.item())
        return f"tensor of shape {list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 60 else f"{type(value).__name__} {text[:57]}..."


def _internal_names() -> frozenset[str]:
    import torch

    return frozenset(torch.nn.Module().__dict__) | {"_is_replica"}


def _replicated(replicas: list[Any]) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """The replicas, and replica 0's attributes as replication left them (some modules rebind their own there)."""
    return replicas, {prefix: dict(vars(m)) for prefix, m in replicas[0].named_modules()} if replicas else {}


def _lost_state(original: Any, replicated: tuple[list[Any], dict[str, dict[str, Any]]]) -> None:
    """PFL104: attributes that forward rebound on the replicas and the original never got (every replica runs the
    same forward, so replica 0 tells which; the values of all are shown)."""
    replicas, as_replicated = replicated
    internal = _internal_names()
    copies = [dict(r.named_modules()) for r in replicas]
    for prefix, module in original.named_modules():
        if type(module).__module__.startswith("torch."):
            continue  # torch's own modules keep caches of their own (an RNN's flat weights)
        own = vars(module)
        first = copies[0].get(prefix)
        before = as_replicated.get(prefix, {})
        for name, value in vars(first).items() if first is not None else ():
            if name in internal or own.get(name, _MISSING) is value or before.get(name, _MISSING) is value:
                continue
            if not _once("lost", type(module).__name__, name):
                continue
            emit(
                "dp-lost-state",
                module=type(module).__name__,
                path=prefix,
                attribute=name,
                original=_shown(own[name]) if name in own else None,
                replicas=[_shown(vars(c[prefix]).get(name)) for c in copies if prefix in c],
                **user_place(),
            )


def _compiled_forms(module: Any) -> list[tuple[str, Any]]:
    """(form, module) of the compiled modules in the model: "torch.compile" for an OptimizedModule (the module
    inside it), "Module.compile" for a module that compiled itself."""
    optimized = getattr(sys.modules.get("torch._dynamo.eval_frame"), "OptimizedModule", None)
    found = []
    for inner in module.modules():
        if optimized is not None and isinstance(inner, optimized):
            found.append(("torch.compile", inner._orig_mod))
        elif "_compiled_call_impl" in vars(inner):
            found.append(("Module.compile", inner))
    return found


def _compiled_step(compiled: list[tuple[str, Any, list[str]]]) -> None:
    """PFL106: what replicating the compiled modules did to the original ones."""
    for form, inner, before in compiled:
        after = list(vars(inner).get("_modules", {}))
        if _once("compiled", form, type(inner).__name__):
            emit("dp-compiled", form=form, module=type(inner).__name__, before=before, after=after, **user_place())


def _leaves(value: Any, place: str = "") -> list[tuple[str, str, str]]:
    """(place, kind, Python type) of what in a replica's output does not gather as a batch."""
    import torch

    if isinstance(value, torch.Tensor):
        return [(place, "scalar", "Tensor")] if value.dim() == 0 else []
    if isinstance(value, str):
        return [(place, "string", "str")]
    if isinstance(value, (bool, int, float, complex)):
        return [(place, "number", type(value).__name__)]
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, f"{place}[{key!r}]")]
    if isinstance(value, (list, tuple)):
        return [leaf for index, item in enumerate(value) for leaf in _leaves(item, f"{place}[{index}]")]
    return []


def _map_objects(value: Any, place: str = "") -> list[tuple[str, str]]:
    """(place, text) of the strings the gather turned into `'<map object at 0x...>'`."""
    if isinstance(value, str):
        return [(place, value)] if value.startswith("<map object at ") else []
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _map_objects(item, f"{place}[{key!r}]")]
    if isinstance(value, (list, tuple)):
        return [found for index, item in enumerate(value) for found in _map_objects(item, f"{place}[{index}]")]
    return []


def _observed_gather(original: Any) -> Any:
    def gather(self: Any, outputs: Any, output_device: Any) -> Any:
        leaves = (_quietly(_leaves, outputs[0]) or []) if outputs else []
        if not leaves:
            return original(self, outputs, output_device)
        where = user_place()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = original(self, outputs, output_device)
            except Exception as error:
                emit("dp-gather", leaves=leaves, replicas=len(outputs), error=f"{type(error).__name__}: {error}", **where)
                raise
        for warning in caught:  # shown as they would have been: once per place, under the user's filters
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno, registry=_registry)
        if _once("gather", tuple(map(tuple, leaves))):
            emit("dp-gather", leaves=leaves, replicas=len(outputs), warnings=[str(w.message) for w in caught],
                 strings=_quietly(_map_objects, result) or [], **where)
        return result

    return gather


def _observed_replicate(original: Any) -> Any:
    def replicate(self: Any, module: Any, device_ids: Any) -> Any:
        replicas = original(self, module, device_ids)
        _state.replicas = _quietly(_replicated, list(replicas))
        return replicas

    return replicate


def _quietly(observation: Any, *arguments: Any) -> Any:
    """An observation that fails is recorded and skipped: it must never change what the user's code sees."""
    try:
        return observation(*arguments)
    except Exception as error:
        emit("observer-error", observation=observation.__name__, error=f"{type(error).__name__}: {error}")
        return None


def _observed_forward(original: Any) -> Any:
    def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        if _once("dp-called", type(self.module)):
            emit("dp-called", module=type(self.module).__name__)
        _quietly(_compare_set_attributes, self)
        compiled = _quietly(_compiled_before, self.module) or []
        _state.replicas = None
        try:
            result = original(self, *inputs, **kwargs)
        except BaseException:
            _state.replicas = None
            if compiled:
                _quietly(_compiled_step, compiled)
            raise
        replicated, _state.replicas = getattr(_state, "replicas", None), None
        if compiled:
            _quietly(_compiled_step, compiled)
        if replicated:
            _quietly(_lost_state, self.module, replicated)
        return result

    return forward


def _compiled_before(module: Any) -> list[tuple[str, Any, list[str]]]:
    return [(form, inner, list(vars(inner).get("_modules", {}))) for form, inner in _compiled_forms(module)]


def _compare_set_attributes(wrapper: Any) -> None:
    """PFL212: each attribute the user's project set on this wrapper, against the wrapped module's own."""
    for name, (file, line) in list(_set_on_wrappers.get(wrapper, {}).items()):
        if not _once("wrapper-attribute", type(wrapper).__name__, name, file, line):
            continue
        own = getattr(wrapper.module, name, _MISSING)
        emit(
            "wrapper-attribute",
            wrapper=type(wrapper).__name__,
            module=type(wrapper.module).__name__,
            attribute=name,
            set_at={"file": file, "line": line},
            wrapper_value=_shown(vars(wrapper).get(name)),
            module_value=None if own is _MISSING else _shown(own),
            **user_place(),
        )


def _observed_setattr(original: Any) -> Any:
    def setattr_(self: Any, name: str, value: Any) -> None:
        caller = sys._getframe(1)
        if "module" in vars(self).get("_modules", {}):
            file = project_file(caller.f_code.co_filename)
            if file is not None:
                _set_on_wrappers.setdefault(self, {})[name] = (file, caller.f_lineno)
        original(self, name, value)

    return setattr_


def _wrapped(module: Any) -> None:
    kind = type(module)
    defined_in = project_file(inspect.getsourcefile(kind) or "")
    if defined_in is not None and _once("dp-wrapped", kind):
        emit("dp-wrapped", module=kind.__name__, defined_in=defined_in, **user_place())


def _observed_init(original: Any) -> Any:
    def __init__(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        original(self, module, *args, **kwargs)
        _quietly(_wrapped, module)

    return __init__


def observe_wrappers(torch: Any) -> None:
    """Installs the observations on the DataParallel class in use (real or emulated) and on DDP's."""
    data_parallel = torch.nn.DataParallel
    data_parallel.__init__ = _observed_init(data_parallel.__init__)
    data_parallel.forward = _observed_forward(data_parallel.forward)
    data_parallel.replicate = _observed_replicate(data_parallel.replicate)
    data_parallel.gather = _observed_gather(data_parallel.gather)
    data_parallel.__setattr__ = _observed_setattr(data_parallel.__setattr__)
    from torch.nn.parallel import DistributedDataParallel

    DistributedDataParallel.__setattr__ = _observed_setattr(DistributedDataParallel.__setattr__)
    original_forward = DistributedDataParallel.forward

    def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        _quietly(_compare_set_attributes, self)
        return original_forward(self, *inputs, **kwargs)

    DistributedDataParallel.forward = forward
