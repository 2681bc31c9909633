"""Whether a DistributedDataParallel wrapper takes part in a backward, and where code switches `requires_grad`.

DDP's reducer hooks each parameter's gradient accumulator and waits for them only once a backward reaches the
wrapper's graph. A wrapper whose parameters are all frozen before its first forward (a DINO teacher wrapped for
SyncBatchNorm), or whose forwards all run without grad, never takes part: nothing it does afterwards to its
parameters can make DDP wait or drift. Rules ask this of a wrap (`takes_part_in_backward`), and of a point after it
(`may_train_after`): a change made once training is over (`model.cpu()` before the final save) harms nothing.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pitfall_lint.analysis.scopes import FUNCTIONS
from pitfall_lint.analysis.training import LOOPS, dotted, runs_without_grad
from pitfall_lint.analysis.wrappers import WrapBinding, wrap_bindings
from pitfall_lint.context import FileContext

_PARAMETER_LISTS = frozenset({"parameters", "named_parameters"})
# Calls on a forward's result that keep no autograd graph back to the wrapper.
_GRAPH_BREAKERS = frozenset({"detach", "item", "tolist", "numpy"})
_DEFINITIONS = (*FUNCTIONS, ast.ClassDef, ast.Lambda)
_BACKWARD_FUNCTIONS = frozenset({"torch.autograd.backward", "torch.autograd.grad"})


@dataclass(frozen=True)
class GradSwitch:
    """`x.requires_grad_(False)`, `x.requires_grad = False`, `for p in x.parameters(): p.requires_grad = False`."""

    node: ast.AST  # the call, the assignment or the loop
    receiver: str  # dotted name of what is switched: `ddp.module.backbone`, `net.bias`
    on: bool | None  # False freezes, True unfreezes, None: a value computed at run time
    selective: bool  # a loop that switches only some of the parameters (under an `if`)
    on_tensor: bool  # `x.requires_grad = v`: an attribute of a tensor (on a module it switches nothing)


def own_nodes(statement: ast.stmt) -> list[ast.AST]:
    """The nodes a statement evaluates itself: a compound statement's header, not the statements it holds."""
    if isinstance(statement, (ast.If, ast.While)):
        return list(ast.walk(statement.test))
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return list(ast.walk(statement.iter))
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [n for item in statement.items for n in ast.walk(item.context_expr)]
    if isinstance(statement, (ast.Try, ast.Match, *_DEFINITIONS)):
        return []
    return list(ast.walk(statement))


def _switch_value(node: ast.expr | None, default: bool | None) -> bool | None:
    if node is None:
        return default
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, bool) else None


def _call_switch(call: ast.Call) -> bool | None:
    value = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "requires_grad"), None)
    return _switch_value(value, True)


def grad_switches(statement: ast.stmt) -> list[GradSwitch]:
    """The switches of `requires_grad` that the statement makes itself (a loop: on what it iterates)."""
    found: list[GradSwitch] = []
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        loop = _loop_switch(statement)
        if loop is not None:
            found.append(loop)
    for node in own_nodes(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            receiver = dotted(node.func.value)
            if receiver is not None:
                found.append(GradSwitch(node, receiver, _call_switch(node), False, False))
    if isinstance(statement, ast.Assign):
        for target in statement.targets:
            receiver = dotted(target.value) if isinstance(target, ast.Attribute) and target.attr == "requires_grad" else None
            if receiver is not None:
                found.append(GradSwitch(statement, receiver, _switch_value(statement.value, None), False, True))
    return found


def _loop_switch(loop: ast.For | ast.AsyncFor) -> GradSwitch | None:
    """`for p in x.parameters(): p.requires_grad = v` (or `for name, p in x.named_parameters(): ...`)."""
    iterated = loop.iter
    if not (isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Attribute) and iterated.func.attr in _PARAMETER_LISTS):
        return None
    receiver = dotted(iterated.func.value)
    variables = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    if receiver is None:
        return None
    for node, selective in _loop_body(loop.body, False):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "requires_grad" and dotted(t.value) in variables for t in node.targets
        ):
            return GradSwitch(loop, receiver, _switch_value(node.value, None), selective, False)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and call.func.attr == "requires_grad_" and dotted(call.func.value) in variables:
                return GradSwitch(loop, receiver, _call_switch(call), selective, False)
    return None


def _loop_body(statements: list[ast.stmt], selective: bool) -> Iterator[tuple[ast.stmt, bool]]:
    """The loop's statements, each with whether it runs only for some parameters (under a branch or after a skip)."""
    for statement in statements:
        if isinstance(statement, ast.Continue):
            selective = True  # `if "head" in name: continue` skips the rest for those parameters
        yield statement, selective
        if isinstance(statement, (ast.If, ast.Try, ast.Match, *LOOPS)):
            for block in ("body", "orelse", "finalbody"):
                yield from _loop_body(getattr(statement, block, []), True)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            yield from _loop_body(statement.body, selective)
        if isinstance(statement, ast.If) and any(isinstance(n, ast.Continue) for n in ast.walk(statement)):
            selective = True


