"""PFL308: spawned children cannot import a notebook, so a worker defined in one cannot be found."""

from __future__ import annotations

import ast

from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_LAUNCHERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})


class SpawnFromNotebook(Rule):
    info = RuleInfo(
        code="PFL308",
        name="spawn-from-notebook",
        summary="mp.spawn / start_processes of a function defined in the notebook: the children cannot import it.",
        severity="error",
        hint="move the worker function into a .py module next to the notebook and import it from there",
        verifiable=True,
    )
    triggers = (("spawn", "start_processes"), ("def ",))
    suffixes = (".ipynb",)
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._launches: list[tuple[ast.Call, str, str]] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        launcher = self.ctx.qualified_name(node.func)
        if launcher not in _LAUNCHERS:
            return
        target = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "fn"), None)
        start_method = next((k.value for k in node.keywords if k.arg == "start_method"), None)
        if isinstance(start_method, ast.Constant) and start_method.value == "fork":
            return  # forked children inherit the notebook's functions
        if isinstance(target, ast.Name):
            self._launches.append((node, target.id, launcher.rpartition(".")[2]))

    def finish(self) -> None:
        defined = {s.name for s in self.ctx.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for call, function, launcher in self._launches:
            if function in defined:
                self.report(
                    call,
                    f"`{launcher}` of `{function}`, defined in this notebook: the spawned children cannot import the "
                    f"notebook and die with \"AttributeError: Can't get attribute '{function}' on <module '__main__'\"; "
                    "move the function into a .py module and import it",
                )
