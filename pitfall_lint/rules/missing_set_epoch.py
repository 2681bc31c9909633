"""PFL402: a shuffling DistributedSampler whose epochs never call set_epoch repeats one order forever."""

from __future__ import annotations

import ast
import bisect
import builtins

from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.samplers import (
    DISTRIBUTED_SAMPLERS,
    LOADER_SAMPLER_POSITIONS,
    SAMPLER_POSITIONS,
    Flow,
    Ref,
    call_argument,
    called_definitions,
    calls_in,
    describe,
    enclosing_loops,
    follow_sampler,
    is_constant,
    is_set_epoch,
    iteration_sites,
    says_evaluation,
    target_refs,
    uses_loader_framework,
)
from pitfall_lint.analysis.scopes import FUNCTIONS, bindings, enclosing_function, local_value
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_BUILTINS = frozenset(dir(builtins))


def _within(ctx: FileContext, node: ast.AST, tree: ast.AST) -> bool:
    return node is tree or any(ancestor is tree for ancestor in ancestors_of(ctx, node))


def _is_builtin(call: ast.Call) -> bool:
    """`len(sampler)`, `print(sampler)`: a builtin never calls set_epoch."""
    return isinstance(call.func, ast.Name) and call.func.id in _BUILTINS


def _builds_data(call: ast.Call) -> bool:
    """`DataLoader(dataset, sampler=sampler)`, `BatchSampler(sampler, ...)`: they take the sampler, never set its epoch."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    return "sampler" in name.lower() or "loader" in name.lower()


def _scope_of(ctx: FileContext, node: ast.AST) -> ast.AST:
    return enclosing_function(ancestors_of(ctx, node)) or ctx.tree


def _direct_holder(ctx: FileContext, sampler: ast.Call) -> Ref | None:
    """The name or `self.` attribute the sampler itself is assigned to (`sampler = DistributedSampler(...)`)."""
    ancestors = ancestors_of(ctx, sampler)
    while ancestors and isinstance(ancestors[-1], (ast.IfExp, ast.BoolOp)):
        ancestors.pop()
    if ancestors and isinstance(ancestors[-1], ast.Assign) and len(ancestors[-1].targets) == 1:
        refs = target_refs(ctx, ancestors[-1].targets[0], ancestors[:-1])
        return refs[0] if refs else None
    return None


Loop = ast.For | ast.AsyncFor | ast.While


class MissingSetEpoch(Rule):
    info = RuleInfo(
        code="PFL402",
        name="missing-set-epoch",
        summary="A shuffling DistributedSampler iterated over several epochs without set_epoch(epoch) repeats one order.",
        severity="warning",
        verifiable=True,
        fix="safe",
    )
    triggers = (("DistributedSampler",),)
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._samplers: list[ast.Call] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if self.ctx.qualified_name(node.func) in DISTRIBUTED_SAMPLERS:
            self._samplers.append(node)

    def finish(self) -> None:
        if not self._samplers or uses_loader_framework(self.ctx):
            return
        for sampler in self._samplers:
            if is_constant(call_argument(sampler, "shuffle", SAMPLER_POSITIONS["shuffle"]), False):
                continue
            flow = follow_sampler(self.ctx, sampler)
            if self._for_evaluation(sampler):
                continue
            found = self._epoch_loop_without_set_epoch(sampler, flow)
            if found is not None:
                loop, use, is_loader = found
                spelling = self._spelling(sampler, flow, loop, use, is_loader)
                epoch = loop.target.id if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) else None
                if not self._reachable_from(loop, spelling):
                    epoch = None  # the loop is in a caller that knows the loader by another name: no fix
                if self._built_on_one_path(sampler, loop):
                    epoch = None  # the other path leaves None or another sampler, without set_epoch: no fix
                self.report(
                    sampler,
                    f"`DistributedSampler` shuffles, but the loop at line {loop.lineno} iterates `{ast.unparse(use)}` "
                    f"without calling `set_epoch`, so every epoch repeats the same order; call "
                    f"`{spelling}.set_epoch({epoch or 'epoch'})` at the start of each epoch",
                    # Only a `for` loop names its epoch; `for _ in ...` still counts them.
                    fix={"loop": str(loop.lineno), "statement": f"{spelling}.set_epoch({epoch})"} if epoch else None,
                )

    def _reachable_from(self, loop: Loop, spelling: str) -> bool:
        """Whether the spelling's first name is bound where the loop runs (`self`, a parameter, an assignment)."""
        function = enclosing_function(ancestors_of(self.ctx, loop))
        return bindings(function, self.ctx.tree).is_bound_before(spelling.partition(".")[0], loop.lineno)

    def _built_on_one_path(self, sampler: ast.Call, loop: Loop) -> bool:
        """Whether the loop also runs where the sampler is not built: `if distributed: sampler = DistributedSampler(...)`
        or `DistributedSampler(...) if distributed else None` with the loop after the branch (not inside it)."""
        chain = [*ancestors_of(self.ctx, sampler), sampler]
        for parent, child in zip(reversed(chain[:-1]), reversed(chain[1:])):
            if isinstance(parent, FUNCTIONS):
                return False
            if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test and not _within(self.ctx, loop, parent):
                return True
        return False

    def _for_evaluation(self, sampler: ast.Call) -> bool:
        """Evaluation data (`val_sampler = ...`, `DistributedSampler(test_set)`): its order does not matter."""
        dataset = call_argument(sampler, "dataset", SAMPLER_POSITIONS["dataset"])
        holder = _direct_holder(self.ctx, sampler)
        names = [holder.key if holder else "", ast.unparse(dataset) if dataset is not None else ""]
        return says_evaluation(describe(names))

    def _evaluates(self, use: ast.expr) -> bool:
        """An evaluation loader (`val_loader`), or one iterated in an evaluation function (`def evaluate`); for a call
        that returns the loader, the call (`get_loader(eval_set=True)`) or a function that makes it."""
        function = enclosing_function(ancestors_of(self.ctx, use))
        names = [ast.unparse(use), function.name if function else ""]
        return says_evaluation(describe(names))

    def _inside_a_wrapper(self, use: ast.expr) -> bool:
        """`__iter__` of a sampler or loader class built on it: whoever iterates the wrapper owns the epochs."""
        function = enclosing_function(ancestors_of(self.ctx, use))
        return function is not None and function.name.startswith("__") and function.name.endswith("__")

    def _epoch_loop_without_set_epoch(self, sampler: ast.Call, flow: Flow) -> tuple[Loop, ast.expr, bool] | None:
        """The first loop that iterates this sampler (or its loader) with no set_epoch, the use, and whether a loader."""
        seed = call_argument(sampler, "seed", SAMPLER_POSITIONS["seed"])
        uses: list[tuple[ast.expr, bool]] = [(loader, True) for loader in flow.loaders]  # `for batch in DataLoader(...)`
        uses += [(use, True) for ref in flow.loader_refs for use in ref.uses(self.ctx)]
        uses += [(use, False) for ref in flow.sampler_refs for use in ref.uses(self.ctx)]
        for use, is_loader in uses:
            site = iteration_sites(self.ctx, use)
            if site is None or self._evaluates(use) or self._inside_a_wrapper(use):
                continue
            for loop in enclosing_loops(self.ctx, site, follows=lambda call: not self._evaluates(call)):
                if _within(self.ctx, sampler, loop) and seed is not None and not isinstance(seed, ast.Constant):
                    continue  # rebuilt every epoch with a new seed
                if _within(self.ctx, sampler, loop) and self._data_made_in(loop, sampler):
                    continue  # a new dataset each time round: the loop walks datasets, not epochs of one
                if not self._sets_epoch(loop, flow):
                    return loop, use, is_loader
        return None

    @staticmethod
    def _data_made_in(loop: Loop, sampler: ast.Call) -> bool:
        """Whether the sampler's dataset is a variable that the loop assigns before building the sampler."""
        dataset = call_argument(sampler, "dataset", 0)
        if not isinstance(dataset, ast.Name):
            return False
        return any(
            isinstance(node, ast.Name) and node.id == dataset.id and isinstance(node.ctx, ast.Store) and node.lineno <= sampler.lineno
            for node in ast.walk(loop)
        )

    def _spelling(self, sampler: ast.Call, flow: Flow, loop: Loop, use: ast.expr, is_loader: bool) -> str:
        """How the loop can reach the sampler: the name it was assigned to, else through the loader."""
        holder = _direct_holder(self.ctx, sampler)
        if holder is not None and (holder.attribute or holder.scope is _scope_of(self.ctx, loop)):
            latest = None if holder.attribute else self._latest_value(holder, loop.lineno)
            if latest is not None and not _within(self.ctx, sampler, latest):
                return f"{holder.spelling}.sampler"  # rebound to a wrapper: `sampler = BatchSampler(sampler, ...)`
            return holder.spelling
        if not is_loader:  # a sampler built on it, such as a BatchSampler
            return f"{ast.unparse(use)}.sampler"
        by_sampler = any(
            call_argument(loader, "sampler", LOADER_SAMPLER_POSITIONS["sampler"]) is not None for loader in flow.loaders
        )
        return f"{ast.unparse(use)}.sampler" if by_sampler else f"{ast.unparse(use)}.batch_sampler.sampler"

    def _latest_value(self, holder: Ref, before_line: int) -> ast.AST | None:
        """The last value assigned to a name before a line, in its function or at module level (outside functions)."""
        if isinstance(holder.scope, FUNCTIONS):
            return local_value(holder.key, holder.scope, before_line)
        key = ("pfl402-module-level-assignments",)
        if key not in self.ctx.memo:
            found: dict[str, list[tuple[int, ast.AST]]] = {}
            for node in ast.walk(self.ctx.tree):
                if isinstance(node, ast.Assign) and enclosing_function(ancestors_of(self.ctx, node)) is None:
                    for name in dict.fromkeys(t.id for t in node.targets if isinstance(t, ast.Name)):
                        found.setdefault(name, []).append((node.lineno, node.value))
            self.ctx.memo[key] = {name: sorted(entries, key=lambda e: e[0]) for name, entries in found.items()}
        entries = self.ctx.memo[key].get(holder.key, [])  # type: ignore[attr-defined]
        at = bisect.bisect_left(entries, before_line, key=lambda entry: entry[0])
        return entries[at - 1][1] if at else None

    def _sets_epoch(self, loop: ast.AST, flow: Flow) -> bool:
        """A set_epoch call in the loop or its same-file helpers, or the sampler handed to code we cannot see."""
        sampler_names = {(ref.key, ref.attribute) for ref in flow.sampler_refs}
        for call in calls_in(self.ctx, loop):
            if is_set_epoch(call):
                return True
            if called_definitions(self.ctx, call) or _is_builtin(call) or _builds_data(call):
                continue
            for argument in [*call.args, *(k.value for k in call.keywords)]:
                if self._is_sampler_use(argument, sampler_names):
                    return True
        return False

    @staticmethod
    def _is_sampler_use(node: ast.AST, sampler_names: set[tuple[str, bool]]) -> bool:
        if isinstance(node, ast.Name):
            return (node.id, False) in sampler_names
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return (node.attr, True) in sampler_names
        return False
