"""PFL210: moving, casting or editing a model after DistributedDataParallel wrapped it; `device_ids` for a CPU model."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator

from pitfall_lint.analysis.evidence import snippet
from pitfall_lint.analysis.modules import built_by_a_model_zoo, creates_parameters, same_module
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


_DRIFT = "so no gradient is averaged any more and the ranks drift apart without an error"
# What an argument of a builder spells when the builder may place the model itself: `build(cfg, device)`.
_DEVICE_WORDS = re.compile(r"device|cuda|gpu|rank", re.IGNORECASE)


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
            moved = False
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
                    if kind == "move" and moved:
                        continue  # the first move has lost DDP's hooks: moving back does not bring them back
                    if not may_train_after(self.ctx, binding, chain, statement):
                        continue  # no backward can reach the wrapper after the change: nothing to wait for or drift
                    moved = moved or kind == "move"
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
        """Binds the name to something else: not `model = model.cuda()`, which keeps the same module in it."""
        targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
        value = getattr(statement, "value", None)
        if value is not None and dotted(same_module(value)) == name:
            return False
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
            if statement is binding.statement and not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and same_module(node.func.value) is binding.call):
                continue  # the wrap itself: only what is called on its result comes after it
            if isinstance(node, ast.Call) and (self.ctx.qualified_name(node.func) or "").rpartition(".")[2] in _CONVERTERS:
                if any(self._is_the_model(dotted(a) or "", names) for a in node.args):
                    found.append(("edit", self._edit_message("`convert_sync_batchnorm(...)`", line), node))
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                receiver = same_module(node.func.value)  # `model.train().half()` casts the model
                spelled = dotted(receiver) if not isinstance(receiver, ast.Call) else None
                wrapped_here = receiver is binding.call
                if spelled is None and not wrapped_here:
                    continue
                if not wrapped_here and not self._is_the_model(spelled, names):  # type: ignore[arg-type]
                    continue
                shown = snippet(node)
                what = "the model" if wrapped_here else f"`{spelled}`"
                if self._casts(node):
                    found.append(("cast", self._cast_message(shown, what, line), node))
                elif self._moves(node):
                    problem = self._move_problem(node, what, binding)
                    if problem is not None:
                        found.append(("move", problem, node))
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

    def _move_problem(self, call: ast.Call, what: str, binding: WrapBinding) -> str | None:
        """A move that changes the device of the model after the wrap: off the device it was wrapped on, or onto one
        when nothing placed it before."""
        shown, line = snippet(call), binding.call.lineno
        if self._to_the_cpu(call):
            if not self._on_a_device(binding):
                return None
            return (
                f"`{shown}` moves {what} off its device after DistributedDataParallel wrapped it (line {line}): the move "
                f"gives each parameter a new gradient accumulator, and DDP's all-reduce hooks stay on the old ones (moving "
                f"back does not bring them back), {_DRIFT} (pytorch/pytorch#104336); copy the weights instead "
                "(`{k: v.cpu() for k, v in model.state_dict().items()}`), or wrap the model again once it is back"
            )
        placement = self._placement(binding)
        device_ids = self._has_device_ids(binding)
        if placement == "cpu" and not device_ids:
            where, moved = f"on the CPU (line {line})", "the move"
        elif placement == "unplaced":
            where, moved = f"(line {line}), and nothing here placed it before", "for a model still on the CPU the move"
        else:
            return None
        if device_ids:
            return (
                f"`{shown}` moves {what} onto its GPU only after DistributedDataParallel wrapped it with `device_ids` "
                f"{where}: for a model still on the CPU the wrap raises \"ValueError: DistributedDataParallel device_ids and "
                "output_device arguments only work with single-device/multiple-device GPU modules or CPU modules\"; move "
                "the model first, then wrap it (`DDP(model.to(device), device_ids=[local_rank])`)"
            )
        return (
            f"`{shown}` moves {what} onto its device only after DistributedDataParallel wrapped it {where}: {moved} gives "
            f"each parameter a new gradient accumulator, and DDP's all-reduce hooks stay on the old ones, {_DRIFT}; move "
            "the model first, then wrap it (`DDP(model.to(device), device_ids=[local_rank])`)"
        )

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

    def _to_the_cpu(self, call: ast.Call) -> bool:
        """`.cpu()`, `.to("cpu")`, `.to(torch.device("cpu"))`, `.to(device="cpu")`."""
        if call.func.attr == "cpu":  # type: ignore[attr-defined]
            return True
        if call.func.attr != "to":  # type: ignore[attr-defined]
            return False
        target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
        if isinstance(target, ast.Call) and self.ctx.qualified_name(target.func) == "torch.device" and target.args:
            target = target.args[0]
        return isinstance(target, ast.Constant) and isinstance(target.value, str) and target.value.partition(":")[0] == "cpu"

    def _places(self, node: ast.AST) -> bool:
        """A call that puts a module on a device: `.to(device)`, `.cuda()`, `.to_empty(device=...)`, not a cast."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _PLACERS):
            return False
        return node.func.attr != "to" or (self._moves(node) and not self._to_the_cpu(node))

    def _placed_in(self, value: ast.AST) -> bool:
        """`Net().to(device)`, `build(cfg).cuda()`, `Net(device=device)`."""
        return any(self._places(n) or isinstance(n, ast.keyword) and n.arg == "device" for n in ast.walk(value))

    @staticmethod
    def _device_ids(binding: WrapBinding) -> ast.expr | None:
        device_ids = next((k.value for k in binding.call.keywords if k.arg == "device_ids"), None)
        if device_ids is None and len(binding.call.args) > 1:
            device_ids = binding.call.args[1]
        return device_ids

    def _has_device_ids(self, binding: WrapBinding) -> bool:
        """Given `device_ids` (or a device mesh), not chosen at run time (`None if cpu else [rank]`): DDP accepts them
        only for a module on its GPU."""
        device_ids = self._device_ids(binding)
        if any(k.arg == "device_mesh" for k in binding.call.keywords):
            return True
        return device_ids is not None and not isinstance(device_ids, ast.IfExp) and not (isinstance(device_ids, ast.Constant) and device_ids.value is None)

    def _on_a_device(self, binding: WrapBinding) -> bool:
        return self._has_device_ids(binding) or self._placement(binding) == "device"

    def _placement(self, binding: WrapBinding) -> str:
        """Where the model is when DDP wraps it, as far as the wrapping function tells: "device" (moved or built on
        one), "cpu" (a module class it builds and never moves), "unplaced" (a parameter, or what a builder returns
        without being told of a device, that nothing here places), "" (it cannot tell)."""
        wrapped = binding.call.args[0] if binding.call.args else next((k.value for k in binding.call.keywords if k.arg == "module"), None)
        if wrapped is not None and self._placed_in(wrapped):
            return "device"
        inner = binding.inner
        if inner is None or "." in inner:
            return ""
        function = next((a for a in reversed(ancestors_of(self.ctx, binding.statement)) if isinstance(a, FUNCTIONS)), None)
        placed = self._placed_before(binding, function if function is not None else self.ctx.tree)
        if placed is not False:
            return "device" if placed else ""
        if self._built_on_the_cpu(binding):
            return "cpu"
        value = local_value(inner, function, binding.call.lineno, None if function else self.ctx.tree)
        if value is None:
            arguments = function.args if function is not None else None
            parameters = [a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]] if arguments else []
            return "unplaced" if inner in parameters else ""
        return "unplaced" if isinstance(value, ast.Call) and not _DEVICE_WORDS.search(ast.unparse(value)) else ""

    def _placed_before(self, binding: WrapBinding, scope: ast.AST) -> bool | None:
        """Whether the scope places the wrapped model before the wrap: True when it moves it or builds it on a
        device, None when it hands it to a call told of a device (`load(model, device)`), False when neither."""
        inner = binding.inner
        assert inner is not None
        for node in walk_same_scope(getattr(scope, "body", [])):
            if getattr(node, "lineno", binding.call.lineno) >= binding.call.lineno:
                continue
            if isinstance(node, (ast.With, ast.AsyncWith)) and any("device" in ast.unparse(i.context_expr) for i in node.items):
                return True
            if isinstance(node, ast.Assign) and any(dotted(t) == inner for t in node.targets) and self._placed_in(node.value):
                return True
            if not isinstance(node, ast.Call) or node is binding.call:
                continue
            if (self._places(node) and self._mentions(node.func.value, inner)) or "set_default_device" in ast.unparse(node.func):  # type: ignore[attr-defined]
                return True
            handed = any(isinstance(a, ast.Name) and a.id == inner for a in [*node.args, *(k.value for k in node.keywords)])
            if handed and _DEVICE_WORDS.search(ast.unparse(node)):
                return None
        return False

    @staticmethod
    def _mentions(node: ast.AST, name: str) -> bool:
        spelled = dotted(node)
        return spelled is not None and (spelled == name or spelled.startswith(name + "."))

    def _device_ids_on_cpu(self, binding: WrapBinding) -> None:
        """`DDP(model, device_ids=[rank])` where the function builds `model` itself and never moves it."""
        device_ids = self._device_ids(binding)
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
        """A module class of torch's or the project's, or a model zoo's builder, called here; a container only of
        such calls."""
        if built_by_a_model_zoo(self.ctx, call, ancestors):
            return True
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
    def _cast_message(shown: str, what: str, line: int) -> str:
        return (
            f"`{shown}` casts {what} after DistributedDataParallel wrapped it (line {line}): the cast gives each parameter "
            f"a new gradient accumulator, and DDP's all-reduce hooks stay on the old ones, {_DRIFT}; cast the model "
            "before wrapping it"
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
