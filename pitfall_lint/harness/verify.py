"""`pitfall-lint verify`: static check of the project, then the file run in parallel in an enclosure, then verdicts."""

from __future__ import annotations

import ast
import importlib.util
import json
import linecache
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from pitfall_lint.checking import ProjectSettings
from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.files import Excluder
from pitfall_lint.harness.child.events import OVER_ONE_DEVICE, SCRIPT_AS_GIVEN
from pitfall_lint.harness.control import Alone, Control, judge, out_of_time, wants_control
from pitfall_lint.harness.monitor import Monitor
from pitfall_lint.harness.planning import (
    Plan,
    constructor_call,
    enclosing_class,
    hard_coded_devices,
    imported_files,
    model_classes,
    plan_run,
    plan_through_callers,
    with_imported_contract,
)
from pitfall_lint.harness.probes import all_probes
from pitfall_lint.harness.probes.base import Command, Launch, last_line, same_file
from pitfall_lint.harness.project import ProjectFindings, check_project, project_root
from pitfall_lint.harness.reasons import (
    BUDGET_ENDED,
    ECHOES,
    NO_STEP_YET,
    SMALL_BATCH,
    BeyondDevices,
    Stop,
    batch_to_lower,
    beyond_devices,
    crashed_after_the_end,
    ended_by_verifys_collective_timeout,
    final_statement,
    shown_path,
    stop_point,
)
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord, Status
from pitfall_lint.harness.runner import RunOutcome, run_guarded
from pitfall_lint.harness.sandbox import (
    SEAL_UNAVAILABLE,
    UNSEALED_NO_NAMESPACES,
    Enclosure,
    remove_scratch,
)
from pitfall_lint.harness.signed import found_at_run_time
from pitfall_lint.harness.words import counted
from pitfall_lint.notebook import NotebookError, NotebookSource, read_notebook
from pitfall_lint.rules.registry import RuleSpec
from pitfall_lint.suppress import is_suppressed

SHIM = str(Path(__file__).resolve().parent / "shim")
NO_NAMESPACES = "PITFALL_LINT_NO_NAMESPACES"  # "1": run as where namespaces are not permitted (tests of the fallback)


class HarnessError(Exception):
    """A one-line reason why verify could not run at all (exit 2)."""


@dataclass(frozen=True)
class VerifyOptions:
    nproc: int = 2
    device: str = "auto"
    timeout: float = 180.0
    steps: int = 2
    example: str | None = None
    script_args: tuple[str, ...] = ()
    allow_network: bool = False
    selected: frozenset[str] = frozenset()  # the codes of the rules chosen (set by verify from its rules)


@dataclass(frozen=True)
class Verdict:
    finding: Diagnostic
    status: Status
    evidence: Evidence
    mode: str
    seconds: float
    runtime_only: bool = False  # found by the run, with no static finding behind it


@dataclass
class VerifyReport:
    path: str
    plan: Plan
    mode: str
    seconds: float = 0.0
    isolation: str = ""
    sealed: str = ""
    written: list[str] = field(default_factory=list)
    scratch: str = ""
    outcome: str = "not run"
    notes: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    unexplained: list[dict[str, Any]] = field(default_factory=list)
    stop: str | None = None  # where and why the run ended short of its end
    # Why the run could not be judged (timeout, a crash no finding explains, a finding not run), in one line.
    failure: str | None = None
    beyond: BeyondDevices | None = None  # a CUDA device asked for past the virtual ones: how many the code wants

    @property
    def confirmed(self) -> bool:
        return any(v.status == "confirmed" for v in self.verdicts)


