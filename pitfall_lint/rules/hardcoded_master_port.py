"""PFL306: a fixed rendezvous port collides with any other job (or a stale process) on the same node."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pitfall_lint.analysis.processes import LAUNCHERS, PROCESS_CLASSES, launches_or_builds_processes
from pitfall_lint.analysis.reachability import default_always_taken, never_runs
from pitfall_lint.analysis.scopes import Function, enclosing_function, local_value, module_assignments
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_PORT_VARIABLE = "MASTER_PORT"
# tcp://host:port, optionally followed by a path or query; IPv6 hosts are bracketed.
_TCP_URL = re.compile(r"^tcp://(?:\[[^\]]*\]|[^/:?#]*):(?P<port>\d+)(?:[/?#].*)?$", re.DOTALL)
# Attributes that hold the URL given to init_process_group: `options.init_method`, `args.dist_url` (the ImageNet
# example's option, which research code assigns itself), `cfg.distributed_init_method`.
_URL_ATTRIBUTES = re.compile(r"(.+_)?(init_method|dist_url)")
_INIT_METHOD_POSITION = 1  # init_process_group(backend, init_method, ...)
_STORE_PORT_POSITION = 1  # TCPStore(host_name, port, ...)
_ENVIRONMENT_READS = ("os.environ.get", "os.getenv")  # (name, fallback): a read with a default
_ADVICE = "launch with `torchrun --standalone` (it picks a free port) or find a free one by binding port 0"


def _literal_port(node: ast.AST) -> ast.Constant | None:
    """A port written as a literal, `"12355"` or `12355`; port 0 means "any free port"."""
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
        return None
    text = str(node.value).strip() if isinstance(node.value, (str, int)) else ""
    return node if text.isdigit() and int(text) != 0 else None


def _converted(node: ast.AST) -> ast.AST | None:
    """What `str(x)`, `int(x)` and `f"{x}"` convert: they keep a port a port."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "int"):
        return node.args[0] if len(node.args) == 1 and not node.keywords else None
    if isinstance(node, ast.JoinedStr) and len(node.values) == 1:
        return _converted(node.values[0])
    if isinstance(node, ast.FormattedValue) and node.format_spec is None:
        return node.value
    return None


def _string_parts(node: ast.AST, top: bool = True) -> list[ast.AST] | None:
    """The pieces of a string expression, in order; a piece that is not a literal stands for a placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, ast.JoinedStr):
        return list(node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_parts(node.left, top=False), _string_parts(node.right, top=False)
        return left + right if left is not None and right is not None else None
    # "tcp://{}:23456".format(host) and "tcp://%s:23456" % host: the template holds the port.
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _string_parts(node.func.value, top) if isinstance(node.func.value, ast.Constant) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
        return _string_parts(node.left, top)
    return None if top else [node]


def _parameters(function: Function) -> set[str]:
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    return {a.arg for a in every if a is not None}


def _default(function: Function, parameter: str) -> ast.expr | None:
    """The parameter's default value, None where it has none."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    first_with_default = len(positional) - len(arguments.defaults)
    for index, argument in enumerate(positional):
        if argument.arg == parameter:
            return arguments.defaults[index - first_with_default] if index >= first_with_default else None
    return next((d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if a.arg == parameter), None)


