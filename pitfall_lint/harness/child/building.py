"""The module of a model file, built in the child: by the constructor call verify resolved in the project
(PITFALL_LINT_MODEL, see harness/construction.py), else from its parameters (their defaults; a small int for an int
or a size, nn.Identity for a module), with the words that say how, for the report."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from typing import Any

from pitfall_lint.harness.child.events import VerifyLimit

MODEL = "PITFALL_LINT_MODEL"  # {"class", "args", "kwargs", "options", "source", "folder"}
PROJECT = "PITFALL_LINT_PROJECT"
_SMALL_INT = 8
_SMALL_FLOAT = 0.1
_SIZE_NAME = re.compile(r"^n_?(?=[a-z])|^num_|(dims?|size|channels|features|classes|heads|layers|depth|width|planes|units"
                        r"|tokens|length)$")
_MODULE_NAME = re.compile(r"(encoder|decoder|backbone|model|net|block|layer|module|head)$")
_RATE_NAME = re.compile(r"(dropout|drop_rate|eps|temperature|momentum|ratio)$")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_NO_CALL = "no call in the project builds it"
_ADD_EXAMPLE = "add pitfall_lint_example() returning (model, args)"


def build(chosen: type, wanted: dict[str, Any]) -> tuple[Any, str]:
    """The module and how it was built: as the project's call (`wanted`, read from MODEL) builds it, else from its
    parameters."""
    if wanted.get("class") == chosen.__name__ and "args" in wanted:
        return _from_call(chosen, wanted)
    return _from_parameters(chosen)


def _from_call(chosen: type, call: dict[str, Any]) -> tuple[Any, str]:
    if call.get("folder") and os.environ.get(PROJECT):
        folder = os.path.normpath(os.path.join(os.environ[PROJECT], call["folder"]))
        sys.path.append(folder)  # the caller's imports
        while os.path.exists(os.path.join(folder, "__init__.py")):
            folder = os.path.dirname(folder)
        sys.path.append(folder)  # above its package: the classes it defines (`models.resnet.BasicBlock`)
    parameters = _parameters(chosen)
    positional = [p for p in parameters.values() if p.kind in _POSITIONAL]
    filled: list[str] = []
    given = [_argument(spec, positional[i] if i < len(positional) else None, chosen, call, filled)
             for i, spec in enumerate(call["args"])]
    named = {name: _argument(spec, parameters.get(name), chosen, call, filled) for name, spec in call["kwargs"].items()}
    args, kwargs = [value for value, _ in given], {name: value for name, (value, _) in named.items()}
    shown = ", ".join([*(text for _, text in given), *(f"{name}={text}" for name, (_, text) in named.items())])
    how = f"{chosen.__name__}({shown}) as called at {call['source']}"
    if call.get("options"):
        how += f" with the argparse defaults {', '.join(call['options'])}"
    if filled:
        how += f" ({'; '.join(filled)})"
        return _made(chosen, args, kwargs, f"as called at {call['source']}, with {'; '.join(filled)}"), how
    return chosen(*args, **kwargs), how  # the script's own build: its failure is the script's


def _argument(spec: dict[str, Any], parameter: inspect.Parameter | None, chosen: type, call: dict[str, Any],
              filled: list[str]) -> tuple[Any, str]:
    if "configured" in spec:
        return _configured(spec, chosen, call, filled), _spec_shown(spec)
    if "unknown" not in spec:
        return _value(spec), _spec_shown(spec)
    guess = _guess(parameter) if parameter is not None else None
    if guess is None:
        raise VerifyLimit(f"{chosen.__name__}(...) as called at {call['source']} passes {spec['unknown']}, which is "
                          f"known only when the script runs: {_ADD_EXAMPLE}")
    value, origin = guess
    filled.append(f"{parameter.name}={_shown(value)} for {spec['unknown']}: {origin}")  # type: ignore[union-attr]
    return value, _shown(value)


def _configured(spec: dict[str, Any], chosen: type, call: dict[str, Any], filled: list[str]) -> Any:
    """The config object as the caller makes it; an attribute set to what only the run knows (`vocab_size` read off
    the dataset) gets a value by its name."""
    made = _value(spec["configured"])
    for name, value in spec["set"].items():
        if "unknown" in value:
            value = _argument(value, inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY), chosen, call, filled)[0]
            spec["set"][name] = {"value": value}  # shown as filled
        else:
            value = _value(value)
        setattr(made, name, value)
    return made


def _from_parameters(chosen: type) -> tuple[Any, str]:
    required = [p for p in _parameters(chosen).values()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not required:
        return _made(chosen, [], {}, "with its default arguments"), f"{chosen.__name__}() with its default arguments"
    kwargs, origins = {}, []
    for parameter in required:
        guess = _guess(parameter)
        if guess is None:
            raise VerifyLimit(f"{chosen.__name__}() needs constructor arguments ({_described(parameter)} verify cannot "
                              f"make up); {_NO_CALL}: {_ADD_EXAMPLE}")
        kwargs[parameter.name], origin = guess
        origins.append(f"{parameter.name}: {origin}")
    shown = ", ".join(f"{k}={_shown(v)}" for k, v in kwargs.items())
    how = f"{chosen.__name__}({shown}) ({'; '.join(origins)}; {_NO_CALL})"
    return _made(chosen, [], kwargs, f"from its parameters ({'; '.join(origins)})"), how


def _made(chosen: type, args: list[Any], kwargs: dict[str, Any], chosen_how: str) -> Any:
    """The module built with arguments verify chose: a failure is verify's guess failing, not the code's."""
    try:
        return chosen(*args, **kwargs)
    except Exception as error:
        raise VerifyLimit(f"{chosen.__name__}() needs constructor arguments: built {chosen_how}, it failed "
                          f"({type(error).__name__}: {error}); {_ADD_EXAMPLE}") from None


def _parameters(chosen: type) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(chosen).parameters)
    except (TypeError, ValueError):
        return {}


def _guess(parameter: inspect.Parameter) -> tuple[Any, str] | None:
    """A value for the parameter and where it came from: its default, its annotation, else its name."""
    import torch.nn as nn

    if parameter.default is not parameter.empty:
        return parameter.default, "its default"
    annotation = parameter.annotation
    if annotation is not parameter.empty:
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None) \
            if isinstance(annotation, type) else repr(annotation).replace("typing.", "")
        text = text.replace("torch.nn.modules.module.", "nn.").replace("torch.nn.", "nn.")
        if re.search(r"Optional\[|\|\s*None\b|\bNone\s*\|", text):
            return None, f"annotated {text}"
        made = {"bool": False, "int": _SMALL_INT, "float": _SMALL_FLOAT}.get(text)
        if made is not None:
            return made, f"annotated {text}"
        if re.search(r"(type|Type|Callable)\[.*Module", text):
            return nn.Identity, f"a module class for its annotation {text}"
        if (isinstance(annotation, type) and issubclass(annotation, nn.Module)) or text.endswith("Module"):
            return nn.Identity(), f"a module for its annotation {text}"
        return None
    name = parameter.name.lower()
    if _SIZE_NAME.search(name):
        return _SMALL_INT, "a size, by its name"
    if _RATE_NAME.search(name):
        return _SMALL_FLOAT, "a rate, by its name"
    if _MODULE_NAME.search(name):
        return nn.Identity(), "a module, by its name"
    return None


def _described(parameter: inspect.Parameter) -> str:
    annotation = parameter.annotation
    if annotation is parameter.empty:
        return parameter.name
    return f"{parameter.name}: {annotation if isinstance(annotation, str) else getattr(annotation, '__name__', annotation)}"


def _value(spec: dict[str, Any]) -> Any:
    if "value" in spec:
        return spec["value"]
    if "object" in spec:
        return _imported(spec["object"])
    return _imported(spec["call"])(*map(_value, spec["args"]), **{k: _value(v) for k, v in spec["kwargs"].items()})


def _imported(dotted: str) -> Any:
    """`torchvision.models.resnet50`: the longest prefix that is a module, then its attributes."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as error:
            if end > 1 and error.name and f"{module}.".startswith(f"{error.name}."):
                continue  # `mingpt.model.GPT` is no module: a class, met by the shorter prefix
            raise
        for attribute in parts[end:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


def _shown(value: Any) -> str:
    """A value verify chose, as the report names it."""
    if isinstance(value, type):
        module = "torch.nn" if value.__module__.startswith("torch.nn.modules.") else value.__module__
        return f"{module}.{value.__qualname__}"
    if type(value).__name__ == "Identity":
        return "torch.nn.Identity()"
    return repr(value)


def _spec_shown(spec: dict[str, Any]) -> str:
    """An argument of the project's call, as resolved: `2048`, `torchvision.models.resnet50`, `encoders.Conv(3)`."""
    if "value" in spec:
        return repr(spec["value"])
    if "object" in spec:
        return str(spec["object"])
    if "configured" in spec:
        settings = ", ".join(f"{name}={_spec_shown(value)}" for name, value in spec["set"].items())
        return f"{_spec_shown(spec['configured'])} with {settings}"
    inner = [*map(_spec_shown, spec["args"]), *(f"{k}={_spec_shown(v)}" for k, v in spec["kwargs"].items())]
    return f"{spec['call']}({', '.join(inner)})"