def visible_gpus() -> int:
    """CUDA devices this process may use, counted without importing torch."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return 0 if visible.strip() in ("", "-1") else len([d for d in visible.split(",") if d.strip()])
    return len([d for d in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", d)]) if os.path.isdir("/dev") else 0


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _device_mode(options: VerifyOptions, command: Command) -> tuple[str, str]:
    """Real GPUs when each node of the run has enough of them, else virtual ones."""
    gpus, unit = visible_gpus(), _cuda_devices(command.devices) + (" per node" if command.nodes > 1 else "")
    if options.device == "cpu":
        return "cpu", f"{command.devices} virtual {unit} on the CPU (--device cpu)"
    if gpus >= command.devices:
        return "cuda", f"{command.devices} real {unit}"
    if options.device == "cuda":
        raise HarnessError(f"--device cuda needs {command.devices} {unit}, {gpus} visible")
    visible = f"{counted(gpus, 'real GPU')} visible, fewer than {command.devices}" if gpus else "no real GPU visible"
    return "cpu", f"{command.devices} virtual {unit} on the CPU ({visible})"


def _cuda_devices(count: int) -> str:
    return "CUDA device" if count == 1 else "CUDA devices"


def _command(plan: Plan, script: str, options: VerifyOptions, port: int, probed: dict[str, list[Diagnostic]]) -> Command:
    """How the run starts; for a distributed script, the first probe that needs the ranks started another way (another
    launcher, two nodes) chooses."""
    python = sys.executable
    if plan.kind == "model" and plan.collective is not None:
        ranks = Launch(script, options.nproc, port, ("-",)).agent(
            "torch.distributed.run", 1, options.nproc, entry="pitfall_lint.harness.child.run_example")
        return Command(ranks, f"{options.nproc} ranks under torch.distributed.run, each running the file's module in "
                       "DistributedDataParallel", options.nproc)
    if plan.kind in ("example", "model"):
        target = plan.example or "-"
        what = f"{options.nproc}-way DataParallel around " + (f"{plan.example}()" if plan.example else "the file's module")
        return Command([python, "-m", "pitfall_lint.harness.child.run_example", script, target], what, options.nproc)
    if plan.kind == "notebook":
        return Command([python, "-m", "pitfall_lint.harness.child.run_notebook", script], "the notebook's cells in order",
                       options.nproc)
    if plan.kind == "distributed":
        launch = Launch(script, options.nproc, port, options.script_args)
        probes = all_probes()
        wanted = (probes[code].launch(own, launch) for code, own in probed.items() if own)
        return next((w for w in wanted if w is not None), None) or Command(
            launch.agent("torch.distributed.run", 1, options.nproc), f"{options.nproc} ranks under torch.distributed.run",
            options.nproc,
        )
    # A script that starts its own processes runs them as they are: no DataParallel is what runs there.
    what = (f"the script and the processes it starts ({plan.starts})" if plan.starts
            else f"the script, with nn.DataParallel {options.nproc}-way")
    return Command([python, "-m", "pitfall_lint.harness.child.run_script", script, *options.script_args], what,
                   options.nproc)


def _environment(scratch: Path, script: str, root: str, device: str, devices: int, options: VerifyOptions, port: int,
                 plan: Plan) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SHIM, str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    (scratch / "tmp").mkdir(exist_ok=True)
    env.update(
        PITFALL_LINT_TRACE_DIR=str(scratch / "trace"),
        PITFALL_LINT_SCRATCH=str(scratch),
        PITFALL_LINT_SCRIPT=script,
        PITFALL_LINT_PROJECT=root,
        PITFALL_LINT_DEVICE=device,
        PITFALL_LINT_NPROC=str(options.nproc),
        PITFALL_LINT_STEPS=str(options.steps),
        PITFALL_LINT_NETWORK="host" if options.allow_network else "loopback",
        PYTHONUNBUFFERED="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        GLOO_SOCKET_IFNAME="lo",
        NCCL_SOCKET_IFNAME="lo",
        TP_SOCKET_IFNAME="lo",
        TMPDIR=str(scratch / "tmp"),  # torch's launcher makes its torchelastic_* folders here
        HF_DATASETS_OFFLINE="0" if options.allow_network else "1",
        HF_HUB_OFFLINE="0" if options.allow_network else "1",
    )
    if plan.local_rank_option:
        env["PITFALL_LINT_LOCAL_RANK_OPTION"] = plan.local_rank_option
    if plan.rank_options:
        env["PITFALL_LINT_RANK_OPTIONS"] = json.dumps(plan.rank_options)
    if plan.model is not None:
        env["PITFALL_LINT_MODEL"] = json.dumps(plan.model)
    if env.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL":
        env["TORCH_DISTRIBUTED_DEBUG"] = "INFO"  # DETAIL segfaults in DDP set-up on CPU builds
    if device == "cuda" and "CUDA_VISIBLE_DEVICES" not in env:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(devices))
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the virtual devices stand for all of them: no real one gets mixed in
    return env


@dataclass
class _Source:
    """The file verify runs, as Python: a notebook's cells joined, its findings' lines counted in the join."""

    path: str
    tree: ast.Module
    notebook: NotebookSource | None

    def run_line(self, finding: Diagnostic) -> Diagnostic:
        """The finding with its line as the run counts it (in a notebook: the joined cells)."""
        if self.notebook is None or finding.cell is None:
            return finding
        joined = self.notebook.origins.index((finding.cell, finding.line)) + 1
        return replace(finding, line=joined, end_line=joined, cell=None)

    def as_written(self, finding: Diagnostic) -> Diagnostic:
        """A finding the run made, at its line as the user wrote it (in a notebook: its cell, and the line in it)."""
        if self.notebook is None or finding.cell is not None or not same_file(finding.path, self.path):
            return finding
        cell, line = self.notebook.origin(finding.line)
        return replace(finding, line=line, end_line=line, cell=cell)


def _scratch_outside(sealed: list[str]) -> Path:
    """The scratch folder, outside every folder the overlays seal (an overlay cannot hold its own upper layer)."""
    for base in (tempfile.gettempdir(), "/var/tmp", os.path.expanduser("~/.cache")):
        real = os.path.realpath(base)
        if os.path.isdir(real) and os.access(real, os.W_OK) and not any(
                real == os.path.realpath(f) or real.startswith(os.path.realpath(f) + "/") for f in sealed):
            return Path(tempfile.mkdtemp(prefix="pitfall-lint-verify-", dir=real))
    return Path(tempfile.mkdtemp(prefix="pitfall-lint-verify-"))


def _mark_cells(run: RunRecord, source: _Source) -> None:
    """Lines of the notebook, as the run counted them (the cells joined), also given as cell and line for people."""
    assert source.notebook is not None
    run.notebook = source.notebook
    real = os.path.realpath(source.path)
    places = [e for e in run.events if e.get("file") and e.get("line")]
    for event in run.events:
        places += [p for p in (event.get("place"), event.get("user_frame")) if isinstance(p, dict)]
        places += event.get("frames") or []
    places += [frame for frames in run.stacks.values() for frame in frames]  # where each process was when stopped
    for place in places:
        if os.path.realpath(place.get("file") or "") == real and isinstance(place.get("line"), int):
            place["cell"], place["cell_line"] = source.notebook.origin(place["line"])


def _read_source(path: str) -> tuple[bytes, _Source]:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise HarnessError(f"{path}: cannot read: {error.strerror or error}") from None
    notebook = None
    text = data
    if path.endswith(".ipynb"):
        try:
            notebook = read_notebook(data)
        except NotebookError as error:
            raise HarnessError(f"{path}: {error}") from None
        text = notebook.text.encode("utf-8")
        # The lines the run reports are those of the joined cells: that is the text their file name shows.
        linecache.cache[path] = (len(text), None, notebook.text.splitlines(True), path)
        linecache.cache[os.path.realpath(path)] = linecache.cache[path]
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as error:
        raise HarnessError(f"{path}: cannot parse: {getattr(error, 'msg', error)}") from None
    return data, _Source(path, tree, notebook)


def _check_options(options: VerifyOptions) -> None:
    """Numbers no run can use: usage errors, before anything starts."""
    if options.nproc < 2:
        raise HarnessError("--nproc must be at least 2: a pitfall of parallel training needs two replicas or ranks")
    if not options.timeout > 0:  # NaN too
        raise HarnessError("--timeout must be more than 0: the seconds the run is given before it is stopped")
    if options.steps < 0:
        raise HarnessError("--steps must be 0 or more: the optimizer steps per rank before data loading winds down "
                           "(0: no limit)")


# The most virtual devices a run is given again with, where the code asked for a device past those it had.
MOST_VIRTUAL_DEVICES = 8


def verify(
    path: str, options: VerifyOptions, rules: list[RuleSpec], progress: Callable[[str], None] = lambda _: None,
    settings: ProjectSettings | None = None,
) -> VerifyReport:
    """The run, and again with more virtual devices while the code asks for a device index past those of the last
    run (up to MOST_VIRTUAL_DEVICES): the index says how many it was written for, so no advice is needed."""
    report = _verify_once(path, options, rules, progress, settings)
    while (beyond := report.beyond) is not None and report.stop is not None \
            and beyond.count < beyond.wanted <= MOST_VIRTUAL_DEVICES:
        asked = f"the code asked for a CUDA device{beyond.where} beyond the {beyond.count} virtual ones"
        progress(f"running again with {beyond.wanted} virtual CUDA devices: {asked}")
        again = _verify_once(path, replace(options, nproc=beyond.wanted), rules, progress, settings)
        again.notes.insert(0, f"{asked} of the run before ({report.seconds:.1f} s): verify ran it again with "
                           f"{beyond.wanted} (--nproc {beyond.wanted})")
        again.outcome = f"{report.outcome}; run again with {beyond.wanted} virtual devices, {again.outcome}"
        again.seconds += report.seconds
        again.written = report.written + [w for w in again.written if w not in report.written]
        report = again
    return report


def _verify_once(
    path: str, options: VerifyOptions, rules: list[RuleSpec], progress: Callable[[str], None],
    settings: ProjectSettings | None,
) -> VerifyReport:
    if importlib.util.find_spec("torch") is None:
        raise HarnessError("verify needs torch: install a CPU or CUDA build of torch in this environment")
    _check_options(options)
    data, source = _read_source(path)
    plan = plan_run(path, data, source.tree, options.example)
    root, marked = project_root(path)
    settings = settings or ProjectSettings(Excluder((), root))
    if plan.kind in ("example", "model") and settings.data_parallel == "auto":
        # The run wraps the file's module in DataParallel itself: the DataParallel rules see it reached, as by a wrap.
        settings = replace(settings, data_parallel="always")
    progress(f"checking the project {root}")
    project = check_project(root, path, rules, settings, flat=not marked)
    if os.path.realpath(path) in project.errors:
        raise HarnessError(f"{path}: {project.errors[os.path.realpath(path)]}")
    if plan.kind == "model":
        classes = model_classes(path, data, source.tree)
        calls = (constructor_call([name], project.paths, str(project.root)) for name in classes)
        plan = replace(plan, model=next((c for c in calls if c), None) or {"class": classes[0]})
    running = source  # the file run: a helper runs through a script of the project that calls it
    if plan.kind is None and options.example is None and project.model is not None:
        plan, caller = plan_through_callers(project.model.module_callers(path))
        running = _read_source(caller)[1] if caller is not None else source
    # The launch contract is the whole program's: a `--local_rank` or a launcher's pitfall in a module it imports.
    imported = imported_files(running.path, running.tree, project.model) if project.model is not None else []
    running_data = data if running is source else Path(running.path).read_bytes()
    plan = with_imported_contract(plan, running.path, running_data, running.tree, imported) \
        if running.notebook is None else plan
    written_for = hard_coded_devices(running.path, running_data, running.tree) \
        if plan.kind in ("script", "distributed") and running.notebook is None else None
    if written_for is not None and written_for[0] > options.nproc:
        count, line = written_for
        options = replace(options, nproc=count)
        shown = shown_path(running.path)
        devices_note = (f"the script is written for {count} CUDA devices ({shown}:{line}): verify gave it {count} "
                        f"(--nproc {count})")
    else:
        devices_note = None
    probes = all_probes()
    options = replace(options, selected=frozenset(rule.info.code for rule in rules))
    report = VerifyReport(path=path, plan=plan, mode="not run")
    script_findings = [f for f in project.in_file(path) if f.code in probes]
    port = _free_loopback_port()
    launched = script_findings + [f for f in project.in_file(running.path) if f.code in probes and running is not source]
    launched += [f for module in imported for f in project.in_file(module) if f.code in probes]
    probed = {code: [f for f in launched if f.code == code] for code in probes}

    def start(script: str) -> Command:
        return _command(plan, script, options, port, probed)

    script = os.path.abspath(running.path)
    device, device_note = _device_mode(options, start(script))
    if plan.kind is None:
        report.verdicts = [Verdict(f, "not-run", Evidence(plan.reason), "not run", 0.0) for f in script_findings]
        report.failure = f"{path}: {plan.reason}"
        return report
    report.mode = f"{plan.kind}: {start(script).what}; {device_note}"
    runnable = {id(f): source.run_line(f) for file in project.by_file.values() for f in file if f.code in probes}
    findings = {id(f): f for file in project.by_file.values() for f in file if f.code in probes}
    about_script = {"PITFALL_LINT_PROJECT_FLAT": "1"} if not marked else {}
    if not os.path.isabs(running.path):
        about_script[SCRIPT_AS_GIVEN] = running.path  # the script's sys.argv[0], spelt as `python PATH` would have it
    # The flagged lines of the file verified and the file run: the step budget does not end a run short of them.
    flagged = frozenset((os.path.realpath(f.path), f.line) for f in runnable.values()
                        if same_file(f.path, source.path) or same_file(f.path, running.path))
    enclosed = _Enclosed(str(root), device, options, port, _conditions(findings, runnable, frozenset()), progress,
                         about_script, flagged)
    started, budget = time.monotonic(), options.timeout
    outcome, run, enclosure, report.written = enclosed.run(plan, start, script)
    bound = batch_to_lower([b for e in run.of("arguments") for b in e.get("bounds", [])], options.script_args) \
        if outcome.stopped and outcome.stopped.startswith(NO_STEP_YET) else None
    enclosed = replace(enclosed, lower_batch=False)  # once: the run again, and the runs after it, go as they go
    if bound is not None:
        # The script's own option, so that whatever it computes from its batch size agrees with the batches.
        options = replace(options, script_args=(*options.script_args, bound["option"], str(SMALL_BATCH)),
                          timeout=max(round(options.timeout - outcome.seconds), 1))
        enclosed = replace(enclosed, options=options)
        why = f"{outcome.stopped} (the script's default) on this machine"
        progress(f"running again with {bound['option']} {SMALL_BATCH}: {why}")
        outcome, run, enclosure, written = enclosed.run(plan, start, script)
        report.written += [w for w in written if w not in report.written]
        report.notes.append(f"verify ran the script again with {bound['option']} {SMALL_BATCH}: {why}")
    report.scratch = str(enclosure.scratch)
    report.notes += [devices_note] if devices_note else []
    stop = _conclude(report, run, outcome, enclosure, options, project, source, running, findings, runnable, str(root))
    ended = run  # the run `stop` is about
    lifted: dict[str, str] = {}  # the probes whose conditions the later runs went without, with how
    while (lifting := _lift_confirmed(report, probed, lifted)) is not None:
        run = _run_again(report, lifting, lifted, enclosed, plan, probed, script, project, source, running, findings,
                         runnable)
        lifted |= lifting
    _probe_unexercised(report, run, enclosed, project, runnable, running.path, device_note)
    if stop is not None and wants_control(stop, ended, report.confirmed, report.unexplained):
        _control_run(report, stop, ended, enclosed, plan, script, source, running,
                     int(budget - (time.monotonic() - started)))
    return report


def _control_run(report: VerifyReport, stop: Stop, run: RunRecord, enclosed: _Enclosed, plan: Plan, script: str,
                 source: _Source, running: _Source, left: int) -> None:
    """The failure no finding explains, run again alone (one CUDA device, or a world size of 1), in what is left of
    --timeout, with none of the probes' conditions: failing the same way, it is the code's own error; getting past
    the line, a parallel failure."""
    ranks = plan.kind == "distributed" or plan.starts is not None or plan.collective is not None
    alone = Alone.of(ranks, enclosed.options.nproc)
    if left < 1:
        _tell(report, stop, run, out_of_time(stop, alone, f"none of it was left for a control run {alone.one}",
                                             f"no control run {alone.one}: the --timeout was spent"))
        return
    options = replace(enclosed.options, nproc=1, timeout=left)
    alone_there = {OVER_ONE_DEVICE: "1"}
    if enclosed.device == "cuda":
        alone_there["CUDA_VISIBLE_DEVICES"] = _first_visible_gpu()
    control = replace(enclosed, options=options, requested=alone_there, lower_batch=False)
    enclosed.progress(f"running again {alone.one} (--nproc 1): the run failed in a way no finding explains")
    outcome, record, _, written = control.run(plan, partial(_command, plan, options=options, port=enclosed.port,
                                                            probed={}), script)
    if source.notebook is not None:
        _mark_cells(record, source)
    told = judge(stop, run, record, stop_point(record, running.path, enclosed.root, not options.allow_network,
                                               options.timeout, final_statement(running.tree)), alone, outcome.seconds)
    report.seconds += outcome.seconds
    report.outcome += f"; run again {alone.one}, {_describe_outcome(outcome, options.timeout)}"
    report.written += [w for w in written if w not in report.written]
    _tell(report, stop, run, told)


def _tell(report: VerifyReport, stop: Stop, run: RunRecord, told: Control) -> None:
    """What the control run told (or that none could run), in the report: its note, the stop and the verdicts of the
    lines that never ran as they now read, and whether the failure is a parallel one."""
    report.notes.append(told.note)
    if told.stop != stop:
        before, after = stop.sentence(), told.stop.sentence()
        report.stop = after
        report.verdicts = [replace(v, evidence=replace(v.evidence, mechanism=v.evidence.mechanism.replace(before, after)))
                           if v.status == "not-run" else v for v in report.verdicts]
        report.failure = _run_failure(run, report, told.stop)
    if told.parallel_only:
        error = run.errors[stop.error] if stop.error is not None else {}
        key = (error.get("type"), last_line(error.get("message")))
        failure = next((f for f in report.unexplained if (f["type"], f["message"]) == key), report.unexplained[0])
        failure["parallel_only"] = True


def _first_visible_gpu() -> str:
    """The first of the real GPUs the run may use: the control run gets that one alone."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return visible.split(",")[0].strip() if visible.strip() not in ("", "-1") else "0"


