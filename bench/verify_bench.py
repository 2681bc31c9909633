"""Wall and CPU time of `pitfall-lint verify` against running the same file plainly, side by side.

    python bench/verify_bench.py [--runs 5] [--realistic] [FILE ...]   (default: every bad and fixed fixture)

For each file the two commands alternate, RUNS times each, as whole processes; the plain run is
`python FILE` (or `torchrun --nproc-per-node 2 FILE` for a distributed script, and for a model file
without an entry point a `python -c` that imports it, builds its example and runs it in
nn.DataParallel). `--realistic` measures the projects of tests/verify_cases/realistic instead, with the
arguments their docstrings give, each in a scratch copy (run from its folder); a script written for GPUs
has no plain run on a CPU machine ("n/a"). Prints medians, min/max, the ratio verify / plain, and the
CPU time (user + system of the whole process tree), steadier than the wall time on a shared machine.
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pitfall_lint.harness.planning import plan_run  # noqa: E402

REALISTIC = REPO / "tests" / "verify_cases" / "realistic"
STUB_TORCHVISION = REPO / "tests" / "verify_cases" / "stub_torchvision"


@dataclass(frozen=True)
class Case:
    path: Path  # relative to the project folder when `project` is set
    args: tuple[str, ...] = ()
    project: Path | None = None  # copied to a scratch folder and run from there
    plain: bool = True  # False: written for GPUs, no plain run on a CPU machine
    env: dict[str, str] = field(default_factory=dict)


_REALISTIC_CASES = [
    Case(Path("train.py"), ("--epochs", "1"), REALISTIC / "dp_project"),
    Case(Path("train_fixed.py"), ("--epochs", "1"), REALISTIC / "dp_project"),
    Case(Path("train.py"), (), REALISTIC / "ddp_helper"),
    Case(Path("train.py"), ("--data", "data", "--epochs", "2"), REALISTIC / "ddp_template", plain=False,
         env={"PYTHONPATH": str(STUB_TORCHVISION)}),
    Case(Path("train_fixed.py"), ("--data", "data", "--epochs", "2"), REALISTIC / "ddp_template", plain=False,
         env={"PYTHONPATH": str(STUB_TORCHVISION)}),
]


def plain_command(path: Path, args: tuple[str, ...]) -> list[str]:
    data = path.read_bytes()
    plan = plan_run(str(path), data, ast.parse(data), None)
    if plan.kind == "distributed":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(path), *args]
    if plan.kind == "example":
        code = (
            "import importlib.util, torch, sys; s = importlib.util.spec_from_file_location('m', sys.argv[1]); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); model, args, *kw = m.pitfall_lint_example(); "
            "torch.nn.DataParallel(model)(*args)"
        )
        return [sys.executable, "-c", code, str(path)]
    return [sys.executable, str(path), *args]


def timed(command: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the command and every process it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900, check=False,
                   env={**os.environ, **env})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - started, cpu


def _row(name: str, times: dict[str, list[tuple[float, float]]]) -> str:
    def stats(key: str) -> tuple[str, float]:
        walls = [w for w, _ in times[key]]
        if not walls:
            return f"{'n/a':>12} {'':>13} {'':>7}", 0.0
        median = statistics.median(walls)
        cpu = statistics.median(c for _, c in times[key])
        return f"{median:>11.2f}s {min(walls):>6.2f}-{max(walls):<5.2f} {cpu:>6.1f}s", median

    verify, v = stats("verify")
    plain, p = stats("plain")
    ratio = f"{v / p:>6.2f}" if p else f"{'n/a':>6}"
    return f"{name:<58} {verify} {plain} {ratio}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--realistic", action="store_true", help="the projects of tests/verify_cases/realistic")
    options = parser.parse_args()
    if options.realistic:
        cases = _REALISTIC_CASES
    else:
        cases = [Case(p.resolve()) for p in (options.files or sorted((REPO / "fixtures").glob("PFL*/*.py")))]
    print(f"{'file':<58} {'verify median':>12} {'(min-max)':>13} {'cpu':>7} {'plain median':>12} {'(min-max)':>13} "
          f"{'cpu':>7} {'ratio':>6}")
    for case in cases:
        times: dict[str, list[tuple[float, float]]] = {"verify": [], "plain": []}
        with tempfile.TemporaryDirectory() as scratch:  # plain runs write their checkpoints here
            cwd = scratch
            path = case.path
            if case.project is not None:
                cwd = str(Path(scratch) / case.project.name)
                shutil.copytree(case.project, cwd)
                path = Path(cwd) / case.path
            # --preview: the preview rules' probes (PFL201's writers, PFL306's port) are timed as every other one is.
            verify = [sys.executable, "-m", "pitfall_lint", "verify", "--format", "json", "--preview", str(path), "--",
                      *case.args]
            for _ in range(options.runs):
                times["verify"].append(timed(verify, cwd, case.env))
                if case.plain:
                    times["plain"].append(timed(plain_command(path, case.args), cwd, case.env))
        name = f"{case.project.name}/{case.path}" if case.project else (
            str(case.path.relative_to(REPO)) if case.path.is_relative_to(REPO) else str(case.path))
        print(_row(name + (" " + " ".join(case.args) if case.args else ""), times))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
