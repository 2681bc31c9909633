"""pitfall-lint's static check against Ruff, every case of the speed table in one run, side by side as whole processes.

    python bench/static_bench.py [--runs 5] [--torchfix-runs 1 (0: skip TorchFix)] [--one-file NAME=PATH] CORPUS_DIR...

Every round runs each command once, one after the other (the tools alternate, so that a machine that slows down slows
both): `pitfall-lint --version` and a file holding `x = 1` in a project of its own (start-up, beside Python's own);
then for each corpus pitfall-lint cold (--no-cache), warm (its cache filled, nothing changed) and on one changed file
(the pre-commit case: in a copy of the project with a warm cache, the round appends a comment to the file and checks
it from the project's root; the file is the median by size of those of the corpus's own project that import torch,
or the one `--one-file CORPUS_NAME=RELATIVE_PATH` names), each beside `ruff check --select ALL --no-cache` on the same
files, and `torchfix` (slow: its own, smaller number of rounds). pitfall-lint's bytecode is compiled first, as an
installed package has it. Prints the medians of wall and CPU time (the process and the workers it waited for), the
peak memory (the largest of those processes), and the ratios pitfall-lint / Ruff. Peers are not dependencies of
pitfall-lint: `pip install ruff torchfix` first. Corpora are repositories fetched for measurement (never
committed); pass their folders. Nothing here asserts a time.
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
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Sample:
    wall: float
    cpu: float  # user and system time of the process and of the children it waited for (the workers)
    peak: float  # MiB: the largest resident set among them


def run(command: list[str], cwd: str | Path) -> Sample:
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return Sample(time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


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


@dataclass
class Case:
    """One row of the table: pitfall-lint's command and Ruff's beside it (None: no counterpart), where they run, and
    what to do before each round's run (the pre-commit edit)."""

    name: str
    ours: list[str]
    ruff: list[str] | None
    cwd: Path
    before: Path | None = None  # the file a round appends a comment to first
    samples: dict[str, list[Sample]] = field(default_factory=lambda: {"ours": [], "ruff": []})


def _median(samples: list[Sample], what: str) -> float:
    return statistics.median(getattr(s, what) for s in samples)


def report(cases: list[Case], python_start: list[Sample]) -> None:
    print(f"\nPython's own start-up (`python -c pass`): {_median(python_start, 'wall'):.3f} s")
    header = (f"{'case':<48} {'runs':>4} {'wall s':>7} {'CPU s':>6} {'MiB':>5} | {'ruff wall':>9} {'CPU s':>6} {'MiB':>5}"
              f" | {'ratio wall':>10} {'CPU':>5}")
    print(header)
    print("-" * len(header))
    for case in cases:
        ours, theirs = case.samples["ours"], case.samples["ruff"]
        wall, cpu, peak = _median(ours, "wall"), _median(ours, "cpu"), max(s.peak for s in ours)
        line = f"{case.name:<48} {len(ours):>4} {wall:>7.3f} {cpu:>6.2f} {peak:>5.0f} |"
        if theirs:
            ruff_wall, ruff_cpu = _median(theirs, "wall"), _median(theirs, "cpu")
            line += (f" {ruff_wall:>9.3f} {ruff_cpu:>6.2f} {max(s.peak for s in theirs):>5.0f} |"
                     f" {wall / ruff_wall:>10.2f} {cpu / ruff_cpu if ruff_cpu else float('nan'):>5.2f}")
        else:
            line += f" {'-':>9} {'-':>6} {'-':>5} | {'-':>10} {'-':>5}"
        print(line)


def bench(corpora: list[Path], runs: int, torchfix_runs: int, one_files: dict[str, str]) -> None:
    lint, ruff = tool("pitfall-lint"), tool("ruff")
    ruff_all = [ruff, "check", "--select", "ALL", "--no-cache", "--isolated", "--exit-zero"]
    with tempfile.TemporaryDirectory() as scratch_folder:
        scratch = Path(scratch_folder)
        alone = scratch / "alone"  # a file no rule triggers on, in a project of its own
        alone.mkdir()
        (alone / "pyproject.toml").write_text("")
        (alone / "x.py").write_text("x = 1\n")
        cases = [
            Case("--version", [lint, "--version"], [ruff, "--version"], scratch),
            Case("a file holding `x = 1`, project of its own", [lint, "check", "x.py"], [*ruff_all, "x.py"], alone),
        ]
        torchfix: list[Case] = []
        for corpus in corpora:
            files = list(corpus.rglob("*.py"))
            lines = sum(p.read_bytes().count(b"\n") for p in files)
            one = corpus / one_files[corpus.name] if corpus.name in one_files else typical_file(corpus)
            print(f"{corpus.name}: {len(files)} files, {lines} lines; one file: {one.relative_to(corpus)}")
            # The warm cache lives in the scratch folder, not in the corpus; the copy is where the one file changes.
            copy = scratch / "copies" / corpus.name
            shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns(".git", ".pitfall_lint_cache"))
            relative = str(one.relative_to(corpus))
            cases += [
                Case(f"{corpus.name} cold (--no-cache)", [lint, "check", "--no-cache", "--exit-zero", str(corpus)], [*ruff_all, str(corpus)], scratch),
                Case(f"{corpus.name} warm (nothing changed)", [lint, "check", "--exit-zero", str(corpus)], None, scratch),
                Case(f"{corpus.name} one changed file, warm cache", [lint, "check", "--exit-zero", relative], [*ruff_all, relative], copy, copy / relative),
            ]
            if torchfix_runs:
                torchfix.append(Case(f"{corpus.name} cold (vs torchfix)", [], [tool("torchfix"), str(corpus)], scratch))
            run([lint, "check", "--exit-zero", str(corpus)], scratch)  # the caches filled
            run([lint, "check", "--exit-zero", "."], copy)
        python_start: list[Sample] = []
        for round_index in range(runs):
            python_start.append(run([sys.executable, "-c", "pass"], scratch))
            for case in cases:
                if case.before is not None:
                    with case.before.open("a", encoding="utf-8") as handle:
                        handle.write(f"\n# pre-commit round {round_index}\n")
                case.samples["ours"].append(run(case.ours, case.cwd))
                if case.ruff is not None:
                    case.samples["ruff"].append(run(case.ruff, case.cwd))
            for case in torchfix if round_index < torchfix_runs else ():
                case.samples["ruff"].append(run(case.ruff, case.cwd))  # type: ignore[arg-type]
        report(cases, python_start)
        for case in torchfix:
            cold = next(c for c in cases if c.name == case.name.replace("(vs torchfix)", "(--no-cache)"))
            print(f"{case.name}: torchfix {_median(case.samples['ruff'], 'wall'):.3f} s, ratio pitfall-lint / torchfix "
                  f"{_median(cold.samples['ours'], 'wall') / _median(case.samples['ruff'], 'wall'):.3f}")


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
    parser.add_argument("--one-file", action="append", default=[], metavar="NAME=PATH",
                        help="the file of corpus NAME (its folder's name) that the pre-commit case changes, relative to it")
    options = parser.parse_args()
    one_files = dict(item.split("=", 1) for item in options.one_file)
    compile_package()
    bench([corpus.resolve() for corpus in options.corpora], options.runs, options.torchfix_runs, one_files)


if __name__ == "__main__":
    main()
