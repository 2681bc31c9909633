"""PFL501: an optimizer built from a model's parameters before the model is moved to its device."""

from __future__ import annotations

import ast
import bisect
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pitfall_lint.analysis.scopes import assigned_before, enclosing_function, exclusive_branches
from pitfall_lint.analysis.training import dotted, is_optimizer_class, walk_same_scope
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_DEVICE_MOVES = frozenset({"to", "cuda", "xpu"})
_TO_DEVICE = frozenset({"cuda", "xpu"})
# With the overwrite flag every conversion makes new Parameter objects, dtype casts included.
_CONVERSIONS = _DEVICE_MOVES | {"cpu", "half", "float", "double", "bfloat16", "type"}
_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})
# Optimizers whose __init__ creates per-parameter state (torch 2.13: only Adagrad's `state["sum"]`).
_EAGER_STATE = frozenset({"torch.optim.Adagrad", "torch.optim.adagrad.Adagrad"})
_OVERWRITE_FLAG = "set_overwrite_module_params_on_conversion"
# Framework calls that place a model on its device themselves (Accelerate, Fabric, DeepSpeed).
_FRAMEWORK_PLACEMENT = frozenset({"prepare", "prepare_model", "setup", "setup_module", "initialize"})
_DTYPE_KEYWORDS = frozenset({"dtype", "memory_format", "non_blocking", "copy"})
_MAX_DEPTH = 2


@dataclass
class _Optimizer:
    call: ast.Call
    qualified: str
    models: set[str]
    scope: ast.AST | None
    ancestors: list[ast.AST]


@dataclass
class _Move:
    call: ast.Call
    receiver: str
    method: str
    device: bool  # False for a dtype or memory-format conversion
    ancestors: list[ast.AST]
    scope: ast.AST | None


@dataclass
class _ScopeIndex:
    """What one function (or the module's own code) does to models, looked up by name instead of walked per query."""

    moves: dict[str, list[_Move]] = field(default_factory=dict)  # by the receiver's first name, in source order
    receivers: dict[str, set[str]] = field(default_factory=dict)  # the moved receivers, by first name
    # Assignments by the first name of their dotted targets, with the target, in source order.
    assignments: dict[str, list[tuple[str, ast.Assign]]] = field(default_factory=dict)
    placements: list[ast.Call] = field(default_factory=list)  # framework calls that place a model, in source order


def _root(dotted_name: str) -> str:
    return dotted_name.partition(".")[0]


def _related(moved: str, owner: str) -> bool:
    """`model.cuda()` moves `model.encoder`'s parameters; `model.encoder.cuda()` moves some of `model`'s."""
    return moved == owner or owner.startswith(moved + ".") or moved.startswith(owner + ".")


def _assigns_to(assignment: ast.Assign, receiver: str) -> bool:
    """`model = ...`, `model.encoder = ...` or `self.model = ...` for a receiver related to that name."""
    return any((name := dotted(t)) is not None and _related(name, receiver) for t in assignment.targets)


def _walk_unconditional(node: ast.AST) -> list[ast.AST]:
    """The nodes of an expression, leaving out the branches of `a if c else b`: which model it trains is
    decided at run time, often by the same flag that decides which model gets moved."""
    found = [node]
    for child in ast.iter_child_nodes(node):
        if isinstance(node, ast.IfExp) and child is not node.test:
            continue
        found.extend(_walk_unconditional(child))
    return found


