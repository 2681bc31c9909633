"""The `pitfall-lint` command: check (the default), rules, explain."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

import click

from pitfall_lint import __version__
from pitfall_lint.formats import FORMATS

if TYPE_CHECKING:
    from pitfall_lint.config import Config
    from pitfall_lint.diagnostic import Diagnostic
    from pitfall_lint.rules.registry import RuleSpec

# Each command imports what it runs, in its body: `--version`, `--help` and `rules` never pay for the project model,
# the rules' analyses or the checker (a pre-commit run starts this process on every commit).

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as Ruff and the shells exit on Ctrl-C
STDIN = "-"
# What stdin is checked as without --stdin-filename: Python (the rules look at the suffix), in the current folder.
STDIN_NAME = "stdin.py"
# Set by a command that leaves nothing to the interpreter's teardown (see run).
_teardown_spared = False


class _DefaultToCheck(click.Group):
    """`pitfall-lint PATH...` means `pitfall-lint check PATH...`, as `ruff PATH` once did."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = args[0] if args else ""
        # A first word that names no file and is a command misspelt is no path to check: say so, as git does.
        if first.isalpha() and first not in self.commands and not os.path.lexists(first):
            import difflib  # here: a plain check never pays for it

            if first == "help":  # `help`, `help check`: the help of the program, or of the command
                args = [args[1], "--help"] if args[1:2] and args[1] in self.commands else ["--help"]
            elif close := difflib.get_close_matches(first, list(self.commands), n=1):
                _fail(f"unknown command '{first}'; did you mean '{close[0]}'?")
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _require_working_folder() -> None:
    """Paths, the configuration and the reported paths are all found from the current folder: once it is deleted
    (by another shell, a `git checkout`), os.getcwd() fails wherever it is asked."""
    try:
        os.getcwd()
    except FileNotFoundError:
        _fail("the current folder no longer exists (it was deleted); cd into one that does")