def _conditions(findings: dict[int, Diagnostic], runnable: dict[int, Diagnostic], lifted: frozenset[str]) -> dict[str, str]:
    """What the probes set up for the run (a held port, a debug flag), but those of the probes lifted."""
    requested: dict[str, str] = {}
    for code, probe in all_probes().items():
        if code not in lifted:
            requested.update(probe.environment([runnable[i] for i, f in findings.items() if f.code == code]))
    return requested


def _lift_confirmed(report: VerifyReport, probed: dict[str, list[Diagnostic]],
                    lifted: dict[str, str]) -> dict[str, str] | None:
    """The probes whose conditions made the run fail on purpose and whose findings that confirmed, each with how a
    run goes without them, when other findings of the file never got to run; None when there is nothing to run again
    for."""
    probes = all_probes()
    confirmed = {v.finding.code for v in report.verdicts if v.status == "confirmed"} - lifted.keys()
    lifting = {code: how for code in sorted(confirmed) if (how := probes[code].lifted(probed.get(code, []))) is not None}
    waiting = any(v.status == "not-run" and v.finding.code not in lifting for v in report.verdicts)
    return lifting if lifting and waiting else None


def _run_again(report: VerifyReport, lifting: dict[str, str], lifted: dict[str, str], enclosed: _Enclosed, plan: Plan,
               probed: dict[str, list[Diagnostic]], script: str, project: ProjectFindings,
               source: _Source, running: _Source, findings: dict[int, Diagnostic],
               runnable: dict[int, Diagnostic]) -> RunRecord:
    """A confirmation that ended the run must not cost the other findings theirs: the run again without the conditions
    of the probes confirmed (the held port, the second node), judging the findings the earlier runs left; returns
    what the new run recorded."""
    settled = frozenset(lifted | lifting)
    done = [v for v in report.verdicts if v.finding.code in settled]
    left = {key: f for key, f in findings.items() if f.code not in settled}
    unprobed = {code: ([] if code in settled else own) for code, own in probed.items()}
    again = replace(enclosed, requested=_conditions(left, runnable, settled))
    start = partial(_command, plan, options=enclosed.options, port=enclosed.port, probed=unprobed)
    how = " and ".join((lifted | lifting).values())
    enclosed.progress(f"running again {how}: the {' and '.join(lifting)} confirmation ended the run")
    outcome, run, enclosure, written = again.run(plan, start, script)
    command = start(script)
    second = VerifyReport(path=report.path, plan=plan,
                          mode=f"run again {how}: {command.what}; {_device_mode(enclosed.options, command)[1]}")
    _conclude(second, run, outcome, enclosure, enclosed.options, project, source, running, left, runnable, again.root)
    report.verdicts = done + second.verdicts
    report.notes += [n for n in second.notes if n not in report.notes]
    report.notes.append(f"the {' and '.join(lifting)} confirmation ended the run: verify ran the script again {how} "
                        f"({outcome.seconds:.1f} s) for the other findings")
    report.written += [w for w in written if w not in report.written]
    report.seconds += second.seconds
    report.outcome += f"; run again, {second.outcome}"
    report.stop, report.unexplained, report.failure = second.stop, second.unexplained, second.failure
    report.beyond = second.beyond
    return run