class OptimizerBeforeMove(Rule):
    info = RuleInfo(
        code="PFL501",
        name="optimizer-before-move",
        summary="An optimizer built before its model is moved: advisory, but breaks Adagrad and the overwrite flag.",
        severity="info",
        # Nearly every hit is the harmless case (the move keeps the Parameters); see the rule's document.
        enabled_by_default=False,
        hint="build the optimizer after `model.to(device)` (and after any dtype conversion)",
    )
    # An optimizer from some parameters, and a move (other conversions count only under the overwrite flag).
    triggers = (("optim",), ("parameters",), (".to", "cuda", "xpu", _OVERWRITE_FLAG))
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._optimizers: list[_Optimizer] = []
        self._moves: list[_Move] = []
        self._overwrite = False

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _CONVERSIONS:
            receiver = dotted(func.value)
            if receiver is not None:
                device = func.attr in _TO_DEVICE or (func.attr == "to" and not self._dtype_only(node))
                ancestors = list(self.ctx.ancestors)
                self._moves.append(_Move(node, receiver, func.attr, device, ancestors, enclosing_function(ancestors)))
            return
        if (
            isinstance(func, (ast.Attribute, ast.Name))
            and (func.attr if isinstance(func, ast.Attribute) else func.id) == _OVERWRITE_FLAG
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value is True
        ):
            self._overwrite = True
            return
        last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if not last[:1].isupper():
            return  # optimizers are classes; most calls are not, and need no name resolution
        qualified = self.ctx.qualified_name(func)
        if not is_optimizer_class(qualified):
            return
        params = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "params"), None)
        if params is None:
            return
        scope = enclosing_function(self.ctx.ancestors)
        models = self._parameter_owners(params, scope, 0)
        if models:
            self._optimizers.append(_Optimizer(node, qualified or "", models, scope, list(self.ctx.ancestors)))

    def _dtype_only(self, call: ast.Call) -> bool:
        """`.to(torch.float16)`, `.to(dtype=...)`, `.to(memory_format=...)`: no device in the call."""
        if any(k.arg not in _DTYPE_KEYWORDS for k in call.keywords):
            return False
        if not call.args:
            return bool(call.keywords)
        first = call.args[0]
        qualified = self.ctx.qualified_name(first) or ""
        if qualified.count(".") == 1 and qualified.startswith("torch.") and qualified[6:7].islower():
            return True  # torch.float16, torch.bfloat16, torch.channels_last
        name = dotted(first)
        return name is not None and "dtype" in name.rpartition(".")[2].lower()

    def _parameter_owners(self, params: ast.expr, scope: ast.AST | None, depth: int) -> set[str]:
        """`model` for `model.parameters()`, also in param-group lists, filters and local variables."""
        owners: set[str] = set()
        for node in _walk_unconditional(params):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _PARAMETER_METHODS
            ):
                owner = dotted(node.func.value)
                if owner is not None:
                    owners.add(owner)
            elif isinstance(node, ast.Name) and depth < _MAX_DEPTH:
                for value in self._assigned_values(node.id, scope, node.lineno):
                    owners |= self._parameter_owners(value, scope, depth + 1)
        return owners

    def _assigned_values(self, name: str, scope: ast.AST | None, before: int) -> list[ast.expr]:
        value = assigned_before(scope if scope is not None else self.ctx.tree, name, before)
        return [value] if isinstance(value, ast.expr) else []

    def finish(self) -> None:
        for optimizer in self._optimizers:
            move = self._first_move_after(optimizer)
            if move is None:
                continue
            where = f"`{move.receiver}.{move.method}(...)` (line {move.call.lineno})"
            owner = next(o for o in sorted(optimizer.models) if _related(move.receiver, o))
            if optimizer.qualified in _EAGER_STATE and move.device:
                self._report_as(
                    "warning",
                    optimizer.call,
                    f"Adagrad built before {where} keeps its state, created in `__init__`, on the old device: "
                    "`step()` fails with a device mismatch; build it after the move",
                )
            elif self._overwrite:
                self._report_as(
                    "warning",
                    optimizer.call,
                    f"optimizer built before {where} under `set_overwrite_module_params_on_conversion(True)`: the "
                    "move makes new Parameters, so the optimizer updates the old ones and the model never trains; "
                    "build it after the move",
                )
            else:
                self.report(
                    optimizer.call,
                    f"advisory: optimizer built from `{owner}`'s parameters before {where}; harmless for this "
                    "optimizer today (the move keeps the Parameters), but eager-state optimizers such as Adagrad and "
                    "the overwrite flag break it; build it after the move",
                )

    def _index(self, scope: ast.AST | None) -> _ScopeIndex:
        key = ("pfl501-scope-index", id(scope))
        if key not in self.ctx.memo:
            index = _ScopeIndex()
            for move in self._moves_by_scope().get(id(scope), []):
                index.moves.setdefault(_root(move.receiver), []).append(move)
                index.receivers.setdefault(_root(move.receiver), set()).add(move.receiver)
            body = scope.body if scope is not None else self.ctx.tree.body  # type: ignore[attr-defined]
            for node in walk_same_scope(body):
                if isinstance(node, ast.Assign):
                    for target in dict.fromkeys(filter(None, (dotted(t) for t in node.targets))):
                        index.assignments.setdefault(_root(target), []).append((target, node))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if node.func.attr in _FRAMEWORK_PLACEMENT:
                        index.placements.append(node)
            for assignments in index.assignments.values():
                assignments.sort(key=lambda entry: entry[1].lineno)
            index.placements.sort(key=lambda n: n.lineno)
            self.ctx.memo[key] = index
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _moves_by_scope(self) -> dict[int, list[_Move]]:
        key = ("pfl501-moves-by-scope",)
        if key not in self.ctx.memo:
            grouped: dict[int, list[_Move]] = {}
            for move in sorted(self._moves, key=lambda m: (m.call.lineno, m.call.col_offset)):
                grouped.setdefault(id(move.scope), []).append(move)
            self.ctx.memo[key] = grouped
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _assignments_related_to(self, scope: ast.AST | None, receiver: str) -> list[ast.Assign]:
        """Assignments to the receiver or to a name related to it (`model`, `model.encoder`), by line."""
        key = ("pfl501-related-assignments", id(scope), receiver)
        if key not in self.ctx.memo:
            group = self._index(scope).assignments.get(_root(receiver), [])
            self.ctx.memo[key] = list(dict.fromkeys(node for target, node in group if _related(target, receiver)))
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _first_move_after(self, optimizer: _Optimizer) -> _Move | None:
        """The move that first places the model after the optimizer was built, if any.

        A `.cpu()` first means the model was in use already and is making a round trip; a framework call that
        takes the model (`accelerator.prepare(model, ...)`, `fabric.setup(...)`) places it, and whatever
        follows is the framework's business. Dtype casts move nothing and are skipped (unless overwriting).
        """
        placed_at = self._framework_placement(optimizer)
        moves = self._index(optimizer.scope).moves
        start = (optimizer.call.end_lineno or 0, optimizer.call.end_col_offset or 0)
        position = lambda m: (m.call.lineno, m.call.col_offset)  # noqa: E731
        later = []
        for root in {_root(owner) for owner in optimizer.models}:
            group = moves.get(root, [])
            later.append(map(group.__getitem__, range(bisect.bisect_left(group, start, key=position), len(group))))
        receivers = self._index(optimizer.scope).receivers
        related = {
            r
            for root in {_root(o) for o in optimizer.models}
            for r in receivers.get(root, ())
            if any(_related(r, owner) for owner in optimizer.models)
        }
        done: set[str] = set()  # receivers already placed when the optimizer was built, or rebound since
        for move in heapq.merge(*later, key=position):
            if move.receiver in done or move.receiver not in related:
                continue
            if exclusive_branches(optimizer.call, move.call, optimizer.ancestors, move.ancestors):
                continue
            if self._placed_before(move.receiver, optimizer) or self._rebound_between(move.receiver, optimizer, move):
                done.add(move.receiver)  # so is every later move of it
                if done >= related:
                    return None
                continue
            if placed_at is not None and move.call.lineno >= placed_at:
                return None
            if self._overwrite or move.device:
                return move
            if move.method == "cpu":
                return None
        return None

    def _framework_placement(self, optimizer: _Optimizer) -> int | None:
        placements = self._index(optimizer.scope).placements
        first = bisect.bisect_right(placements, optimizer.call.lineno, key=lambda n: n.lineno)
        return next(
            (
                node.lineno
                for node in placements[first:]
                if any(
                    (name := dotted(a)) is not None and any(_related(name, o) for o in optimizer.models)
                    for a in [*node.args, *(k.value for k in node.keywords)]
                )
            ),
            None,
        )

    def _placed_before(self, receiver: str, optimizer: _Optimizer) -> bool:
        """The model was already on its device when the optimizer was built, so a later move is a round trip
        (`.cpu()` to save, then `.to(device)` again): `model = Net().to(device)`, `model.cuda()` before, `device=`."""
        return self._first_placement(optimizer.scope, receiver) < optimizer.call.lineno

    def _first_placement(self, scope: ast.AST | None, receiver: str) -> float:
        """The first line that puts the receiver (or a related name) on a device: a move, or an assignment of a
        value that is moved or built with `device=`."""
        key = ("pfl501-first-placement", id(scope), receiver)
        if key not in self.ctx.memo:
            moves = self._index(scope).moves.get(_root(receiver), [])
            lines = [m.call.lineno for m in moves if m.device and _related(m.receiver, receiver)]
            lines += [
                node.lineno
                for node in self._assignments_related_to(scope, receiver)
                if any(self._places_on_device(n) for n in ast.walk(node.value))
            ]
            self.ctx.memo[key] = min(lines, default=math.inf)
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _places_on_device(self, node: ast.AST) -> bool:
        """`.cuda()`, `.to(device)` or a `device=` argument."""
        if isinstance(node, ast.keyword):
            return node.arg == "device"
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return False
        return node.func.attr in _TO_DEVICE or (node.func.attr == "to" and not self._dtype_only(node))

    def _rebound_between(self, receiver: str, optimizer: _Optimizer, move: _Move) -> bool:
        """`model = Net()` between the two: the moved model is another one (a wrapper of it is not)."""
        assignments = self._assignments_related_to(optimizer.scope, receiver)
        first = bisect.bisect_right(assignments, optimizer.call.lineno, key=lambda n: n.lineno)
        last = bisect.bisect_right(assignments, move.call.lineno, key=lambda n: n.lineno)
        return any(not any(dotted(n) == receiver for n in ast.walk(node.value)) for node in assignments[first:last])

    def _report_as(self, severity: str, node: ast.AST, message: str) -> None:
        """A diagnostic at a higher severity than the rule's default: the cases that really break."""
        self.ctx.report(replace(self.info, severity=severity), node, message)  # type: ignore[arg-type]