def _one_line_errors(command: Callable[..., None]) -> Callable[..., None]:
    """Ctrl-C ends the command with `error: interrupted` and exit 130 (not click's `Aborted!` and exit 1, the code of
    findings), a bug of ours with one `error:` line and exit 2: never a traceback. Workers leave quietly (pool.py),
    and a file being fixed is the old one or the new one (fix/write.py)."""

    @functools.wraps(command)
    def guarded(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
        except BrokenPipeError:
            _reader_gone()
        except (KeyboardInterrupt, Exception) as error:
            if _raised_by_ctrl_c(error):
                click.echo("error: interrupted", err=True)
                sys.exit(EXIT_INTERRUPTED)
            _fail(f"internal error in {command.__name__}: {type(error).__name__}: {error}")

    return guarded


def _reader_gone() -> NoReturn:
    """The program reading the report ended first (`| head`): the run ends quietly with exit 0, as Ruff's does. What
    is still to be written goes nowhere, or the interpreter's last flush would fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(EXIT_CLEAN)


def _raised_by_ctrl_c(error: BaseException | None) -> bool:
    """The interrupt itself, or an error raised while it unwound the stack: libcst's own clean-up raises a KeyError
    when Ctrl-C cuts its code generation short."""
    while error is not None and not isinstance(error, KeyboardInterrupt):
        error = error.__context__
    return error is not None


def _stdin_path(paths: tuple[str, ...], stdin_filename: str | None) -> str | None:
    """The path stdin is checked as, as reported; None when stdin is not read."""
    from pitfall_lint.files import display_path

    if stdin_filename is None and STDIN not in paths:
        return None
    if paths not in ((), (STDIN,)):
        _fail("stdin ('-' or --stdin-filename) is checked alone: name no other path")
    return display_path(stdin_filename or STDIN_NAME)


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pitfall-lint")
def main() -> None:
    """Find PyTorch parallel-training pitfalls (DataParallel, DDP, multiprocessing) before they fail."""


def run() -> NoReturn:
    """The console script and `python -m pitfall_lint`. After a command that leaves nothing to the interpreter's
    teardown (its workers gone, its files written), the process ends without it, as mypy's does (`hard_exit`):
    freeing every object a check built took 30 ms of a cold check of Lightning and 15 ms of a pre-commit run."""
    try:
        main()
    except SystemExit as done:
        if not _teardown_spared or not isinstance(done.code, (int, type(None))) or _teardown_needed():
            raise
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:
            _reader_gone()
        os._exit(done.code or EXIT_CLEAN)
    raise AssertionError("click's main always exits")


def _teardown_needed() -> bool:
    """Whether a thread or a child process still runs (the teardown waits for it or ends it), or a profiler or a
    coverage tracer watches (it writes what it saw at exit)."""
    threading, multiprocessing = sys.modules.get("threading"), sys.modules.get("multiprocessing")
    return (
        sys.getprofile() is not None
        or sys.gettrace() is not None
        or (threading is not None and threading.active_count() > 1)
        or bool(multiprocessing is not None and multiprocessing.active_children())
    )


def _rule_selection(f: Callable[..., None]) -> Callable[..., None]:
    """The options that choose the rules: the same for every command that runs them."""
    for option in reversed((
        click.option("--select", multiple=True, help="Only these codes or prefixes (comma-separated, repeatable; ALL for every rule)."),
        click.option("--extend-select", multiple=True, help="Codes or prefixes to add to the selection."),
        click.option("--ignore", multiple=True, help="Codes or prefixes to leave out."),
        click.option("--preview/--no-preview", default=None, help="Run the preview rules too (new, or below the first-run bar); overrides the configured `preview`."),
        click.option("--config", "config_path", type=click.Path(dir_okay=False, readable=False), help="A pyproject.toml to read instead of the nearest one."),
    )):
        f = option(f)
    return f


def _load_selection(
    config_path: str | None,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    preview: bool | None,
) -> tuple[Config, list[RuleSpec]]:
    """The configuration (the nearest to the current folder) and the rules it and the command line select; raises
    ConfigError. A preview rule named by its code while preview is off gets a warning, as in Ruff."""
    from pitfall_lint.selection import nearest_config, selected_rules

    config = nearest_config(config_path)
    selection = selected_rules(config, _split(select) or None, _split(extend_select), _split(ignore), preview)
    for code in selection.preview_not_run:
        _warn(f"{code} is a preview rule; add --preview to run it")
    return config, selection.rules


@main.command()
# readable=False: an unreadable file gets its PFL000 and the others are still checked.
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text", show_default=True, help="Output format.")
@_rule_selection
@click.option("--exclude", multiple=True, help="Glob patterns of files and folders to skip (replaces the configured list).")
@click.option("--extend-exclude", multiple=True, help="Glob patterns to skip in addition to the configured ones.")
@click.option("--force-exclude", is_flag=True, help="Apply the exclusions to paths named on the command line too (for pre-commit).")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None, help="Skip what .gitignore, .ignore and .git/info/exclude leave out (default: on, or the configured respect-gitignore).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--no-cache", is_flag=True, help="Check every file afresh and leave .pitfall_lint_cache alone.")
@click.option("--show-source", is_flag=True, help="Show the offending lines with a caret under the span and the fix hint.")
@click.option("--statistics", is_flag=True, help="Print the number of findings per rule instead of the findings.")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False), help="Write the report to this file instead of stdout.")
@click.option("--fix", is_flag=True, help="Apply the safe fixes, then report what is left.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff: apply the fixes that can change behaviour too.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff instead of writing them (exit 1 if there is one).")
@click.option("--baseline", "baseline_path", type=click.Path(dir_okay=False, readable=False), help="Report only findings not recorded in this baseline file.")
@click.option("--write-baseline", "write_baseline_path", type=click.Path(dir_okay=False), help="Record today's findings in this file and exit 0.")
@click.option("--project-root", type=click.Path(file_okay=False), help="The folder whose files make up the project (default: the nearest folder with pyproject.toml, setup.py, setup.cfg or .git).")
@click.option("--show-files", is_flag=True, help="List the files that would be checked, one per line, and check nothing.")
@click.option("--stdin-filename", help="Check stdin (also read for the path `-`) as this file: its configuration, project and, with --force-exclude, exclusions; --fix prints the fixed source.")
@_one_line_errors
def check(
    paths: tuple[str, ...],
    output_format: str,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    preview: bool | None,
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    force_exclude: bool,
    respect_gitignore: bool | None,
    config_path: str | None,
    exit_zero: bool,
    no_cache: bool,
    show_source: bool,
    statistics: bool,
    output_file: str | None,
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    baseline_path: str | None,
    write_baseline_path: str | None,
    project_root: str | None,
    show_files: bool,
    stdin_filename: str | None,
) -> None:
    """Check PATHS (files or folders; the current folder by default)."""
    global _teardown_spared
    _teardown_spared = True  # its pools end in with-blocks, its files are written whole before it returns
    import gc
    from pathlib import Path

    from pitfall_lint import baseline
    from pitfall_lint.checking import CheckRun, ProjectSettings, check_by_rules
    from pitfall_lint.config import ConfigError, ConfigResolver, matches
    from pitfall_lint.diagnostic import PARSE_ERROR, SUPPRESSION_CHECKS
    from pitfall_lint.files import MissingPathError, discover, display_path, existing_paths
    from pitfall_lint.ignore_files import TRANSLATIONS
    from pitfall_lint.per_file import CommandLineChoices, PerFileSettings
    from pitfall_lint.pool import WorkerDied
    from pitfall_lint.project.store import FOLDER
    from pitfall_lint.report import Report, writer
    from pitfall_lint.selection import known_codes, nearest_config

    _require_working_folder()
    if statistics and output_format not in ("text", "json"):
        _fail(f"--statistics works with --format text or json, not {output_format}")
    stdin_path = _stdin_path(paths, stdin_filename)
    try:
        start = Path(os.path.abspath(stdin_path)).parent if stdin_path else None  # stdin's configuration is its file's
        config = nearest_config(config_path, start)  # the run's own; each file's is the nearest to it
        TRANSLATIONS.keep_in(None if no_cache or show_files else config.root / FOLDER)  # the ignore files' patterns
        choices = CommandLineChoices(
            _split(select) or None, _split(extend_select), _split(ignore), preview, _split(exclude), _split(extend_exclude)
        )
        configs = ConfigResolver(config, known_codes(), fixed=config_path is not None)
        respected = config.respect_gitignore if respect_gitignore is None else respect_gitignore
        per_file = PerFileSettings(configs, choices, respected, _warn)
        excluder = per_file.excluder
        requested = paths or (".",)
        if stdin_path is None:
            named = existing_paths(requested, _warn)
            files = discover(named, excluder, _warn, force_exclude)
        else:
            named = requested
            files = [] if force_exclude and excluder.excludes(stdin_path) else [stdin_path]
        checked = [display_path(f) for f in files]
        rules = per_file.rules_of(checked)  # every file's configuration read here: a bad one stops the run
    except (ConfigError, MissingPathError) as error:
        _fail(str(error))
    if project_root is not None and not os.path.isdir(project_root):
        _fail(f"{project_root}: --project-root is not a folder")
    settings = ProjectSettings(excluder, config.data_parallel, Path(project_root) if project_root else None, config.target)  # type: ignore[arg-type]
    if not files and not stdin_path:  # stdin left out by --force-exclude: nothing to say, as in Ruff
        _warn("no Python files found under the given paths")
    errors = len(requested) - len(named)  # a missing path: the others are reported, and the run exits 2
    if show_files:
        click.echo("".join(f"{path}\n" for path in sorted(display_path(f) for f in files)), nl=False)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)
    diagnostics: list[Diagnostic] = []
    # Trees hold hundreds of thousands of objects, none in a cycle: at the collector's default pace it read the
    # whole heap again and again (a tenth of a cold run). What cycles there are, it still collects.
    gc.set_threshold(100_000, 20, 100)
    contents = {stdin_path: sys.stdin.buffer.read()} if stdin_path else {}

    def check_run(paths: Sequence[str], contents: dict[str, bytes]) -> CheckRun:
        try:
            return check_by_rules(paths, per_file.rules_for, settings, config.root, not no_cache, contents)
        except WorkerDied as error:  # its files have no result: the run cannot tell what it found
            _fail(str(error))

    run = check_run(checked, contents)
    results = run.results
    if fix or diff:
        from pitfall_lint.fix.session import fix_files  # libcst is loaded only when fixing

        outcome = fix_files(run, rules, unsafe_fixes, diff, per_file.silenced_for)
        errors += outcome.errors
        if diff:
            sys.exit(EXIT_ERROR if errors else EXIT_FINDINGS if outcome.changed_paths else EXIT_CLEAN)
        if stdin_path:  # as Ruff does: the source, fixed or not, on stdout for the editor; the report on stderr
            contents = {stdin_path: outcome.rewritten.get(stdin_path, contents[stdin_path])}
            sys.stdout.buffer.write(contents[stdin_path])
            sys.stdout.flush()
        # Every file is checked again: a rewrite in one file can change what the project tells another.
        again = check_run([r.path for r in results], contents)
        results = again.results
    for result in results:
        if result.internal_error:
            errors += 1
            click.echo(f"error: {result.path}: {result.internal_error}", err=True)
        skipped = per_file.silenced_for(result.path)
        diagnostics.extend(d for d in result.diagnostics if not matches(d.code, skipped))
    diagnostics.sort()
    if write_baseline_path:
        try:
            baseline.write(Path(write_baseline_path), diagnostics)
        except OSError as error:
            _fail(f"{write_baseline_path}: cannot write the baseline: {error.strerror or error}")
        recorded = len(diagnostics)
        click.echo(f"Recorded {recorded} finding{'' if recorded == 1 else 's'} in {write_baseline_path}.", err=True)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)
    hidden = 0
    if baseline_path:
        def reported(path: str, code: str) -> bool:
            return not matches(code, per_file.silenced_for(path))

        try:
            fresh, stale = baseline.compare(Path(baseline_path), diagnostics, [r.path for r in results], reported)
        except baseline.BaselineError as error:
            _fail(str(error))
        hidden, diagnostics = len(diagnostics) - len(fresh), fresh
        if stale:
            entries = f"1 entry of {baseline_path} is" if stale == 1 else f"{stale} entries of {baseline_path} are"
            _warn(f"{entries} no longer found; --write-baseline {baseline_path} drops {'it' if stale == 1 else 'them'}")
    infos = [PARSE_ERROR, *SUPPRESSION_CHECKS, *(rule.info for rule in rules)]
    stream = sys.stderr if stdin_path and fix else sys.stdout
    color = output_file is None and stream.isatty() and "NO_COLOR" not in os.environ
    report = Report(
        diagnostics, infos, len(files), show_source=show_source, color=color, statistics=statistics,
        hidden_by_baseline=hidden, unsafe_fixes=unsafe_fixes,
    )
    if output_file:
        try:
            with open(output_file, "w", encoding="utf-8") as handle:
                writer(output_format)(report, handle)
        except OSError as error:
            _fail(f"{output_file}: cannot write: {error.strerror or error}")
    else:
        writer(output_format)(report, stream)
    if errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if diagnostics and not exit_zero else EXIT_CLEAN)




class _Progress:
    """The run's phase, ranks, steps and elapsed time on one terminal line; nothing when stderr is redirected."""

    def __init__(self) -> None:
        self._live = sys.stderr.isatty()
        self._shown = False

    def __call__(self, status: str) -> None:
        if self._live:
            click.echo(f"\r\033[Kverify: {status}", err=True, nl=False)
            self._shown = True

    def close(self) -> None:
        if self._shown:
            click.echo("\r\033[K", err=True, nl=False)
            self._shown = False


def _interrupt_on_termination() -> None:
    """SIGTERM takes the same way out as Ctrl-C: the run's processes stopped, the scratch folder removed."""

    def interrupt(number: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


@main.command()
@click.argument("path", type=click.Path(readable=False))
@click.argument("script_args", nargs=-1)
@click.option("--nproc", default=2, show_default=True, help="Replicas (DataParallel) or ranks (DDP).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True, help="auto: real GPUs when there are --nproc of them, else the CPU reproduction.")
@click.option("--timeout", default=180.0, show_default=True, help="Seconds before the run is stopped (its processes are killed).")
@click.option("--steps", default=2, show_default=True, help="Optimizer steps per rank before data loading winds down (0: no limit).")
@click.option("--example", default=None, help="Call this function of the file (returns (model, args[, kwargs])) instead of running it.")
@click.option("--allow-network", is_flag=True, help="Let the run use the machine's network (downloads); loopback only otherwise.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_rule_selection
def verify(
    path: str,
    script_args: tuple[str, ...],
    nproc: int,
    device: str,
    timeout: float,
    steps: int,
    example: str | None,
    allow_network: bool,
    output_format: str,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    preview: bool | None,
    config_path: str | None,
) -> None:
    """Run PATH in parallel and confirm its findings with the real error. Arguments after `--` go to the script."""
    from pitfall_lint.checking import ProjectSettings
    from pitfall_lint.config import ConfigError
    from pitfall_lint.files import Excluder, special_kind
    from pitfall_lint.harness.report import write_json, write_text
    from pitfall_lint.harness.verify import HarnessError, VerifyOptions, verify as run_verify

    _require_working_folder()
    if not os.path.lexists(path):
        _fail(f"{path}: no such file or directory")
    kind = special_kind(path)
    if kind is not None:
        _fail(f"{path}: not a regular file ({kind})")  # reading a named pipe would block forever
    try:
        config, rules = _load_selection(config_path, select, extend_select, ignore, preview)
    except ConfigError as error:
        _fail(str(error))
    settings = ProjectSettings(Excluder([*config.exclude, *config.extend_exclude], config.root, config.respect_gitignore), config.data_parallel)  # type: ignore[arg-type]
    options = VerifyOptions(nproc, device, timeout, steps, example, script_args, allow_network)
    progress = _Progress()
    _interrupt_on_termination()
    try:
        report = run_verify(path, options, rules, progress, settings)
    except HarnessError as error:
        progress.close()
        _fail(str(error))
    except KeyboardInterrupt:
        progress.close()
        _fail("interrupted; the run's processes were stopped")
    except Exception as error:  # a bug of ours: one line, never a traceback
        progress.close()
        _fail(f"internal error in verify: {type(error).__name__}: {error}")
    progress.close()
    (write_json if output_format == "json" else write_text)(report, sys.stdout)
    if report.confirmed:
        sys.exit(EXIT_FINDINGS)
    if report.failure:
        _fail(report.failure)
    sys.exit(EXIT_CLEAN)


def _first_run_cell(row: dict | None) -> str:
    """`4/7 57 %`: findings judged true of those judged true or false, and the precision."""
    if row is None or not row["judged"]:
        return "-"
    return f"{row['true']}/{row['judged']} {100 * row['precision']:.0f} %"


@main.command("rules")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_rules(output_format: str) -> None:
    """List every rule: code, name, default state, severity, whether `verify` can confirm it, its fix, whether it
    runs (on, off, or preview: only with --preview) and its first-run precision on repositories never used before."""
    import json

    from pitfall_lint import maturity
    from pitfall_lint.selection import rule_infos

    infos = rule_infos()
    try:
        figures = maturity.first_run_figures()
    except (OSError, ValueError):
        _fail(f"the first-run figures ({maturity.FIRST_RUN.name}) are missing from this installation or unreadable")
    if output_format == "json":
        rows = [
            {"code": i.code, "name": i.name, "summary": i.summary, "severity": i.severity,
             "enabled_by_default": i.enabled_by_default, "verifiable": i.verifiable, "fix": i.fix,
             "preview": i.preview, "first_run": figures.get(i.code)}
            for i in infos
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    width = max(len(i.name) for i in infos)
    first_run = {i.code: _first_run_cell(figures.get(i.code)) for i in infos}
    first_run_width = max(len("first run"), *map(len, first_run.values()))
    click.echo(
        f"{'code':<7} {'name':<{width}} {'default':<7} {'severity':<8} {'verify':<6} {'fix':<6} {'state':<7} "
        f"{'first run':<{first_run_width}} summary"
    )
    for i in infos:
        default = "on" if i.enabled_by_default else "off"
        state = "preview" if i.preview else default
        verify = "yes" if i.verifiable else "no"
        click.echo(
            f"{i.code:<7} {i.name:<{width}} {default:<7} {i.severity:<8} {verify:<6} {i.fix or '-':<6} {state:<7} "
            f"{first_run[i.code]:<{first_run_width}} {i.summary}"
        )


@main.command()
@_one_line_errors
def server() -> None:
    """Run the language server for editors, speaking LSP on stdin and stdout."""
    try:
        from pitfall_lint.server.protocol import serve
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in ("pygls", "lsprotocol"):
            raise
        _fail('the language server needs pygls: pip install "pitfall-lint[server]"')
    sys.exit(serve())


@main.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Print the document of RULE (a code such as PFL101, or a name)."""
    from pitfall_lint.docs import rule_document
    from pitfall_lint.selection import rule_infos

    wanted = rule.strip()
    info = next((i for i in rule_infos() if wanted.upper() == i.code or wanted.lower() == i.name), None)
    if info is None:
        _fail(f"unknown rule '{rule}'; `pitfall-lint rules` lists them")
    document = rule_document(info.code, info.name)
    if document is None:
        _fail(f"the document of {info.code} is missing from this installation")
    click.echo(document, nl=False)
