"""PFL302: spawn calls `fn(index, *args)`; a function that does not take the index first plus the args fails in
every child, and one that ignores the index while taking a rank from `args` gives every process the same rank."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pitfall_lint.analysis.distributed import SPAWNERS
from pitfall_lint.analysis.evidence import cite
from pitfall_lint.analysis.scopes import enclosing_function, enclosing_method, local_value, self_name
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

# Parameters and values that hold a process's rank or its device (not a node's: `node_rank` is per machine).
_RANK = re.compile(r"(?:local_|global_|process_|proc_|world_)?rank(?:_id)?|gpu(?:_id)?|device_id", re.IGNORECASE)
_ARGS_POSITION = 1  # spawn(fn, args, nprocs, ...), start_processes(fn, args, nprocs, ...)
_NPROCS_POSITION = 2


def _argument(call: ast.Call, name: str, position: int) -> ast.expr | None:
    keyword = next((k.value for k in call.keywords if k.arg == name), None)
    if keyword is not None:
        return keyword
    return call.args[position] if len(call.args) > position else None


def _names(missing: Sequence[str]) -> str:
    """As CPython lists missing parameters: 'a', 'a' and 'b', 'a', 'b', and 'c'."""
    quoted = [f"'{name}'" for name in missing]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def type_error(name: str, positional: Sequence[str], defaults: int, varargs: bool, keyword_only: Sequence[str],
               given: int, exact: bool) -> str | None:
    """The TypeError CPython raises for `name(*given positional arguments)`, None when the call binds.
    `exact`: `given` is the count (not only a lower bound, as with a starred element in args)."""
    takes, required = len(positional), len(positional) - defaults
    if not varargs and given > takes:
        amount = f"from {required} to {takes} positional arguments" if defaults else _plural(takes, "positional argument")
        return f"{name}() takes {amount} but {given} {'was' if given == 1 else 'were'} given"
    if exact and given < required:
        missing = positional[given:required]
        return f"{name}() missing {_plural(len(missing), 'required positional argument')}: {_names(missing)}"
    if keyword_only:
        return f"{name}() missing {_plural(len(keyword_only), 'required keyword-only argument')}: {_names(keyword_only)}"
    return None


def _is_rank_value(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value == 0 and not isinstance(node.value, bool)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return bool(_RANK.fullmatch(name))


class SpawnSignature(Rule):
    info = RuleInfo(
        code="PFL302",
        name="spawn-signature",
        summary="mp.spawn / start_processes of a function that does not take the process index first plus `args`: "
        "a TypeError in every child, or one rank for every process.",
        severity="error",
        hint="spawn calls fn(index, *args): make the index fn's first parameter and pass only the other values in args",
        verifiable=True,
    )
    triggers = (("spawn", "start_processes"),)
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        launcher = self.ctx.qualified_name(node.func)
        if launcher not in SPAWNERS or not node.args:
            return
        signature = self.ctx.project.spawned_signature(node)
        if signature is None:
            return
        path, name, line, kind, positional, defaults, varargs, keyword_only, unread, decorated = signature
        if decorated or kind == "property":
            return
        bound = self._is_bound(node.args[0], kind)
        call = f"`{launcher.rpartition('.')[2]}`"
        where, related = cite(self.ctx, [path, line], f"`{name}` defined")
        passed = _argument(node, "args", _ARGS_POSITION)
        elements = self._elements(passed)
        if elements is None:
            one_value = self._takes_one_value(positional, varargs, bound)
            if passed is not None and self._is_parenthesized(passed) and (one_value or isinstance(passed, ast.Constant)):
                text = ast.unparse(passed)
                self.report(
                    passed,
                    f"`args=({text})` is not a tuple: the parentheses alone make none, so {call} unpacks `{text}` itself "
                    f"into `{name}(index, *{text})`{where}; write `args=({text},)`",
                    related=related,
                )
            return
        fixed = [e for e in elements if not isinstance(e, ast.Starred)]
        given = 1 + len(fixed) + bound
        error = type_error(name, positional, defaults, varargs, keyword_only, given, exact=len(fixed) == len(elements))
        if error is not None:
            if given > len(positional) and fixed and _is_rank_value(fixed[0]) and given == len(positional) + 1:
                hint = f"spawn already passes the process index first: drop `{ast.unparse(fixed[0])}` from args"
            elif given > len(positional):
                hint = "spawn passes the process index first, then the values of args: make the function take exactly those"
            elif keyword_only and given >= len(positional) - defaults:
                hint = "spawn passes no keyword arguments: give them defaults, or make them positional and pass them in args"
            else:
                hint = "pass the missing values in args (spawn adds only the process index before them)"
            self.report(
                node,
                f"{call} calls `{name}(index, *args)` with {len(fixed)}{'+' if len(fixed) < len(elements) else ''} "
                f"value{'' if len(fixed) == 1 else 's'} in args: every child fails with \"TypeError: {error}\"{where}; {hint}",
                related=related,
            )
            return
        self._check_rank_again(node, call, name, positional[bound:], unread, where, related)

    def _check_rank_again(self, node: ast.Call, call: str, name: str, parameters: Sequence[str], unread: Sequence[str],
                          where: str, related: tuple) -> None:
        """fn(_, rank, ...) that ignores the index: every process gets the one `rank` that args holds."""
        if len(parameters) < 2 or parameters[0] not in unread or parameters[1] in unread or not _RANK.fullmatch(parameters[1]):
            return
        nprocs = _argument(node, "nprocs", _NPROCS_POSITION)
        if isinstance(nprocs, ast.Constant) and nprocs.value == 1:
            return
        self.report(
            node,
            f"`{name}` ignores its first parameter `{parameters[0]}`, the process index that {call} passes, and takes "
            f"`{parameters[1]}` from args: every process gets the same {parameters[1]}{where}; use the index as the "
            f"{parameters[1]} (derive a global rank from it) and drop it from args",
            related=related,
        )

    def _is_bound(self, target: ast.expr, kind: str) -> bool:
        """Whether the first parameter is already bound: `self.run` for a method, `cls.run` or `Class.run` for a classmethod."""
        if kind == "class":
            return True
        if kind != "method" or not isinstance(target, ast.Attribute) or not isinstance(target.value, ast.Name):
            return False
        method = enclosing_method(self.ctx.ancestors)
        return method is not None and target.value.id == self_name(method[1])

    def _elements(self, passed: ast.expr | None) -> list[ast.expr] | None:
        """The values `args` holds, None when the source cannot tell."""
        if passed is None:
            return []
        if isinstance(passed, ast.Name):
            function = enclosing_function(self.ctx.ancestors)
            value = local_value(passed.id, function, passed.lineno, self.ctx.tree if function is None else None)
            passed = value if isinstance(value, (ast.Tuple, ast.List)) else passed
        return list(passed.elts) if isinstance(passed, (ast.Tuple, ast.List)) else None

    @staticmethod
    def _takes_one_value(positional: Sequence[str], varargs: bool, bound: bool) -> bool:
        """fn(index, value): what `args=(value)` was meant to pass."""
        return not varargs and len(positional) - bound == 2

    def _is_parenthesized(self, node: ast.expr) -> bool:
        """`(value)`: the text before the expression, across lines, ends with an opening parenthesis."""
        text = self.ctx.text
        before = text.line(node.lineno).encode("utf-8")[: node.col_offset].decode("utf-8", errors="ignore").rstrip()
        line = node.lineno
        while not before and line > 1:
            line -= 1
            before = text.line(line).split("#", 1)[0].rstrip()
        return before.endswith("(")
