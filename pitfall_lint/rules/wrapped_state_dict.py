"""PFL203: a wrapper's state_dict carries `module.` on every key; the bare model then loads none of them."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from pitfall_lint.analysis.evidence import cite
from pitfall_lint.analysis.scopes import enclosing_function, local_value
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.analysis.wrappers import (
    checkpoint_key,
    holds_wrapper,
    loaded_checkpoint,
    restores_training_state,
    same_checkpoint,
    saved_wrapper_states,
    wrap_of,
    wrapped_on_every_path,
    wrapper_receiving,
)
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_PREFIX_STRIPPERS = frozenset({"consume_prefix_in_state_dict_if_present"})
_PREFIX_LENGTH = len("module.")  # `k[7:]`
# A helper that takes the model and the checkpoint's path and loads one into the other (`restart_from_checkpoint`).
_LOADER_NAME = re.compile(r"load|resume|restore|restart", re.IGNORECASE)


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _callee_name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(call.func, ast.Name) else ""


@dataclass
class _Save:
    call: ast.Call
    ancestors: list[ast.AST]
    wrappers: list[str]


class WrappedStateDict(Rule):
    info = RuleInfo(
        code="PFL203",
        name="wrapped-state-dict",
        summary="Saving a DataParallel/DDP wrapper's state_dict (keys gain `module.`), or loading such keys into the bare model.",
        severity="warning",
        hint='save `model.module.state_dict()`; for old checkpoints, `consume_prefix_in_state_dict_if_present(state, "module.")`',
        verifiable=True,
    )
    # A save in this file, or a load of a checkpoint that another file of the project saves.
    triggers = (("state_dict",),)
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._saves: list[_Save] = []
        self._lenient_loads: list[tuple[ast.Call, list[ast.AST]]] = []
        self._loads: list[tuple[ast.Call, list[ast.AST]]] = []
        self._loader_calls: list[tuple[ast.Call, list[ast.AST]]] = []  # helpers that may load into a model given
        # What each load reads and receives, worked out once: every save of a script asked it of every load again.
        self._worked_out: dict[tuple[int, str], object] = {}

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        name = _callee_name(node)
        loader = _LOADER_NAME.search(name) is not None
        if isinstance(node.func, ast.Attribute) and name != "save" and not loader:
            return  # the cheap look first (a plain name may be torch.save imported under another)
        ancestors = self.ctx.ancestors
        if name == "load_state_dict" and isinstance(node.func, ast.Attribute):
            if any(k.arg == "strict" and _is_false(k.value) for k in node.keywords):
                self._lenient_loads.append((node, list(ancestors)))
            self._loads.append((node, list(ancestors)))
        elif self.ctx.qualified_name(node.func) == "torch.save":
            wrappers = saved_wrapper_states(self.ctx, node, ancestors)
            if wrappers:
                self._saves.append(_Save(node, list(ancestors), wrappers))
        elif loader:
            self._loader_calls.append((node, list(ancestors)))

    def finish(self) -> None:
        reported = [save for save in self._saves if not self._resumed_only(save)]
        for save in reported:
            for wrapper in save.wrappers:
                self.report(
                    save.call,
                    f"saves `{wrapper}.state_dict()` of a DataParallel/DDP wrapper: every key gains a "
                    f"`module.` prefix and will not load into the bare model; save `{wrapper}.module.state_dict()`",
                )
        if reported:
            for call, ancestors in self._lenient_loads:
                if wrapper_receiving(self.ctx, call, ancestors) is None and not self._strips_prefix(ancestors):
                    self.report(
                        call,
                        "`load_state_dict(..., strict=False)` in a file that saves `module.`-prefixed checkpoints: when the keys "
                        "carry the prefix nothing is loaded and no error is raised; strip it with "
                        "`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, \"module.\")`",
                    )
            return  # the saves themselves are reported; the file's own loads follow from them
        if self._saves:
            return  # read back into the wrapper that saved them: the file's loads are of its own checkpoints
        for call, ancestors in self._loads:
            self._check_load_from_elsewhere(call, ancestors)

    def _resumed_only(self, save: _Save) -> bool:
        """Whether the checkpoint is only ever read back into the wrapper that saved it (a resume): this file loads
        a checkpoint of the same name into that wrapper, which the name holds on every path, and no file of the
        project loads one into a bare model."""
        path = save.call.args[1] if len(save.call.args) > 1 else None
        name = checkpoint_key(self.ctx, path, save.ancestors) if path is not None else None
        if name is None:
            return False
        for wrapper in save.wrappers:
            wrap = wrap_of(self.ctx, wrapper, save.ancestors, save.call.lineno)
            if wrap is None or not wrapped_on_every_path(self.ctx, wrap) or not self._reads_back(wrap, wrapper, name):
                return False
        return self.ctx.project.bare_checkpoint_load(name) is None

    def _reads_back(self, wrap: ast.Call, wrapper: str, name: str) -> bool:
        """A load in this file of the checkpoint `name` into the wrapper that `wrap` built: `<wrapper>.load_state_dict`
        of it, or a loading helper given both (`restart_from_checkpoint(path, state_dict=<wrapper>)`)."""
        for call, ancestors in self._loads:
            loaded = self._once(call, "loaded", loaded_checkpoint, self.ctx, call.args[0], ancestors, call.lineno) if call.args else None
            if loaded is None or not same_checkpoint(loaded, name):  # type: ignore[arg-type]
                continue
            if self._once(call, "receiver", wrapper_receiving, self.ctx, call, ancestors) is wrap:
                return True
        for call, ancestors in self._loader_calls:
            given = [*call.args, *(k.value for k in call.keywords)]
            if not any(isinstance(g, ast.Name) and g.id == wrapper for g in given):
                continue
            if self._once(call, f"wrap of {wrapper}", wrap_of, self.ctx, wrapper, ancestors, call.lineno) is not wrap:
                continue
            keys = (self._once(g, "key", checkpoint_key, self.ctx, g, ancestors) for g in given)
            if any(key is not None and same_checkpoint(key, name) for key in keys):  # type: ignore[arg-type]
                return True
        return False

    def _once(self, node: ast.AST, what: str, compute: Callable[..., object], *arguments: object) -> object:
        """`compute(*arguments)`, the fact `what` of the node, worked out once for every save that asks it."""
        key = (id(node), what)
        if key not in self._worked_out:
            self._worked_out[key] = compute(*arguments)
        return self._worked_out[key]

    def _check_load_from_elsewhere(self, call: ast.Call, ancestors: list[ast.AST]) -> None:
        """`model.load_state_dict(torch.load("ckpt.pt"))` into a bare model, of a checkpoint that another file
        of the project saves from a wrapper."""
        receiver = call.func.value  # type: ignore[attr-defined]
        if not call.args or (isinstance(receiver, ast.Name) and holds_wrapper(self.ctx, receiver.id, ancestors, call.lineno)):
            return
        if restores_training_state(self.ctx, call, ancestors):
            return
        path = self._loaded_path(call.args[0], ancestors, call.lineno)
        name = checkpoint_key(self.ctx, path, ancestors) if path is not None else None
        if name is None or self._strips_prefix(ancestors):
            return
        saved = self.ctx.project.wrapper_checkpoint(name)
        where, related = cite(self.ctx, saved, "saved from a wrapper")
        if not where:
            return  # saved in this file: reported there
        strict = next((k.value for k in call.keywords if k.arg == "strict"), None)
        effect = "nothing is loaded and no error is raised" if strict is not None and _is_false(strict) else "loading fails on the unexpected `module.` keys"
        self.report(
            call,
            f"loads `{name}`, a checkpoint of `module.`-prefixed keys{where}, into the bare model: {effect}; strip the "
            "prefix with `torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, \"module.\")` "
            "or save `model.module.state_dict()` there",
            related=related,
        )

    def _loaded_path(self, value: ast.AST | None, ancestors: list[ast.AST], line: int) -> ast.AST | None:
        """The path of `torch.load(path)` (or `torch.load(path)["model"]`) that `value` holds."""
        if isinstance(value, ast.Name):
            value = local_value(value.id, enclosing_function(ancestors), line, self.ctx.tree)
        while isinstance(value, ast.Subscript):
            value = value.value
        if isinstance(value, ast.Call) and self.ctx.qualified_name(value.func, ancestors) == "torch.load" and value.args:
            return value.args[0]
        return None

    def _strips_prefix(self, ancestors: list[ast.AST]) -> bool:
        """Whether the loading code handles the prefix itself: a `module.` string (`k.replace("module.", "")`,
        `k.removeprefix("module.")`), a cut of its length (`k[7:]`), or torch's prefix stripper."""
        function = enclosing_function(ancestors)
        key = ("strips-module-prefix", id(function))  # once per scope: a script's thousands of loads read it once
        if key not in self.ctx.memo:
            self.ctx.memo[key] = any(
                self._strips_here(node, ancestors) for node in walk_same_scope(function.body if function is not None else self.ctx.tree.body)
            )
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _strips_here(self, node: ast.AST, ancestors: list[ast.AST]) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "module." in node.value:
            return True
        if isinstance(node, ast.Slice) and isinstance(node.lower, ast.Constant) and node.lower.value == _PREFIX_LENGTH:
            return True
        return isinstance(node, ast.Call) and (self.ctx.qualified_name(node.func, ancestors) or "").rpartition(".")[2] in _PREFIX_STRIPPERS