@dataclass(frozen=True)
class _Enclosed:
    """How each run of one verify starts: in an enclosure of its own, with the same devices, port and conditions."""

    root: str
    device: str
    options: VerifyOptions
    port: int
    requested: dict[str, str]
    progress: Callable[[str], None]
    about_script: dict[str, str]  # what every run is told of the script: its path as typed, a project with no marker
    flagged: frozenset[tuple[str, int]] = frozenset()  # (real path, line) of the findings a run should reach
    lower_batch: bool = True  # a run with no step may be stopped to run again with a small batch

    def run(self, plan: Plan, start: Callable[[str], Command],
            script: str) -> tuple[RunOutcome, RunRecord, Enclosure, list[str]]:
        """The run, what it recorded, its enclosure, and the files it wrote there (none of them kept)."""
        home = os.path.expanduser("~")
        scratch = _scratch_outside([self.root, os.getcwd(), home])
        try:
            (scratch / "trace").mkdir()
            enclosure = Enclosure.around(scratch, [self.root, os.getcwd()], home, not self.options.allow_network)
            requested = {**self.about_script, **self.requested}
            monitor = Monitor(scratch / "trace", self.options.steps, self.flagged, self.options.timeout,
                              self.options.script_args if self.lower_batch else None)
            outcome = _run(enclosure, plan, start, script, self.root, self.device, self.options, self.port,
                           requested, scratch, self.progress, monitor)
            run = RunRecord.read(script, scratch / "trace", outcome.output, outcome.returncode, outcome.timed_out,
                                 enclosure.outside, outcome.stopped, outcome.stopping_since)
            written = enclosure.written()
        finally:
            remove_scratch(scratch)
        if outcome.interrupted:
            raise KeyboardInterrupt
        return outcome, run, enclosure, written


