"""PFL307: since torch 2.0, `torch.distributed.launch` passes `--local-rank=N` (dashed) to the script; a parser
that only knows `--local_rank` rejects it, and torchrun passes no flag at all (only LOCAL_RANK in the environment)."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.distributed import SPAWNERS, launcher_variable_read
from pitfall_lint.analysis.evidence import cite
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

# Also the flags a launch command passes, as the project model reports them ("" for none).
_LEGACY = "--local_rank"
_CURRENT = "--local-rank"
_NO_FLAG = ""
# The DeepSpeed launcher passes `--local_rank=N` (underscored): for its scripts the old spelling is the right one.
_UNDERSCORE_LAUNCHER = b"deepspeed"
_LAUNCH_MODULE = b"torch.distributed.launch"


def _option_strings(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def _reads_argv(call: ast.Call) -> bool:
    """`parse_args()`, `parse_args(None)`, `parse_args(argv)`: not `parse_args([])` or `parse_args(["--x"])`."""
    given = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "args"), None)
    return not isinstance(given, (ast.List, ast.Tuple))


def _required(call: ast.Call) -> bool:
    return any(k.arg == "required" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)


def _tests_a_version(ancestors: list[ast.AST]) -> bool:
    """Inside `if TORCH_MAJOR_VERSION == 1:` (or its else): the option is meant for the launchers of that version."""
    return any(
        isinstance(node, ast.If)
        and any(
            "version" in (n.id if isinstance(n, ast.Name) else n.attr).lower()
            for n in ast.walk(node.test)
            if isinstance(n, (ast.Name, ast.Attribute))
        )
        for node in ancestors
    )


class LegacyLocalRankArgument(Rule):
    info = RuleInfo(
        code="PFL307",
        name="legacy-local-rank-argument",
        summary="An argparse `--local_rank` without the `--local-rank` spelling: torch.distributed.launch passes "
        "`--local-rank=N` since torch 2.0 (\"unrecognized arguments\"), torchrun passes no flag.",
        severity="warning",
        hint='add the dashed spelling, add_argument("--local-rank", "--local_rank", ...), and read LOCAL_RANK from the environment',
        verifiable=True,
    )
    triggers = (("--local_rank",),)
    subscriptions = (ast.Call, ast.Subscript, ast.Compare, ast.Attribute)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._legacy: list[ast.Call] = []
        self._has_current = False
        self._reads_environment = False  # LOCAL_RANK from the environment
        self._reads_flag = False  # `args.local_rank`
        self._starts_itself = False  # mp.spawn: no launcher passes anything
        self._parses: set[str] = set()

    def visit(self, node: ast.AST) -> None:
        if launcher_variable_read(node) == "LOCAL_RANK":
            self._reads_environment = True
        if isinstance(node, ast.Attribute):
            self._reads_flag = self._reads_flag or (node.attr == "local_rank" and isinstance(node.ctx, ast.Load))
            return
        if not isinstance(node, ast.Call):
            return
        if self.ctx.qualified_name(node.func) in SPAWNERS:
            self._starts_itself = True
        if not isinstance(node.func, ast.Attribute):
            return
        method = node.func.attr
        if method == "add_argument":
            options = _option_strings(node)
            if _CURRENT in options:
                self._has_current = True
            elif _LEGACY in options and not _tests_a_version(self.ctx.ancestors):
                self._legacy.append(node)
        elif method in ("parse_args", "parse_known_args", "parse_intermixed_args"):
            self._parses.add(method if _reads_argv(node) else "given")

    def finish(self) -> None:
        data = self.ctx.text.data
        if self._has_current or not self._legacy or self._starts_itself or _UNDERSCORE_LAUNCHER in data.lower():
            return
        if self._parses == {"given"}:
            return  # parsed from a list in the code, never from the command line
        # How the project's shell scripts and documentation launch the file: [document, line, launcher, flag].
        launches = self.ctx.project.launches()
        if launches and all(launch[3] == _LEGACY for launch in launches):
            return  # by the DeepSpeed launcher alone
        dashed = next((launch for launch in launches if launch[3] == _CURRENT), None)
        flagless = next((launch for launch in launches if launch[3] == _NO_FLAG), None)
        # Reported where a launcher of today gets it wrong for sure: the script is started by
        # torch.distributed.launch (its own docstring or comments say so, or a command of the project), it takes its
        # local rank from the flag alone (torchrun passes none), or it requires the flag and a launch passes none.
        documented = dashed is not None or _LAUNCH_MODULE in data
        flag_only = self._reads_flag and not self._reads_environment
        lenient = self._parses == {"parse_known_args"}
        if documented and not (lenient and not flag_only):
            self._report_legacy(lenient, flag_only, dashed)
        elif flagless is not None and any(_required(call) for call in self._legacy):
            self._report_required(flagless)
        elif flag_only:
            self._report_legacy(lenient, flag_only, None)

    def _report_legacy(self, lenient: bool, flag_only: bool, launch: list | None) -> None:
        """Where `python -m torch.distributed.launch` (at `launch`, when a document of the project says so) stops the
        script, or torchrun leaves its flag at the default."""
        where, related = cite(self.ctx, launch, "the launch command")
        what = (
            "which parse_known_args() sets aside, so `local_rank` keeps its default" if lenient
            else "and parsing stops every process with \"error: unrecognized arguments: --local-rank=0\""
        )
        message = f"`--local_rank` without the `--local-rank` spelling: `python -m torch.distributed.launch` passes `--local-rank=<n>` since torch 2.0{where}, {what}"
        if flag_only:
            message += "; torchrun passes no flag at all (only LOCAL_RANK in the environment), so under torchrun `local_rank` keeps its default on every process"
        message += '; add the spelling (`add_argument("--local-rank", "--local_rank", ...)`)'
        if flag_only:
            message += ' and read `int(os.environ["LOCAL_RANK"])`, which every launcher sets'
        for call in self._legacy:
            self.report(call, message, related=related)

    def _report_required(self, launch: list) -> None:
        """A required `--local_rank` under a launcher that passes no flag: parsing stops every process."""
        where, related = cite(self.ctx, launch, "the launch command")
        message = (
            f"`--local_rank` is required, but `{launch[2]}`{where} passes no flag at all (only LOCAL_RANK in the "
            "environment), and parsing stops every process with \"error: the following arguments are required: "
            '--local_rank"; drop `required=True` and read `int(os.environ["LOCAL_RANK"])`, which every launcher sets'
        )
        for call in self._legacy:
            if _required(call):
                self.report(call, message, related=related)
