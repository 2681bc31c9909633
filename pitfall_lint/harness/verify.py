"""`pitfall-lint verify`: static check, then the file run in parallel in a guarded child, then verdicts."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.engine import Engine
from pitfall_lint.harness import isolation
from pitfall_lint.harness.planning import Plan, plan_run
from pitfall_lint.harness.probes import all_probes
from pitfall_lint.harness.probes.base import Launch, last_line
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord, Status
from pitfall_lint.harness.runner import run_guarded
from pitfall_lint.rules.base import Rule
from pitfall_lint.source import SourceText
from pitfall_lint.suppress import is_suppressed

SHIM = str(Path(__file__).resolve().parent / "shim")
_NEEDS_CUDA = re.compile(
    r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available|invalid device ordinal"
    r"|CUDA driver version is insufficient|no attribute '_cuda_setDevice'|ProcessGroupNCCL is only supported with GPUs"
)


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


@dataclass(frozen=True)
class Verdict:
    finding: Diagnostic
    status: Status
    evidence: Evidence
    mode: str
    seconds: float


@dataclass
class VerifyReport:
    path: str
    plan: Plan
    mode: str
    seconds: float = 0.0
    isolation: str = ""
    scratch: str = ""
    outcome: str = "not run"
    notes: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    unexplained: list[dict[str, Any]] = field(default_factory=list)

    # Why the run could not be judged (timeout, a crash no finding explains, no GPU), in one line.
    failure: str | None = None

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


def _device_mode(options: VerifyOptions) -> tuple[str, str]:
    gpus = visible_gpus()
    if options.device == "cpu":
        return "cpu", "CPU reproduction (--device cpu)"
    if gpus >= options.nproc:
        return "cuda", f"{options.nproc} real CUDA devices"
    if options.device == "cuda":
        raise HarnessError(f"--device cuda needs {options.nproc} CUDA devices, {gpus} visible")
    return "cpu", f"CPU reproduction: {gpus} CUDA device(s) visible, fewer than {options.nproc}"


def _command(plan: Plan, script: str, options: VerifyOptions, port: int) -> tuple[list[str], str]:
    python = sys.executable
    if plan.kind == "example":
        return [python, "-m", "pitfall_lint.harness.child.run_example", script, str(plan.example)], (
            f"{options.nproc}-way DataParallel around {plan.example}()"
        )
    if plan.kind == "distributed":
        launcher = [
            python, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={options.nproc}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--local-addr=127.0.0.1",
            "--max-restarts=0", "--monitor-interval=0.5",
        ]
        return [*launcher, "-m", "pitfall_lint.harness.child.run_script", script, *options.script_args], (
            f"{options.nproc} ranks under torch.distributed.run"
        )
    return [python, "-m", "pitfall_lint.harness.child.run_script", script, *options.script_args], (
        f"the script, with nn.DataParallel {options.nproc}-way"
    )


def _environment(scratch: Path, script: str, device: str, options: VerifyOptions, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SHIM, str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    env.update(
        PITFALL_LINT_TRACE_DIR=str(scratch / "trace"),
        PITFALL_LINT_SCRATCH=str(scratch),
        PITFALL_LINT_SCRIPT=script,
        PITFALL_LINT_DEVICE=device,
        PITFALL_LINT_NPROC=str(options.nproc),
        PITFALL_LINT_STEPS=str(options.steps),
        PYTHONUNBUFFERED="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        GLOO_SOCKET_IFNAME="lo",
        NCCL_SOCKET_IFNAME="lo",
        TP_SOCKET_IFNAME="lo",
    )
    if env.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL":
        env["TORCH_DISTRIBUTED_DEBUG"] = "INFO"  # DETAIL segfaults in DDP set-up on CPU builds
    if device == "cuda" and "CUDA_VISIBLE_DEVICES" not in env:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(options.nproc))
    return env


def _static_findings(path: str, data: bytes, rules: list[type[Rule]]) -> list[Diagnostic]:
    result = Engine(rules).check_source(path, data)
    if result.internal_error:
        raise HarnessError(f"{path}: {result.internal_error}")
    parse_errors = [d for d in result.diagnostics if d.code == "PFL000"]
    if parse_errors:
        raise HarnessError(f"{path}: {parse_errors[0].message}")
    return list(result.diagnostics)


def _why_not_run(run: RunRecord, plan: Plan, finding: Diagnostic, timeout: float) -> str:
    needs_cuda = next((e for e in run.errors if _NEEDS_CUDA.search(e.get("message") or "")), None)
    if needs_cuda is None and _NEEDS_CUDA.search(run.output):
        needs_cuda = {"type": "RuntimeError", "message": _NEEDS_CUDA.search(run.output)[0]}  # type: ignore[index]
    if needs_cuda is not None:
        return f"the code needs CUDA, which this run lacks ({needs_cuda['type']}: {last_line(needs_cuda['message'])}); run verify on a GPU machine"
    if run.timed_out:
        return f"the run did not finish within {timeout:g} s and was stopped; raise --timeout or lower --steps"
    if finding.line not in run.lines:
        hint = " (is it reached from the entry point?)" if plan.kind != "example" else ""
        return f"line {finding.line} never ran{hint}"
    failure = next(iter(run.errors), None)
    if failure is not None:
        return f"the run failed before the pitfall could show: {failure['type']}: {last_line(failure['message'])}"
    return "the run never exercised this pitfall (nothing ran it in parallel)"


def _describe_outcome(returncode: int | None, timed_out: bool, timeout: float) -> str:
    if timed_out:
        return f"stopped after {timeout:g} s (timeout)"
    return "finished without a failure" if returncode == 0 else f"failed (exit code {returncode})"


def verify(
    path: str, options: VerifyOptions, rules: list[type[Rule]], progress: Callable[[str], None] = lambda _: None
) -> VerifyReport:
    if importlib.util.find_spec("torch") is None:
        raise HarnessError("verify needs torch: install a CPU or CUDA build of torch in this environment")
    if options.nproc < 2:
        raise HarnessError("--nproc must be at least 2: a pitfall of parallel training needs two replicas or ranks")
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise HarnessError(f"{path}: cannot read: {error.strerror or error}") from None
    findings = _static_findings(path, data, rules)
    plan = plan_run(path, data, ast.parse(data), options.example)
    device, device_note = _device_mode(options)
    probes = all_probes()
    probed = [f for f in findings if f.code in probes]
    report = VerifyReport(path=path, plan=plan, mode="not run")
    if plan.kind is None:
        report.verdicts = [Verdict(f, "not-run", Evidence(plan.reason), "not run", 0.0) for f in probed]
        report.failure = f"{path}: {plan.reason}"
        return report
    script = os.path.abspath(path)
    scratch = Path(tempfile.mkdtemp(prefix="pitfall-lint-verify-"))
    (scratch / "trace").mkdir()
    port = _free_loopback_port()
    command, what = _command(plan, script, options, port)
    if plan.kind == "distributed":  # a probe may need the ranks started another way (a launcher, two nodes)
        launch = Launch(script, options.nproc, port, options.script_args)
        wanted = (probe.launch(own, launch) for code, probe in probes.items() if (own := [f for f in probed if f.code == code]))
        command, what = next((w for w in wanted if w is not None), (command, what))
    source_lines = data.decode("utf-8", errors="replace").splitlines()
    requested: dict[str, str] = {}
    for code, probe in probes.items():
        requested.update(probe.environment([f for f in probed if f.code == code], source_lines))
    report.mode = f"{plan.kind}: {what}; {device_note}"
    report.scratch = str(scratch)
    progress(f"running {path} ({report.mode})")
    try:
        outcome = run_guarded(
            command, timeout=options.timeout, env={**_environment(scratch, script, device, options, port), **requested},
            cwd=os.getcwd(), isolate_network=True, preexec=isolation.enter_loopback_only_namespace,
        )
        run = RunRecord.read(script, scratch / "trace", outcome.output, outcome.returncode, outcome.timed_out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if outcome.interrupted:
        raise KeyboardInterrupt
    report.seconds = outcome.seconds
    report.isolation = outcome.isolation
    report.outcome = _describe_outcome(outcome.returncode, outcome.timed_out, options.timeout)
    report.outcome += "; no process left behind" if not outcome.leftovers else f"; processes {list(outcome.leftovers)} survived SIGKILL"
    report.notes += [f"the script asked for {e['requested']}; it got gloo (no GPUs for it)" for e in run.of("backend")][:1]
    explained: set[int] = set()
    for finding in probed:
        probe = probes[finding.code]
        judgement: Judgement | None = None
        if plan.kind in probe.kinds and finding.line in run.lines:
            judgement = probe.judge(finding, run)
        if judgement is None:
            judgement = Judgement("not-run", Evidence(_why_not_run(run, plan, finding, options.timeout)))
        explained.update(judgement.explains)
        report.verdicts.append(Verdict(finding, judgement.status, judgement.evidence, report.mode, round(outcome.seconds, 2)))
    text = SourceText(data)
    for probe in probes.values():
        for finding, judgement in probe.observe(path, run):
            if is_suppressed(finding.code, text.line(finding.line)):
                continue
            explained.update(judgement.explains)
            report.verdicts.append(Verdict(finding, judgement.status, judgement.evidence, report.mode, round(outcome.seconds, 2)))
    report.unexplained = _unexplained(run, explained)
    report.failure = _run_failure(run, report, options.timeout, explained)
    return report


def _run_failure(run: RunRecord, report: VerifyReport, timeout: float, explained: set[int]) -> str | None:
    if run.timed_out:
        return f"{report.path}: the run did not finish within {timeout:g} s; it was stopped and its processes killed"
    # A device error that a finding explains (a rank picking a device its node lacks) is that finding's evidence.
    errors = [e for i, e in enumerate(run.errors) if i not in explained]
    needs_cuda = next((e for e in errors if _NEEDS_CUDA.search(e.get("message") or "")), None)
    if needs_cuda is not None:
        return f"{report.path}: needs CUDA, which this run lacks: {needs_cuda['type']}: {last_line(needs_cuda['message'])}"
    if report.unexplained:
        first = report.unexplained[0]
        frame = first.get("user_frame")
        where = f" (line {frame['line']})" if frame else ""
        return f"{report.path}: the run failed{where}: {first['type']}: {first['message']}"
    return None


# Raised by launchers when a child failed: never the cause, always the echo of another failure.
_ECHOES = frozenset({"ChildFailedError", "ProcessExitedException", "ProcessRaisedException", "KeyboardInterrupt"})


def _unexplained(run: RunRecord, explained: set[int]) -> list[dict[str, Any]]:
    """Failures that no finding accounts for (a missing GPU is reported in the verdicts instead)."""
    seen: set[tuple[str, str]] = set()
    failures = []
    causes = [e for e in run.errors if e.get("type") not in _ECHOES]
    for index, error in enumerate(run.errors):
        key = (error.get("type", ""), last_line(error.get("message")))
        if index in explained or key in seen or _NEEDS_CUDA.search(error.get("message") or ""):
            continue
        if error.get("type") in _ECHOES and (causes or index in explained):
            continue
        seen.add(key)
        failures.append({"type": key[0], "message": key[1], "user_frame": error.get("user_frame"), "rank": error.get("rank")})
    return failures