def _conclude(report: VerifyReport, run: RunRecord, outcome: RunOutcome, enclosure: Enclosure, options: VerifyOptions,
              project: ProjectFindings, source: _Source, running: _Source, findings: dict[int, Diagnostic],
              runnable: dict[int, Diagnostic], root: str) -> Stop | None:
    """From what the run recorded: the verdicts, the failures nothing explains, where it stopped short, and why (the
    stop, returned). `source` is the file verified, `running` the file run (the same, or a script that calls it)."""
    probes = all_probes()
    report.seconds = outcome.seconds
    report.isolation = enclosure.status.get("network", "")
    report.sealed = _describe_seal(enclosure)
    report.outcome = _describe_outcome(outcome, options.timeout)
    report.notes += _notes(run, options)
    if source.notebook is not None:
        _mark_cells(run, source)
    stop = stop_point(run, running.path, root, not options.allow_network, options.timeout, final_statement(running.tree))
    explained, ended_by_finding = _judge(report, project, source, findings, runnable, run, report.plan, stop, probes,
                                         {code for code in probes if code in options.selected}, outcome)
    if ended_by_finding:
        stop = None  # the run ended with the failure a finding explains: that is the verdict, not a short run
    if stop is not None and stop.text.startswith(BUDGET_ENDED):
        report.outcome = "ran to the end of its step budget" + report.outcome.removeprefix("stopped early")
        if not any(v.status == "not-run" for v in report.verdicts):  # every line it had to reach, reached
            report.notes.append(stop.sentence())
            stop = None
    report.stop = stop.sentence() if stop else None
    after_the_end = crashed_after_the_end(run)
    report.notes += list(after_the_end.values())
    report.unexplained = _unexplained(run, explained | ended_by_verifys_collective_timeout(run) | set(after_the_end))
    report.beyond = beyond_devices(report.unexplained, run)
    unprobed = [f for f in project.in_file(source.path) if f.code not in probes]
    if report.unexplained and unprobed:
        report.notes += [f"{_at(f)} has a {f.code} finding, which verify has no probe for: it may explain the failure"
                         for f in unprobed[:3]]
    report.failure = _run_failure(run, report, stop)
    return stop


