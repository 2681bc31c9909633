"""PFL210: moving, casting or editing a model after DistributedDataParallel wrapped it; `device_ids` for a CPU model."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator

from pitfall_lint.analysis.evidence import snippet
from pitfall_lint.analysis.modules import creates_parameters
from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.scopes import FUNCTIONS, local_value, position_in_block
from pitfall_lint.analysis.training import dotted, walk_same_scope
from pitfall_lint.analysis.wrapper_backward import GradSwitch, covers_model, grad_switches, may_train_after, own_nodes
from pitfall_lint.analysis.wrappers import WrapBinding, wrap_bindings
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_CASTS = frozenset({"half", "double", "bfloat16"})
_MOVES = frozenset({"cuda", "cpu", "xpu", "mps", "npu"})
_DTYPES = frozenset({"float16", "half", "bfloat16", "float64", "double"})
_EDITS = frozenset({"add_module", "register_module", "register_parameter"})
_PLACERS = frozenset({"to", "cuda", "to_empty", "xpu", "npu", "mps"})
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_CONVERTERS = frozenset({"convert_sync_batchnorm"})



class DdpWrapOrder(Rule):
    info = RuleInfo(
        code="PFL210",
        name="ddp-wrap-order",
        summary="A model moved, cast or edited after DistributedDataParallel wrapped it, or `device_ids` for a CPU model.",
        severity="error",
        hint="move, cast, freeze and edit the model first, then wrap it in DistributedDataParallel (or wrap it again)",
        verifiable=True,
    )
    triggers = (("DistributedDataParallel",),)
    subscriptions = (ast.Module, *FUNCTIONS)

    def visit(self, node: ast.AST) -> None:
        bindings = wrap_bindings(self.ctx, node)
        if not bindings:
            return
        chain = [*ancestors_of(self.ctx, node), node]
        last_wrap_of: dict[str, int] = {}
        for binding in bindings:
            if binding.inner:
                last_wrap_of[binding.inner] = max(last_wrap_of.get(binding.inner, 0), binding.call.lineno)
        for binding in bindings:
            self._device_ids_on_cpu(binding)
            names = {n for n in (binding.inner, binding.wrapper) if n}
            if binding.wrapper:
                names.add(f"{binding.wrapper}.module")
            for statement in itertools.chain([binding.statement], self._following(binding.statement, node)):
                if statement is not binding.statement:
                    for name in [n for n in names if self._rebinds(statement, n.partition(".module")[0])]:
                        names.discard(name)
                        names.discard(f"{name}.module")
                if not names:
                    break
                for kind, problem, culprit in self._changes(statement, names, binding, node):
                    if any(last_wrap_of.get(name, 0) > culprit.lineno for name in names):
                        continue  # wrapped again after the change: that is the fix
                    if not may_train_after(self.ctx, binding, chain, statement):
                        continue  # no backward can reach the wrapper after the change: nothing to wait for or drift
                    self.report(culprit, problem)

    def _following(self, statement: ast.stmt, scope: ast.AST) -> Iterator[ast.stmt]:
        """The statements that run after this one in its scope, in source order: those after it in its block and in
        every enclosing block, with the statements they hold (not a sibling branch of an `if` it is in). Lazy: the
        caller stops at the first rebinding of the model, so a long scope is not read once per wrap."""
        chain = [*ancestors_of(self.ctx, statement), statement]
        start = chain.index(scope) if scope in chain else 0
        pairs = list(zip(chain[start:], chain[start + 1 :]))
        for parent, child in reversed(pairs):  # the innermost block first: its statements come first in the source
            for field_name in ("body", "orelse", "finalbody"):
                position = position_in_block(parent, field_name, child)
                if position is None:
                    continue
                block = getattr(parent, field_name)
                for index in range(position + 1, len(block)):  # not a slice: a copy of the rest of a long block
                    item = block[index]
                    inner = [n for n in walk_same_scope([item]) if isinstance(n, ast.stmt)]
                    yield from sorted(inner, key=lambda n: (n.lineno, n.col_offset))

    @staticmethod
    def _rebinds(statement: ast.stmt, name: str | None) -> bool:
        targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
        return name is not None and any(dotted(t) == name for t in targets if t is not None)

    def _changes(self, statement: ast.stmt, names: set[str], binding: WrapBinding, scope: ast.AST) -> list[tuple[str, str, ast.AST]]:
        """(kind, message, node) for each move, cast, freeze or edit of the wrapped model in the statement."""
        found: list[tuple[str, str, ast.AST]] = []
        line = binding.call.lineno
        if statement is not binding.statement:
            for switch in grad_switches(statement):
                problem = self._freeze_problem(switch, names, binding, scope)
                if problem is not None:
                    found.append(("freeze", problem, switch.node))
        for node in own_nodes(statement):
            if statement is binding.statement and not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.value is binding.call):
                continue  # the wrap itself: only what is called on its result comes after it
            if isinstance(node, ast.Call) and (self.ctx.qualified_name(node.func) or "").rpartition(".")[2] in _CONVERTERS:
                if any(self._is_the_model(dotted(a) or "", names) for a in node.args):
                    found.append(("edit", self._edit_message("`convert_sync_batchnorm(...)`", line), node))
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                receiver = node.func.value
                spelled = dotted(receiver) if not isinstance(receiver, ast.Call) else None
                wrapped_here = receiver is binding.call
                if spelled is None and not wrapped_here:
                    continue
                if not wrapped_here and not self._is_the_model(spelled, names):  # type: ignore[arg-type]
                    continue
                shown = snippet(node)
                what = "the model" if wrapped_here else f"`{spelled}`"
                if self._casts(node):
                    found.append((
                        "cast",
                        f"`{shown}` casts {what} after DistributedDataParallel wrapped it (line {line}): DDP keeps all-reducing "
                        "the parameters it registered then, not the cast ones, so the ranks drift apart without an error; "
                        "cast the model before wrapping it",
                        node,
                    ))
                elif self._moves(node) and not self._moved_before(binding):
                    found.append((
                        "move",
                        f"`{shown}` moves {what} after DistributedDataParallel wrapped it on the CPU (line {line}): DDP keeps "
                        "all-reducing the parameters it registered then, not the moved ones, so the ranks drift apart without "
                        "an error; move the model first, then wrap it (`DDP(model.to(device), device_ids=[local_rank])`)",
                        node,
                    ))
                elif node.func.attr in _EDITS:
                    found.append(("edit", self._edit_message(f"`{shown}`", line), node))
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                spelled = dotted(target.value) if isinstance(target, ast.Attribute) else None
                if spelled is None or not self._is_the_model(spelled, names):
                    continue
                if target.attr != "requires_grad" and isinstance(statement.value, ast.Call) and self._builds_module(statement.value):  # type: ignore[union-attr]
                    found.append(("edit", self._edit_message(f"`{ast.unparse(target)} = ...`", line), statement))
        return found

    def _freeze_problem(self, switch: GradSwitch, names: set[str], binding: WrapBinding, scope: ast.AST) -> str | None:
        """A freeze that leaves DDP waiting: of a part of the model (DDP waits for the part's gradients while the
        rest's arrive); of the whole model only when a part is unfrozen later. Freezing every parameter, or turning
        them all off and on again (a GAN's discriminator between phases), lets no hook fire or fires them all."""
        if switch.on is not False or not self._is_the_model(switch.receiver, names) or self._tolerates_unused(binding):
            return None
        line = binding.call.lineno
        if switch.on_tensor and switch.receiver in names:
            return None  # `model.requires_grad = False` sets a plain attribute of the module: it freezes nothing
        if not covers_model(switch, binding):
            return self._freeze_message(switch.receiver, line)
        statement = switch.node if isinstance(switch.node, ast.stmt) else next(a for a in reversed(ancestors_of(self.ctx, switch.node)) if isinstance(a, ast.stmt))
        for later in self._following(statement, scope):
            for unfrozen in grad_switches(later):
                if unfrozen.on is not False and self._is_the_model(unfrozen.receiver, names) and not covers_model(unfrozen, binding):
                    return (
                        f"freezes `{switch.receiver}` after DistributedDataParallel wrapped it (line {line}), and line "
                        f"{unfrozen.node.lineno} unfreezes only `{unfrozen.receiver}`: DDP waits for the gradients of the "
                        "parameters left frozen and fails at the next iteration with \"Expected to have finished reduction "
                        "in the prior iteration before starting a new one\"; freeze and unfreeze before wrapping"
                    )
        return None

    @staticmethod
    def _is_the_model(spelled: str, names: set[str]) -> bool:
        """The wrapped model, the wrapper, or a part of either (`ddp.module.backbone`)."""
        return any(spelled == n or spelled.startswith(n + ".") for n in names)

    def _casts(self, call: ast.Call) -> bool:
        method = call.func.attr  # type: ignore[attr-defined]
        if method in _CASTS:
            return True
        if method not in ("to", "type"):
            return False
        for argument in [*call.args, *(k.value for k in call.keywords if k.arg in ("dtype", None))]:
            name = self.ctx.qualified_name(argument) or ""
            if name.startswith("torch.") and name.rpartition(".")[2] in _DTYPES:
                return True
        return False

    def _moves(self, call: ast.Call) -> bool:
        method = call.func.attr  # type: ignore[attr-defined]
        if method in _MOVES:
            return True
        if method != "to" or not (call.args or any(k.arg == "device" for k in call.keywords)):
            return False
        argument = call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "device")
        name = self.ctx.qualified_name(argument) or ""
        return not (name.startswith("torch.") and name.rpartition(".")[2] in _DTYPES | {"float32", "float"})

    def _moved_before(self, binding: WrapBinding) -> bool:
        """Whether the model may already be on its device when wrapped (so that a later move changes nothing): it is
        given `device_ids`, or it is not one that this function builds on the CPU."""
        if binding.inner is None or any(k.arg in ("device_ids", "device_mesh") for k in binding.call.keywords):
            return True
        return not self._built_on_the_cpu(binding)

    @staticmethod
    def _mentions(node: ast.AST, name: str) -> bool:
        spelled = dotted(node)
        return spelled is not None and (spelled == name or spelled.startswith(name + "."))

    def _device_ids_on_cpu(self, binding: WrapBinding) -> None:
        """`DDP(model, device_ids=[rank])` where the function builds `model` itself and never moves it."""
        device_ids = next((k.value for k in binding.call.keywords if k.arg == "device_ids"), None)
        if device_ids is None and len(binding.call.args) > 1:
            device_ids = binding.call.args[1]
        if device_ids is None or isinstance(device_ids, ast.IfExp) or (isinstance(device_ids, ast.Constant) and device_ids.value is None):
            return  # none, or chosen at run time as for a CPU run
        if binding.inner is None or "." in binding.inner or not self._built_on_the_cpu(binding):
            return
        self.report(
            device_ids,
            f"`device_ids` given for `{binding.inner}`, whose parameters are still on the CPU here (it is built in "
            "this function and never moved before the wrap): DistributedDataParallel raises \"ValueError: "
            "DistributedDataParallel device_ids and output_device arguments only work with single-device/multiple-"
            "device GPU modules or CPU modules\"; move the model to its GPU first (`model.to(local_rank)`), or drop "
            "`device_ids` for a CPU run",
        )

    def _built_on_the_cpu(self, binding: WrapBinding) -> bool:
        """The wrapped name's last assignment before the wrap builds a module class (torch's or the project's),
        not on a device, and nothing moves it in between."""
        ancestors = ancestors_of(self.ctx, binding.statement)
        function = next((a for a in reversed(ancestors) if isinstance(a, FUNCTIONS)), None)
        value = local_value(binding.inner, function, binding.call.lineno, None if function else self.ctx.tree)  # type: ignore[arg-type]
        if not isinstance(value, ast.Call) or any(isinstance(n, ast.keyword) and n.arg == "device" for n in ast.walk(value)):
            return False
        if not self._freshly_built(value, ancestors):
            return False  # built by a function, or from modules built elsewhere: they may be on a device
        scope = function if function is not None else self.ctx.tree
        assigned = max(n.lineno for n in ast.walk(scope) if isinstance(n, ast.Assign) and n.value is value)
        for node in ast.walk(scope):
            line = getattr(node, "lineno", 0)
            if not assigned <= line <= binding.call.lineno:
                continue
            if isinstance(node, (ast.With, ast.AsyncWith)) and any("device" in ast.unparse(i.context_expr) for i in node.items):
                return False
            if isinstance(node, ast.Call) and node is not binding.call:
                moves = isinstance(node.func, ast.Attribute) and node.func.attr in _PLACERS and self._mentions(node.func.value, binding.inner)  # type: ignore[arg-type]
                handed = any(isinstance(a, ast.Name) and a.id == binding.inner for a in node.args)
                if moves or handed or "set_default_device" in ast.unparse(node.func):
                    return False
        return True

    def _freshly_built(self, call: ast.Call, ancestors: list[ast.AST]) -> bool:
        """A module class of torch's or the project's, called here; a container only of such calls."""
        qualified = self.ctx.qualified_name(call.func, ancestors)
        built = creates_parameters(qualified, call)
        if built is None:
            return qualified is not None and self.ctx.project.holds_parameters(qualified) is not None
        if qualified is not None and qualified.rpartition(".")[2] in _CONTAINERS:
            parts = [a for argument in call.args for a in (argument.elts if isinstance(argument, (ast.List, ast.Tuple)) else [argument])]
            return all(isinstance(p, ast.Call) and self._freshly_built(p, ancestors) for p in parts)
        return True

    def _builds_module(self, call: ast.Call) -> bool:
        qualified = self.ctx.qualified_name(call.func)
        built = creates_parameters(qualified, call)
        if built is None and qualified is not None:
            built = self.ctx.project.holds_parameters(qualified)
        return bool(built)

    @staticmethod
    def _tolerates_unused(binding: WrapBinding) -> bool:
        """`find_unused_parameters=True` (or `static_graph=True`) marks parameters without a gradient ready."""
        return any(
            k.arg in ("find_unused_parameters", "static_graph", None) and not (isinstance(k.value, ast.Constant) and k.value.value is False)
            for k in binding.call.keywords
        )

    @staticmethod
    def _freeze_message(spelled: str, line: int) -> str:
        return (
            f"freezes `{spelled}` after DistributedDataParallel wrapped it (line {line}): DDP still waits for the frozen "
            "parameters' gradients and fails at the next iteration with \"Expected to have finished reduction in the "
            "prior iteration before starting a new one\"; freeze before wrapping"
        )

    @staticmethod
    def _edit_message(what: str, line: int) -> str:
        return (
            f"{what} changes the model's parameters after DistributedDataParallel wrapped it (line {line}): the new "
            "parameters are never all-reduced and the replaced ones never get a gradient (\"Expected to have finished "
            "reduction in the prior iteration\"); make the change before wrapping, or wrap it again"
        )