def _may_hold_a_port(value: ast.expr | None) -> bool:
    """A string or number, or a string built from pieces (a URL): what is worth asking the callers about."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (str, int)) and not isinstance(value.value, bool)
    return isinstance(value, (ast.JoinedStr, ast.BinOp))


def _class_field(statement: ast.stmt) -> tuple[str, ast.expr] | None:
    """(name, default) of a class attribute or dataclass field: `port = 1`, `port: int = 1`,
    `port: int = field(default=1)`."""
    if isinstance(statement, ast.AnnAssign) and statement.value is not None:
        target, value = statement.target, statement.value
    elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
    else:
        return None
    if not isinstance(target, ast.Name):
        return None
    if isinstance(value, ast.Call) and _last_name(value.func) == "field":
        value = next((k.value for k in value.keywords if k.arg == "default"), value)
    return target.id, value


def _last_name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _mapping_ports(mapping: ast.Dict) -> list[ast.expr]:
    """The values of the `"MASTER_PORT"` keys of a dict display."""
    return [v for k, v in zip(mapping.keys, mapping.values) if k is not None and _is_port_variable(k)]


def _is_port_variable(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == _PORT_VARIABLE


def _mentions_port_variable(node: ast.AST) -> bool:
    return any(_is_port_variable(n) for n in ast.walk(node))


class HardcodedMasterPort(Rule):
    info = RuleInfo(
        code="PFL306",
        name="hardcoded-master-port",
        summary="A literal rendezvous port (MASTER_PORT, tcp://host:port, TCPStore): a second job on the node fails.",
        severity="warning",
        hint='launch with `torchrun --standalone` (it picks a free port), or bind port 0 on 127.0.0.1 to find a free one',
        verifiable=True,
        preview=True,  # below the first-run bar (bench/fresh): runs with --preview
    )
    # Every flagged form spells one of these: the variable, a tcp:// URL, the store's class, a config's field.
    triggers = (("MASTER_PORT", "tcp://", "TCPStore", "master_port"),)
    subscriptions = (ast.Assign, ast.Call, ast.BoolOp, ast.Dict, ast.ClassDef)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[int] = set()
        # Defaults (`setdefault`, `if "MASTER_PORT" not in os.environ:`) are the port only where nothing else sets
        # the variable: in a file that starts its workers itself.
        self._defaults: list[ast.Constant] = []
        self._starts_workers = False
        # `{"MASTER_PORT": "29500"}` and `MASTER_PORT="29500"` arguments: an environment's entries, the port wherever
        # the mapping reaches `os.environ`, which a file that copies mappings into it may do from anywhere.
        self._entries: list[ast.Constant] = []
        self._copies_mappings = False
        self._sink: ast.AST = ctx.tree  # the statement or call being visited, which would use the port

    def visit(self, node: ast.AST) -> None:
        self._sink = node
        if isinstance(node, ast.Assign):
            self._visit_assign(node)
        elif isinstance(node, ast.Call):
            self._visit_call(node)
        elif isinstance(node, ast.BoolOp):
            self._visit_alternatives(node)
        elif isinstance(node, ast.Dict):
            if not self._updates_environment(self.ctx.ancestors[-1]):  # `os.environ.update({...})`: checked there
                self._visit_mapping(_mapping_ports(node))
        else:
            assert isinstance(node, ast.ClassDef)
            self._visit_class(node)

    # -- a config class: `init_method: str = "tcp://127.0.0.1:23456"`, `master_port: int = 12355`

    def _visit_class(self, node: ast.ClassDef) -> None:
        for statement in node.body:
            field = _class_field(statement)
            if field is None:
                continue
            name, value = field
            if _URL_ATTRIBUTES.fullmatch(name):
                found = self._url_port(value)
            elif name.lower() == "master_port":
                found = self._port_literal(value)
            else:
                continue
            # Only a config that every use builds without the field is the port of every run; one given to a
            # command-line parser (HfArgumentParser, tyro) is the user's to set, as an argparse option is.
            if found is not None and self._runs() and default_always_taken(self.ctx, node, name):
                self._emit(
                    found,
                    f"`{name}` defaults to the fixed port in `{ast.unparse(value)}`, and no use of `{node.name}` "
                    f"sets it: {_ADVICE}",
                )

    # -- os.environ["MASTER_PORT"] = "12355"; options.init_method = "tcp://..."; args.dist_url = "tcp://..."

    def _visit_assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, (ast.Attribute, ast.Name)) and not self._starts_workers:
            # `start_processes = mp.spawn`, called through the variable afterwards
            self._starts_workers = self.ctx.qualified_name(node.value) in LAUNCHERS | PROCESS_CLASSES
        for target in node.targets:
            if isinstance(target, ast.Subscript) and self._is_environ(target.value):
                if _is_port_variable(target.slice):
                    self._check_environment_port(node.value)
                elif not isinstance(target.slice, ast.Constant):
                    self._copies_mappings = True  # `for key, value in variables.items(): os.environ[key] = value`
            elif isinstance(target, ast.Attribute) and _URL_ATTRIBUTES.fullmatch(target.attr):
                self._check_init_method(node.value, target.attr)

    # -- os.environ.update(...), os.putenv(...), init_process_group(init_method=...), TCPStore(host, port)

    def _visit_call(self, node: ast.Call) -> None:
        function = self.ctx.qualified_name(node.func) or ""
        self._starts_workers = self._starts_workers or launches_or_builds_processes(self.ctx, node)
        if function in ("os.environ.update", "os.putenv", "os.environ.setdefault"):
            self._check_environment_call(node, function)
        elif function in _ENVIRONMENT_READS and node.args and _is_port_variable(node.args[0]):
            fallback = next((k.value for k in node.keywords if k.arg == "default"), None)
            fallback = node.args[1] if len(node.args) == 2 else fallback
            if fallback is not None:
                self._check_environment_port(fallback, default=True)
        else:
            self._visit_mapping([k.value for k in node.keywords if k.arg == _PORT_VARIABLE])  # `dict(MASTER_PORT=...)`
        if function.startswith("torch.") and function.rpartition(".")[2] == "TCPStore":
            port = node.args[_STORE_PORT_POSITION] if len(node.args) > _STORE_PORT_POSITION else None
            port = next((k.value for k in node.keywords if k.arg == "port"), port)
            literal = self._port_literal(port) if port is not None else None
            if literal is not None:
                self._report(
                    literal, f"`TCPStore` on the fixed port {literal.value}: {_ADVICE} (`port=0` on the master store)"
                )
        init_method = next((k.value for k in node.keywords if k.arg == "init_method"), None)
        if (
            init_method is None
            and function == "torch.distributed.init_process_group"
            and len(node.args) > _INIT_METHOD_POSITION
        ):
            init_method = node.args[_INIT_METHOD_POSITION]
        if init_method is not None:
            self._check_init_method(init_method)
        environment = next((k.value for k in node.keywords if k.arg == "env"), None)
        if environment is not None:
            self._check_child_environment(environment)

    # -- os.environ.get("MASTER_PORT") or "29500"

    def _visit_alternatives(self, node: ast.BoolOp) -> None:
        if isinstance(node.op, ast.Or) and any(self._reads_port_variable(value) for value in node.values[:-1]):
            self._check_environment_port(node.values[-1], default=True)

    def _reads_port_variable(self, node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and len(node.args) == 1
            and _is_port_variable(node.args[0])
            and self.ctx.qualified_name(node.func) in _ENVIRONMENT_READS
        )

    def _check_environment_call(self, node: ast.Call, function: str) -> None:
        if function in ("os.putenv", "os.environ.setdefault"):
            if len(node.args) == 2 and _is_port_variable(node.args[0]):
                self._check_environment_port(node.args[1], default=function == "os.environ.setdefault")
            return
        values = [k.value for k in node.keywords if k.arg == _PORT_VARIABLE]
        for argument in node.args:
            if isinstance(argument, ast.Dict):
                values += _mapping_ports(argument)
            else:
                self._copies_mappings = True  # `os.environ.update(variables)`
        self._copies_mappings = self._copies_mappings or any(k.arg is None for k in node.keywords)
        for value in values:
            self._check_environment_port(value)

    # -- {"MASTER_PORT": "29500"}: subprocess.Popen(command, env=...), or copied into os.environ

    def _visit_mapping(self, ports: list[ast.expr]) -> None:
        for port in ports:
            literal = self._port_literal(port)
            if literal is not None and self._runs() and not self._in_test_environment():
                self._entries.append(literal)

    def _in_test_environment(self) -> bool:
        """A mapping compared with (`assert env == {...}`) or patched in for a test (`mock.patch.dict(os.environ,
        {...})`, the code under test reading it) is no environment of workers."""
        for ancestor in [*self.ctx.ancestors, self._sink]:
            if isinstance(ancestor, ast.Compare):
                return True
            if isinstance(ancestor, ast.Call) and (
                _last_name(ancestor.func).startswith("assert")
                or (self.ctx.qualified_name(ancestor.func) or "").endswith("patch.dict")
            ):
                return True
        return False

    def _updates_environment(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and self.ctx.qualified_name(node.func) == "os.environ.update"

    def _check_child_environment(self, environment: ast.expr) -> None:
        """`env={"MASTER_PORT": "29500", ...}` given to a call that starts a process (or the name holding it); not
        one a test expects (`popen.assert_called_with(command, env={...})`)."""
        if self._in_test_environment():
            return
        if isinstance(environment, ast.Name):
            environment = self._assigned(environment) or environment
        if isinstance(environment, ast.Dict):
            ports = _mapping_ports(environment)
        elif isinstance(environment, ast.Call) and _last_name(environment.func) == "dict":
            ports = [k.value for k in environment.keywords if k.arg == _PORT_VARIABLE]
        else:
            return
        for port in ports:
            literal = self._port_literal(port)
            if literal is not None:
                message = f"`MASTER_PORT` set to the fixed port {literal.value!r} for a child process: {_ADVICE}"
                self._report(literal, message)

    def _check_environment_port(self, value: ast.expr, default: bool = False) -> None:
        literal = self._port_literal(value)
        if literal is None or not self._runs():
            return
        if default or self._is_conditional_default():
            self._defaults.append(literal)
        else:
            self._report(literal, f"`MASTER_PORT` set to the fixed port {literal.value!r}: {_ADVICE}")

    def finish(self) -> None:
        if self._copies_mappings:
            for literal in self._entries:
                self._emit(
                    literal,
                    f"`MASTER_PORT` set to the fixed port {literal.value!r} in a mapping, and this file copies "
                    f"mappings into `os.environ`: {_ADVICE}",
                )
        if not self._starts_workers:
            return  # a launcher (torchrun) sets MASTER_PORT, or whoever runs the file can: the default is a default
        for literal in self._defaults:
            self._emit(
                literal,
                f"`MASTER_PORT` defaults to the fixed port {literal.value!r}, and this file starts its workers itself, "
                f"so nothing sets the variable before it: {_ADVICE}",
            )

    def _check_init_method(self, value: ast.expr, holder: str = "init_method") -> None:
        if isinstance(value, ast.Name):
            assigned = self._assigned(value)
            found = self._url_port(assigned) if assigned is not None else None
        else:
            found = self._url_port(value)
        if found is not None:
            self._report(
                found, f"`{holder}` names a fixed port (`{ast.unparse(found)}`): {_ADVICE}, or use `env://`"
            )

    def _url_port(self, url: ast.AST) -> ast.AST | None:
        """`"tcp://10.0.0.1:23456"`, `f"tcp://{host}:23456"`, `f"tcp://{host}:{PORT}"` with a literal PORT: the URL,
        or the literal that fills its port."""
        parts = _string_parts(url)
        if not parts:
            return None
        text, filled = "", []
        for part in parts:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                text += part.value
                continue
            literal = self._port_literal(part)
            if literal is None:
                text += "{}"  # a placeholder holds neither ':' nor digits here, so only a literal port matches
            else:
                filled.append((len(text), literal))
                text += str(literal.value).strip()
        match = _TCP_URL.match(text)
        if match is None or int(match["port"]) == 0:
            return None
        return next((literal for at, literal in filled if at == match.start("port")), url)

    def _port_literal(self, value: ast.AST, followed: bool = False) -> ast.Constant | None:
        """The literal port a value is: the literal itself, converted (`str(12355)`, `f"{PORT}"`), or the literal a
        plain variable was last assigned in this function or module (followed one step)."""
        converted = _converted(value)
        if converted is not None:
            return self._port_literal(converted, followed)
        if isinstance(value, ast.Name) and not followed:
            assigned = self._assigned(value)
            return self._port_literal(assigned, followed=True) if assigned is not None else None
        return _literal_port(value)

    def _assigned(self, name: ast.Name) -> ast.AST | None:
        function = enclosing_function(self.ctx.ancestors)
        if function is not None and name.id in _parameters(function):
            # A parameter's default is the caller's to override: the value only where no call does.
            default = _default(function, name.id)
            if not _may_hold_a_port(default) or local_value(name.id, function, name.lineno) is not None:
                return None
            return default if default_always_taken(self.ctx, function, name.id) else None
        assigned = local_value(name.id, function, name.lineno)
        return assigned if assigned is not None else self._module_constant(name.id)

    def _module_constant(self, name: str) -> ast.AST | None:
        """A module-level variable assigned exactly once (`PORT = "12355"`)."""
        assignments = module_assignments(self.ctx.tree).get(name, [])
        return assignments[0].value if len(assignments) == 1 else None

    def _is_conditional_default(self) -> bool:
        """`if "MASTER_PORT" not in os.environ:` (or any test reading it): a default the launcher can override."""
        ancestors: Sequence[ast.AST] = self.ctx.ancestors
        return any(isinstance(a, (ast.If, ast.IfExp, ast.While)) and _mentions_port_variable(a.test) for a in ancestors)

    def _is_environ(self, node: ast.AST) -> bool:
        return self.ctx.qualified_name(node) == "os.environ"

    def _runs(self) -> bool:
        """Whether the use being visited can bind its port: not in a test of an error (`with pytest.raises(...)`),
        where the call raises first, nor in a helper nothing calls."""
        return not never_runs(self.ctx, self._sink, self.ctx.ancestors)

    def _report(self, node: ast.AST, message: str) -> None:
        """Report a port the use being visited binds."""
        if self._runs():
            self._emit(node, message)

    def _emit(self, node: ast.AST, message: str) -> None:
        if id(node) not in self._reported:
            self._reported.add(id(node))
            self.report(node, message)
