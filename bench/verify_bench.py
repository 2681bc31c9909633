"""Wall time of `pitfall-lint verify` against running the same file plainly, side by side.

    python bench/verify_bench.py [--runs 5] [FILE ...]      (default: every bad and fixed fixture)

For each file the two commands alternate, RUNS times each, as whole processes; the plain run is
`python FILE` (or `torchrun --nproc-per-node 2 FILE` for a distributed script, and for a model file
without an entry point a `python -c` that imports it, builds its example and runs it in
nn.DataParallel). Prints medians, min/max and the ratio verify / plain. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pitfall_lint.harness.planning import plan_run  # noqa: E402


def plain_command(path: Path) -> list[str]:
    data = path.read_bytes()
    plan = plan_run(str(path), data, ast.parse(data), None)
    if plan.kind == "distributed":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(path)]
    if plan.kind == "example":
        code = (
            "import importlib.util, torch, sys; s = importlib.util.spec_from_file_location('m', sys.argv[1]); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); model, args, *kw = m.pitfall_lint_example(); "
            "torch.nn.DataParallel(model)(*args)"
        )
        return [sys.executable, "-c", code, str(path)]
    return [sys.executable, str(path)]


def timed(command: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    files = options.files or sorted((REPO / "fixtures").glob("PFL*/*.py"))
    print(f"{'file':<58} {'verify median':>13} {'(min-max)':>13} {'plain median':>12} {'(min-max)':>13} {'ratio':>6}")
    for path in files:
        verify = [sys.executable, "-m", "pitfall_lint", "verify", "--format", "json", str(path.resolve())]
        plain = plain_command(path.resolve())
        times: dict[str, list[float]] = {"verify": [], "plain": []}
        with tempfile.TemporaryDirectory() as scratch:  # plain runs write their checkpoints here
            for _ in range(options.runs):
                times["verify"].append(timed(verify, scratch))
                times["plain"].append(timed(plain, scratch))
        v, p = statistics.median(times["verify"]), statistics.median(times["plain"])
        name = str(path.resolve().relative_to(REPO)) if path.resolve().is_relative_to(REPO) else str(path)
        print(
            f"{name:<58} {v:>12.2f}s {min(times['verify']):>6.2f}-{max(times['verify']):<5.2f} "
            f"{p:>11.2f}s {min(times['plain']):>6.2f}-{max(times['plain']):<5.2f} {v / p:>6.2f}"
        )


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
