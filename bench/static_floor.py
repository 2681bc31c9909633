"""How much of a cold check is the part no rule can shorten: starting, reading every file, parsing the files some
rule must read and walking their trees once, with no rule and no project model. Run side by side with the whole
check and with ruff, as whole processes, to say what is left for the rules within a time target.

    python bench/static_floor.py [--runs 5] CORPUS_DIR...

The files parsed are those the check itself parses (recorded first, in one untimed run in this process); the floor
process spreads them over as many forked workers as the check uses, in chunks as the check's pool does. Prints
medians and the ratios to ruff (`pip install ruff` first). Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from static_bench import compile_package, run, tool


def files_of_a_check(corpus: Path) -> tuple[list[str], list[str]]:
    """The files a cold check of the corpus reads, and those of them it parses and walks for its rules (recorded
    in one run of the command line in this process)."""
    import contextlib
    import io

    from pitfall_lint import pool
    from pitfall_lint.cli import main as command_line
    from pitfall_lint.engine import Engine

    read: list[str] = []
    walked: list[str] = []
    real_check, real_traverse = Engine.check_file, Engine._traverse

    def reading(self, path, project=None):
        read.append(path)
        return real_check(self, path, project)

    def walking(ctx, rules):
        walked.append(ctx.path)
        real_traverse(ctx, rules)

    Engine.check_file, Engine._traverse = reading, staticmethod(walking)  # type: ignore[method-assign]
    cores, pool.available_cores = pool.available_cores, lambda: 1  # in this process, where the recording is
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            command_line.main(["check", "--no-cache", "--exit-zero", str(corpus)], standalone_mode=False)
    finally:
        Engine.check_file, Engine._traverse = real_check, staticmethod(real_traverse)  # type: ignore[method-assign]
        pool.available_cores = cores
    return sorted(set(read)), sorted(set(walked))


def _walk(path: str) -> int:
    import ast

    from pitfall_lint.context import FileContext
    from pitfall_lint.source import SourceText
    from pitfall_lint.traversal import traverse

    with open(path, "rb") as handle:
        data = handle.read()
    traverse(FileContext(path, ast.parse(data, filename=path), SourceText(data), None), {})  # type: ignore[arg-type]
    return len(data)


def floor(listing: str) -> None:
    """The floor process: what every run imports, every file the check reads read, those it parses parsed and walked."""
    import multiprocessing

    import pitfall_lint.cli  # noqa: F401 - what a run imports
    from pitfall_lint import pool

    read, parsed = (part.split("\n") for part in Path(listing).read_text().split("\n\n"))
    for path in read:
        with open(path, "rb") as handle:
            handle.read()
    workers = pool.worker_count(len(parsed), pool.available_cores())
    with multiprocessing.get_context("fork").Pool(workers) as workers_pool:
        sum(workers_pool.imap(_walk, parsed, chunksize=8))


def bench(corpus: Path, runs: int) -> None:
    read, parsed = files_of_a_check(corpus)
    with tempfile.TemporaryDirectory() as scratch:
        listing = Path(scratch) / "files.txt"
        listing.write_text("\n".join(read) + "\n\n" + "\n".join(parsed))
        commands = {
            "pitfall-lint cold": [tool("pitfall-lint"), "check", "--no-cache", "--exit-zero", str(corpus)],
            "floor (no rule)": [sys.executable, __file__, "--floor", str(listing)],
            "ruff --select ALL": [tool("ruff"), "check", "--select", "ALL", "--no-cache", "--isolated", "--exit-zero", str(corpus)],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, command in commands.items():
                times[name].append(run(command, scratch).wall)
    size = sum(os.path.getsize(p) for p in parsed)
    print(f"\n{corpus}: {len(read)} files read, {len(parsed)} parsed ({size / 1e6:.1f} MB)")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        print(f"{name:<20} median {median:6.3f} s  (min {min(times[name]):.3f}, max {max(times[name]):.3f}, {runs} runs)")
    ruff = medians["ruff --select ALL"]
    cold, bare = medians["pitfall-lint cold"], medians["floor (no rule)"]
    print(f"floor / ruff {bare / ruff:.2f}; cold / ruff {cold / ruff:.2f}; left for rules and the project model "
          f"within ruff's time: {ruff - bare:.2f} s, taken now: {cold - bare:.2f} s")


def main() -> None:
    if sys.argv[1:2] == ["--floor"]:
        floor(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    compile_package()
    for corpus in options.corpora:
        bench(corpus.resolve(), options.runs)


if __name__ == "__main__":
    main()