@dataclass(frozen=True)
class _Event:
    """What a statement after the wrap does with the wrapper."""

    kind: str  # "switch", "forward", "escape", "backward"
    line: int
    free: bool = False  # a forward without an autograd graph: under no_grad, or its result detached at once
    switch: GradSwitch | None = None


def _spellings(binding: WrapBinding) -> frozenset[str]:
    """The names that stand for the whole model: the wrapper, its `.module`, the module wrapped."""
    names = {n for n in (binding.wrapper, binding.inner) if n}
    if binding.wrapper:
        names.add(f"{binding.wrapper}.module")
    return frozenset(names)


def covers_model(switch: GradSwitch, binding: WrapBinding) -> bool:
    """Whether the switch sets every parameter of the wrapped model (not a part, not only some)."""
    return switch.receiver in _spellings(binding) and not switch.selective and not switch.on_tensor


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    found = [getattr(statement, block) for block in ("body", "orelse", "finalbody") if isinstance(getattr(statement, block, None), list)]
    return found + [inner.body for inner in [*getattr(statement, "handlers", []), *getattr(statement, "cases", [])]]


def _no_grad_inside(ctx: FileContext, statement: ast.stmt, chain: list[ast.AST], no_grad: bool) -> bool:
    """Whether the statements a compound statement holds run without grad (`with torch.no_grad():`)."""
    return no_grad or (isinstance(statement, (ast.With, ast.AsyncWith)) and runs_without_grad(ctx, [*chain, statement]))


def _statements(ctx: FileContext, statements: list[ast.stmt], chain: list[ast.AST], no_grad: bool) -> Iterator[tuple[ast.stmt, bool]]:
    """Each statement and the statements it holds in source order, with whether it runs without grad (nested
    definitions are yielded, not entered)."""
    for statement in statements:
        yield statement, no_grad
        if isinstance(statement, _DEFINITIONS):
            continue
        inner_no_grad = _no_grad_inside(ctx, statement, chain, no_grad)
        for block in _blocks(statement):
            yield from _statements(ctx, block, chain, inner_no_grad)


# A block, a position in it, whether the block runs without grad, and the outermost loop that holds it.
_Place = tuple[list[ast.stmt], int, bool, ast.AST | None]


def _path_to(ctx: FileContext, chain: list[ast.AST], target: ast.stmt) -> list[_Place] | None:
    """The blocks from the scope's body down to the one that holds `target`, each with the position of the
    statement on the way."""

    def search(block: list[ast.stmt], no_grad: bool, loop: ast.AST | None) -> list[_Place] | None:
        for index in _around_line(ctx, block, target.lineno):
            statement = block[index]
            if statement is target:
                return [(block, index, no_grad, loop)]
            if isinstance(statement, _DEFINITIONS) or not statement.lineno <= target.lineno <= (statement.end_lineno or 0):
                continue
            inner_no_grad = _no_grad_inside(ctx, statement, chain, no_grad)
            inner_loop = loop or (statement if isinstance(statement, LOOPS) else None)
            for inner in _blocks(statement):
                found = search(inner, inner_no_grad, inner_loop)
                if found is not None:
                    return [(block, index, no_grad, loop), *found]
        return None

    return search(getattr(chain[-1], "body", []), runs_without_grad(ctx, chain), None)


def _around_line(ctx: FileContext, block: list[ast.stmt], line: int) -> range:
    """The positions in the block of the statements that may hold a statement starting at `line`, found by bisection:
    a module-level script of thousands of statements was read from its start for each question."""
    key = ("block-lines", id(block))
    starts: list[int] | None = ctx.memo.get(key)  # type: ignore[assignment]
    if starts is None:
        starts = ctx.memo[key] = [statement.lineno for statement in block]
    last = bisect.bisect_right(starts, line) - 1
    first = last
    while first > 0 and (block[first - 1].end_lineno or 0) >= line:  # statements sharing the line (`a = 1; b = 2`)
        first -= 1
    return range(first, last + 1) if last >= 0 else range(0)


class _Unfolding:
    """Events worked out only as far as they are read, the readers sharing what is known: a question is mostly
    answered by the first use of the wrapper after the wrap, and a script's thousands of statements after it were
    read in full for each wrap."""

    def __init__(self, events: Iterator[_Event]) -> None:
        self._events = events
        self._known: list[_Event] = []

    def __iter__(self) -> Iterator[_Event]:
        index = 0
        while True:
            if index == len(self._known):
                event = next(self._events, None)
                if event is None:
                    return
                self._known.append(event)
            yield self._known[index]
            index += 1


def _events(ctx: FileContext, binding: WrapBinding, chain: list[ast.AST]) -> _Unfolding:
    """What the scope does with the wrapper after wrapping it, in source order (`chain`: the scope and its
    ancestors): the statements after the wrap in its block and in every enclosing block, not those of a sibling
    branch of an `if` it is in."""
    key = ("wrapper-events", id(binding.call))
    if key not in ctx.memo:
        ctx.memo[key] = _Unfolding(_each_event(ctx, binding, chain))
    return ctx.memo[key]  # type: ignore[return-value]


