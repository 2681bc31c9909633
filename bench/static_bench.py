"""pitfall-lint's static check against its peers on real corpora, run side by side as whole processes.

    python bench/static_bench.py [--runs 5] [--torchfix-runs 1 (0: skip TorchFix)] CORPUS_DIR...

For each corpus, every round runs, one after the other: pitfall-lint cold (--no-cache), pitfall-lint
warm (its cache filled, nothing changed), pitfall-lint on one changed file (the pre-commit case: a copy of
the project with a warm cache, where the round appends a comment to the file first; the file is the median
one by size of those in the corpus's own project that import torch), `ruff check --select ALL --no-cache` and `torchfix` (slow: its own,
smaller number of rounds). pitfall-lint's bytecode is compiled first, as an installed package has it. Prints medians,
min/max, each process's peak memory, and the ratios pitfall-lint cold / peer. Peers are not
dependencies of pitfall-lint: `pip install ruff torchfix` first. Corpora are repositories fetched
for measurement (never committed); pass their folders. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(command: list[str], cwd: str) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MiB) of the process and the children it waited for."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def typical_file(corpus: Path) -> Path:
    """The median file by size among those that import torch and belong to the corpus's own project (not to a
    folder with a marker of its own): the kind a pre-commit hook is run on, with the whole project around it."""
    from pitfall_lint.project.layout import find_project_root

    files = sorted(
        (p for p in corpus.rglob("*.py") if b"import torch" in p.read_bytes() and find_project_root(p) == corpus),
        key=lambda p: p.stat().st_size,
    )
    return files[len(files) // 2]


def tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(found).exists():
        sys.exit(f"error: {name} is not installed (pip install {name})")
    return found


def bench(corpus: Path, runs: int, torchfix_runs: int) -> None:
    files = list(corpus.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    one = typical_file(corpus)
    lint = tool("pitfall-lint")
    commands = {
        "pitfall-lint cold": [lint, "check", "--no-cache", "--exit-zero", str(corpus)],
        "pitfall-lint warm": [lint, "check", "--exit-zero", str(corpus)],
        "pitfall-lint one file": [],  # in the copy, see below
        "ruff --select ALL": [tool("ruff"), "check", "--select", "ALL", "--no-cache", "--isolated", "--exit-zero", str(corpus)],
    }
    if torchfix_runs:
        commands["torchfix"] = [tool("torchfix"), str(corpus)]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as copy_folder:
        # The warm caches live here, not in the corpus; the copy is where the one file changes.
        copy = Path(copy_folder) / corpus.name
        shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns(".git"))
        changed = copy / one.relative_to(corpus)
        commands["pitfall-lint one file"] = [lint, "check", "--exit-zero", str(changed)]
        run(commands["pitfall-lint warm"], scratch)
        run([lint, "check", "--exit-zero", str(copy)], scratch)
        for round_index in range(runs):
            for name, command in commands.items():
                if name == "torchfix" and round_index >= torchfix_runs:
                    continue
                if name == "pitfall-lint one file":
                    with changed.open("a", encoding="utf-8") as handle:
                        handle.write(f"\n# pre-commit round {round_index}\n")
                samples[name].append(run(command, scratch))
    print(f"\n{corpus} ({len(files)} files, {lines} lines; one file: {one.relative_to(corpus)})")
    print(f"{'command':<24} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7} {'peak MiB':>9}")
    for name, values in samples.items():
        times = [t for t, _ in values]
        print(f"{name:<24} {len(values):>4} {statistics.median(times):>9.3f} {min(times):>7.3f} {max(times):>7.3f} "
              f"{max(m for _, m in values):>9.1f}")
    cold = statistics.median(t for t, _ in samples["pitfall-lint cold"])
    for peer in ("ruff --select ALL", "torchfix"):
        if samples.get(peer):
            peer_time = statistics.median(t for t, _ in samples[peer])
            print(f"ratio pitfall-lint cold / {peer}: {cold / peer_time:.3f} ({peer_time / cold:.1f}x faster)")


def compile_package() -> None:
    """Bytecode for every module of pitfall-lint, as pip writes it at install: an editable install run with
    PYTHONDONTWRITEBYTECODE would otherwise compile the whole package again in every process measured."""
    import pitfall_lint

    compileall.compile_dir(str(Path(pitfall_lint.__file__).parent), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--torchfix-runs", type=int, default=1, help="rounds that include torchfix (0: leave it out)")
    options = parser.parse_args()
    compile_package()
    for corpus in options.corpora:
        bench(corpus.resolve(), options.runs, options.torchfix_runs)


if __name__ == "__main__":
    main()