def _probe_unexercised(report: VerifyReport, run: RunRecord, enclosed: _Enclosed, project: ProjectFindings,
                       runnable: dict[int, Diagnostic], script: str, device_note: str) -> None:
    """Each module class the script wrapped in nn.DataParallel and never called, with findings no run exercised: built
    as the script builds it, run N-way directly after the script; its verdicts say that run gave them."""
    if report.stop is not None or report.plan.kind not in ("script", "notebook"):
        return
    probes = all_probes()
    called = {e["module"] for e in run.of("dp-called")}
    wraps = {(e["module"], os.path.realpath(e["defined_in"])): e for e in run.of("dp-wrapped") if e["module"] not in called}
    unexercised: dict[tuple[str, str], list[int]] = {}
    for index, verdict in enumerate(report.verdicts):
        probe, finding = probes[verdict.finding.code], verdict.finding
        cls = enclosing_class(finding.path, finding.line) if verdict.status == "not-run" and "model" in probe.kinds else None
        if cls is not None and (cls, os.path.realpath(finding.path)) in wraps:
            unexercised.setdefault((cls, os.path.realpath(finding.path)), []).append(index)
    for (cls, file), indices in unexercised.items():
        wrap = wraps[(cls, file)]
        # The script's own call first: verify builds the model as the script does.
        model = constructor_call([cls], sorted(project.paths, key=lambda p: os.path.realpath(p) != os.path.realpath(script)),
                                 str(project.root))
        plan = Plan("model", f"the script wrapped {cls} in nn.DataParallel and never called it", model=model or {"class": cls})
        enclosed.progress(f"running {cls} directly: the script never called it")
        outcome, direct, _, _ = enclosed.run(plan, partial(_command, plan, options=enclosed.options, port=enclosed.port,
                                                           probed={}), file)
        built = next((e["how"] for e in direct.of("model-built")), f"{cls}(...)")
        mode = f"a direct run after the script: {enclosed.options.nproc}-way DataParallel around {built}; {device_note}"
        for index in indices:
            verdict = report.verdicts[index]
            probe, at_run = probes[verdict.finding.code], runnable[id(verdict.finding)]
            judgement = probe.judge(at_run, direct) if direct.ran(at_run.path, at_run.line) else None
            judgement = judgement or probe.on_the_stack(at_run, direct)
            if judgement is not None:
                report.verdicts[index] = Verdict(verdict.finding, judgement.status, judgement.evidence, mode,
                                                 round(outcome.seconds, 2))
        where = f" at {shown_path(wrap['file'])}:{wrap['line']}" if wrap.get("file") and wrap.get("line") else ""
        report.notes.append(f"the script wrapped {cls} in nn.DataParallel{where} and never called it: verify ran it "
                            "directly after the script")
    if unexercised:
        report.verdicts.sort(key=lambda v: v.status != "confirmed")
        report.failure = _run_failure(run, report, None)


def _run(enclosure: Enclosure, plan: Plan, start: Callable[[str], Command], script: str, root: str, device: str,
         options: VerifyOptions, port: int, requested: dict[str, str], scratch: Path,
         progress: Callable[[str], None], monitor: Monitor) -> RunOutcome:
    """The run in its enclosure; where folders cannot be sealed in place, again in a scratch copy of them."""

    def watch() -> str | None:
        stop = monitor.poll()
        progress(monitor.status())
        return stop

    cwd = os.getcwd()
    if os.environ.get(NO_NAMESPACES) != "1":
        command = start(script)
        env = {**_environment(scratch, script, root, device, command.devices, options, port, plan), **requested}
        outcome = run_guarded(enclosure.command(command.argv, cwd), timeout=options.timeout, env=env, cwd=cwd, watch=watch)
        enclosure.read_status()
        unsealed = enclosure.status.get("sealed", "overlay")
        if outcome.returncode != SEAL_UNAVAILABLE or unsealed == "overlay":
            return outcome
        enclosure.status = {}
    else:
        unsealed = UNSEALED_NO_NAMESPACES
    try:
        enclosure.copy(unsealed)
    except OSError as error:
        raise HarnessError(f"cannot seal the run: {error}") from None
    moved = enclosure.inside(script)
    command = start(moved)
    env = {**_environment(scratch, moved, enclosure.inside(root), device, command.devices, options, port, plan), **requested}
    env["HOME"] = str(scratch / "home")
    (scratch / "home").mkdir(exist_ok=True)
    for stale in (scratch / "trace").glob("*"):
        stale.unlink()
    outcome = run_guarded(enclosure.command(command.argv, enclosure.inside(cwd)), timeout=options.timeout, env=env,
                          cwd=enclosure.inside(cwd), watch=watch)
    enclosure.read_status()
    return outcome