def _each_event(ctx: FileContext, binding: WrapBinding, chain: list[ast.AST]) -> Iterator[_Event]:
    wrapper = binding.wrapper
    for block, index, no_grad, _ in reversed(_path_to(ctx, chain, binding.statement) or []):
        for statement, inner_no_grad in _statements(ctx, block[index + 1 :], chain, no_grad):
            line = statement.lineno
            if isinstance(statement, _DEFINITIONS):
                if wrapper and any(isinstance(n, ast.Name) and n.id == wrapper.partition(".")[0] for n in ast.walk(statement)):
                    yield _Event("escape", line)  # a closure or function that reaches the wrapper
                continue
            yield from (_Event("switch", line, switch=s) for s in grad_switches(statement))
            yield from _uses(ctx, statement, wrapper, chain, inner_no_grad)


def _uses(ctx: FileContext, statement: ast.stmt, wrapper: str | None, chain: list[ast.AST], no_grad: bool) -> list[_Event]:
    """Forwards of the wrapper, other readings of it as a value, and backward calls in the statement's own code."""
    nodes = own_nodes(statement)
    forwards = [n for n in nodes if isinstance(n, ast.Call) and wrapper and dotted(n.func) in (wrapper, f"{wrapper}.module", f"{wrapper}.forward")]
    detached = {id(n.func.value) for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _GRAPH_BREAKERS}
    found = [_Event("forward", n.lineno, free=no_grad or id(n) in detached) for n in forwards]
    if wrapper and "." not in wrapper:
        read = {id(n.func) for n in nodes if isinstance(n, ast.Call)} | {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        found += [
            _Event("escape", n.lineno)
            for n in nodes
            if isinstance(n, ast.Name) and n.id == wrapper and isinstance(n.ctx, ast.Load) and id(n) not in read
        ]
    for node in nodes:
        if isinstance(node, ast.Call) and (
            isinstance(node.func, ast.Attribute) and node.func.attr == "backward"
            or (ctx.qualified_name(node.func, chain) or "") in _BACKWARD_FUNCTIONS
        ):
            found.append(_Event("backward", node.lineno))
    return found


def takes_part_in_backward(ctx: FileContext, binding: WrapBinding, chain: Sequence[ast.AST]) -> bool:
    """False when the wrapper surely never takes part in a backward: every parameter is frozen after the wrap and
    before its first forward, and nothing unfreezes any again; or it is a local name that nothing hands on, and
    every forward of it runs without grad or is detached at once. True when the source cannot tell."""
    wrapper = binding.wrapper
    if wrapper is None:
        return True
    frozen = forwards = False
    for event in _events(ctx, binding, list(chain)):
        if event.kind == "switch" and event.switch is not None:
            if event.switch.on is not False:
                if _is_part(event.switch.receiver, binding):
                    return True  # unfrozen again: it may train from then on (a GAN's discriminator)
            elif not forwards and covers_model(event.switch, binding):
                frozen = True
        elif event.kind == "forward":
            forwards = True
            if not frozen and not event.free:
                return True
        elif event.kind == "escape" and not frozen:
            return True
    return not (frozen or (forwards and "." not in wrapper))


def _is_part(spelled: str, binding: WrapBinding) -> bool:
    return any(spelled == n or spelled.startswith(n + ".") for n in _spellings(binding))


def may_train_after(ctx: FileContext, binding: WrapBinding, chain: Sequence[ast.AST], statement: ast.stmt) -> bool:
    """Whether the wrapper may take part in a backward after the statement: a backward, a forward with grad or a
    hand-over of the wrapper follows it in the scope (or in the loop that holds it, whose next turn runs it again),
    or the wrapper is reachable from elsewhere (`self.model`)."""
    if not takes_part_in_backward(ctx, binding, chain):
        return False
    if binding.wrapper is None or "." in binding.wrapper:
        return True
    end = statement.end_lineno or statement.lineno
    path = _path_to(ctx, list(chain), statement)
    loop = path[-1][3] if path else None
    for event in _events(ctx, binding, list(chain)):
        later = event.line > end or (loop is not None and loop.lineno <= event.line <= (loop.end_lineno or loop.lineno))
        if later and (event.kind in ("backward", "escape") or (event.kind == "forward" and not event.free)):
            return True
    return False


def wrap_takes_part_in_backward(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
    """`takes_part_in_backward` for the wrap that `call` makes (ancestors: the call's), True when it is not bound
    to a name (`return DDP(model)`)."""
    index = next((i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], FUNCTIONS)), None)
    chain = list(ancestors[: index + 1]) if index is not None else list(ancestors[:1])
    if not chain:
        return True
    binding = next((b for b in wrap_bindings(ctx, chain[-1]) if b.call is call), None)
    return binding is None or takes_part_in_backward(ctx, binding, chain)