def _describe_seal(enclosure: Enclosure) -> str:
    if enclosure.copy_root is not None:
        return f"a scratch copy of {', '.join(enclosure.copied)}, with an empty home folder ({enclosure.unsealed})"
    return (f"copy-on-write overlay on {', '.join(enclosure.sealed)}, and every other folder the run may write to (in "
            f"{os.path.dirname(enclosure.scratch)}, the ones that hold these)")


def _describe_outcome(outcome: RunOutcome, timeout: float) -> str:
    if outcome.timed_out:
        text = f"stopped after {timeout:g} s (timeout)"
    elif outcome.stopped:
        text = "stopped early"
    else:
        text = "finished without a failure" if outcome.returncode == 0 else f"failed (exit code {outcome.returncode})"
    return text + ("; no process left behind" if not outcome.leftovers else f"; processes {list(outcome.leftovers)} survived SIGKILL")


# Where a CPU run on gloo, given for nccl, can differ from the NCCL run it stands for (pytorch/pytorch#156627, #174844).
_GLOO_DIFFERS = (
    ", which is stricter in places: gloo refuses an all_gather of tensors of unequal sizes that NCCL takes (an error "
    "here may be a later hang on GPUs), and a hang ends in gloo's recv timeout rather than NCCL's watchdog"
)


def _rank_options_note(given: list[list[str]]) -> str:
    """The script's own `--rank`/`--world-size`, which verify gave each process: its arguments were the same for all."""
    shown = [f"{option}={'N' if variable == 'RANK' else value}" for option, variable, value in given]
    return (f"the script passes its {' and '.join(o for o, _, _ in given)} to init_process_group: each process got "
            f"{' and '.join(shown)} after the script's arguments, as one process per rank started by hand would")


def _notes(run: RunRecord, options: VerifyOptions) -> list[str]:
    notes = [f"the script reads {e['option']}: each rank got {e['option']}=N, as torch.distributed.launch passes it "
             "(torchrun sets only LOCAL_RANK)" for e in run.of("local-rank-option")][:1]
    notes += [_rank_options_note(e["given"]) for e in run.of("rank-options")][:1]
    devices = run.of("virtual-devices")
    nodes = {e.get("node") for e in run.of("launched")}
    if devices and run.of("virtual-device-used"):
        saw = f"each of its {len(nodes)} nodes saw" if len(nodes) > 1 else "the run saw"
        notes.append(f"{saw} {devices[0]['count']} virtual {_cuda_devices(devices[0]['count'])}: CUDA tensors computed "
                     "on the CPU, each kept its device, and torch's cross-device checks applied")
        if run.of("dtensor-on-the-cpu"):
            notes.append("FSDP2's sharded parameters (DTensor) kept their shards on the CPU, standing for their CUDA "
                         "device: their `.device` says cpu, and torch's cross-device checks did not apply to them")
    elif devices and run.of("data-parallel"):
        notes.append("the script computes on the CPU: nn.DataParallel ran its replicas with the CPU standing for device 0")
    notes += [f"the script asked for {e['requested']}; it got gloo (no GPUs for it){_GLOO_DIFFERS}" for e in run.of("backend")][:1]
    notes += [f"verify built {e['how']} and fed it inputs of shape {', '.join(map(str, e['inputs']))}, {e['fed']}"
              for e in run.of("model-built")][:1]
    seen = set()
    for event in run.of("stand-in"):
        key = (event.get("dataset"), event.get("split"))
        if key not in seen:
            seen.add(key)
            notes.append(event["note"])
    if any(e.get("blocked") for e in run.of("stand-in")) and not options.allow_network:
        notes.append("downloads were blocked by the loopback-only network: --allow-network lets them through")
    return notes


def _judge(report: VerifyReport, project: ProjectFindings, source: _Source, findings: dict[int, Diagnostic],
           runnable: dict[int, Diagnostic], run: RunRecord, plan: Plan, stop: Stop | None,
           probes: dict[str, Any], selected: set[str], outcome: RunOutcome) -> tuple[set[int], bool]:
    """A verdict for every finding of the file, and for the findings of other files the run reached; returns the
    indices of the errors the verdicts account for, and whether a confirmed finding is what ended the run."""
    seconds = round(outcome.seconds, 2)
    script_real = os.path.realpath(source.path)
    others_unreached = 0
    explained: set[int] = set()
    judged: list[tuple[Diagnostic, Judgement | None]] = []
    for key, finding in findings.items():
        probe, at_run = probes[finding.code], runnable[key]
        judgement = probe.judge(at_run, run) if plan.kind in probe.kinds and run.ran(at_run.path, at_run.line) else None
        judgement = judgement or probe.on_the_stack(at_run, run)
        if judgement is not None:
            explained.update(judgement.explains)
        judged.append((finding, judgement))
    signed = []
    for finding, judgement in found_at_run_time(run, probes, selected, explained):
        if not is_suppressed(finding.code, _line_text(finding)):  # the line as the run counted it
            explained.update(judgement.explains)
            signed.append((source.as_written(finding), judgement))
    culprit = _culprit(stop, [v for _, v in judged if v is not None] + [v for _, v in signed])
    if culprit is not None:
        stop = Stop(f"the run ended with the failure confirmed above ({culprit.evidence.error_type})")
    for finding, judgement in judged:
        if judgement is None:
            judgement = Judgement("not-run", Evidence(_why_not_run(run, runnable[id(finding)], stop)))
        if os.path.realpath(finding.path) != script_real and judgement.status == "not-run":
            others_unreached += 1
            continue
        report.verdicts.append(Verdict(finding, judgement.status, judgement.evidence, report.mode, seconds))
    report.verdicts += [Verdict(f, j.status, j.evidence, report.mode, seconds, runtime_only=True) for f, j in signed]
    # What the run saw at a line whose static finding it confirmed is that finding's evidence (two nodes' local
    # rank 0 writing one file is PFL305's), not a finding of its own.
    confirmed_at = {_place(v.finding) for v in report.verdicts if v.status == "confirmed"}
    for code, probe in probes.items():
        if code not in selected:
            continue
        runtime_only = code != "PFL110"
        for finding, judgement in probe.observe(run.script, run):
            if is_suppressed(finding.code, _line_text(finding)):  # the line as the run counted it
                continue
            finding = source.as_written(finding)
            if _has_static(project, finding) or (runtime_only and _place(finding) in confirmed_at):
                continue
            explained.update(judgement.explains)
            report.verdicts.append(Verdict(finding, judgement.status, judgement.evidence, report.mode, seconds,
                                           runtime_only=runtime_only))
    # Confirmed first: a verdict that says "the failure confirmed above" comes after it.
    report.verdicts.sort(key=lambda v: (v.status != "confirmed", os.path.realpath(v.finding.path) != script_real,
                                        v.finding.path, v.finding.cell or 0, v.finding.line))
    if others_unreached:
        were = "was" if others_unreached == 1 else "were"
        report.notes.append(f"{counted(others_unreached, 'finding')} in other files of the project {were} not reached by "
                            "this run")
    return explained, culprit is not None


def _culprit(stop: Stop | None, judgements: list[Judgement]) -> Judgement | None:
    """The confirmed verdict whose failure ended the run: its error, or the exit its evidence shows (a parser
    refusing the flag a launcher passed)."""
    if stop is None:
        return None
    for judgement in judgements:
        if stop.error is not None and stop.error in judgement.explains:
            return judgement
        frame = judgement.evidence.user_frame
        if (judgement.status == "confirmed" and stop.place and frame and frame.get("line") == stop.place.get("line")
                and same_file(frame.get("file"), stop.place.get("file"))):
            return judgement
    return None


def _at(finding: Diagnostic) -> str:
    return f"{finding.path}:cell {finding.cell}:{finding.line}" if finding.cell else f"{finding.path}:{finding.line}"


def _place(finding: Diagnostic) -> tuple[str, int | None, int]:
    return os.path.realpath(finding.path), finding.cell, finding.line


def _has_static(project: ProjectFindings, finding: Diagnostic) -> bool:
    return any(f.code == finding.code and (f.cell, f.line) == (finding.cell, finding.line)
               for f in project.in_file(finding.path))


def _line_text(finding: Diagnostic) -> str:
    return linecache.getline(finding.path, finding.line)


def _why_not_run(run: RunRecord, finding: Diagnostic, stop: Stop | None) -> str:
    if not run.ran(finding.path, finding.line):
        line = run.line_name(finding.path, finding.line)
        if stop is not None:
            return f"{line} never ran: {stop.sentence()}"
        return (f"{line} never ran: the program ran to its end without reaching it (a branch not taken, "
                "an early return, or code no entry point calls)")
    if stop is not None:
        return f"the run stopped before the pitfall could show: {stop.sentence()}"
    return "the run never exercised this pitfall (nothing ran it in parallel)"


def _run_failure(run: RunRecord, report: VerifyReport, stop: Stop | None) -> str | None:
    if report.unexplained:
        if stop is not None:
            return f"{report.path}: {stop.sentence()}"
        first = report.unexplained[0]
        return f"{report.path}: the run failed: {first['type']}: {first['message']}"
    if run.timed_out or (run.stopped and stop is not None):
        return f"{report.path}: {stop.sentence() if stop else 'the run was stopped'}; its processes were killed"
    if stop is not None:
        return f"{report.path}: not run to its end: {stop.sentence()}"
    not_run = [v for v in report.verdicts if v.status == "not-run"]
    if not_run:
        return f"{report.path}: not run: {not_run[0].evidence.mechanism}"
    return None


def _unexplained(run: RunRecord, explained: set[int]) -> list[dict[str, Any]]:
    """Failures that no finding accounts for; `parallel_only` is set once a control run showed one only in parallel."""
    seen: set[tuple[str, str]] = set()
    failures = []
    causes = [e for e in run.errors if e.get("type") not in ECHOES]
    causes += [e for e in run.of("exit") if e.get("status") == "exit" and e.get("code")]  # a rank that exited
    for index, error in enumerate(run.errors):
        key = (error.get("type", ""), last_line(error.get("message")))
        if index in explained or key in seen or error.get("limit"):  # verify's own limit: its stop says so
            continue
        if error.get("type") in ECHOES and (causes or index in explained):
            continue
        seen.add(key)
        failures.append({"type": key[0], "message": key[1], "user_frame": error.get("user_frame"), "rank": error.get("rank"),
                         "parallel_only": False})
    return failures

