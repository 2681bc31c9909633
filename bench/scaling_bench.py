"""How check time and memory grow with the size of one file: every analysis must stay near-linear.

    python bench/scaling_bench.py [--sizes 1000,10000,100000,600000] [--runs 1] [--keep DIR]

Generates one Python file per size and kind, and times `pitfall-lint check --no-cache --select ALL FILE` on it as a
whole process (peak resident memory from the kernel's accounting of that process):

- `mixed`: the bodies of every bad fixture (fixtures/PFL*/bad.py), their names suffixed per copy, repeated:
  classes, methods, training loops, loaders, samplers, saves, loads, ports and unguarded spawns that trigger every
  static rule, in one module;
- `script`: the statements of those fixtures' functions dedented into one long module-level script, names reused:
  one scope with thousands of loops, loaders, optimizers and saves, the worst case of analyses that read a scope;
- `saves`: thousands of `torch.save` calls in a DDP script, PFL201's worst case: one long function with a save
  after every few statements, many small helpers that save (with their callers), module-level saves, and
  rank-guarded or per-rank saves that must not be reported.

Prints, per kind and size, the lines, the median wall and CPU seconds (user + system, of the process and its
workers), the CPU cost per 1,000 lines, the peak memory and the number of diagnostics (which must grow in proportion:
every copy is found in every copy). Nothing here asserts a time; on a shared machine the CPU time is the steadier
figure, and the per-line cost across sizes is what shows the curve.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Every rule's bad fixture but PFL110 (verify only) and PFL308 (notebooks only).
_STATIC_FIXTURES = tuple(
    sorted(p.parent.name[:6] for p in (REPO / "fixtures").glob("PFL*/bad.py") if p.parent.name[:6] not in ("PFL110", "PFL308"))
)


def _is_main_guard(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.If) and "__name__" in ast.unparse(statement.test)


def _fixture_parts(code: str) -> tuple[list[str], str, list[str]]:
    """A bad fixture's imports, its body (no docstring or imports; the main guard made a function) and the names it
    binds at top level."""
    (path,) = (REPO / "fixtures").glob(f"{code}-*/bad.py")
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    imports, body, names = [], [], []
    for index, statement in enumerate(tree.body):
        text = "\n".join(lines[statement.lineno - 1 : statement.end_lineno])
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            imports.append(text)
            continue
        if index == 0 and isinstance(statement, ast.Expr):
            continue
        if _is_main_guard(statement):  # its body becomes a function, so that one module holds every copy
            guarded = "\n".join(lines[statement.body[0].lineno - 1 : statement.end_lineno])
            body.append(f"def run_{code.lower()}():\n{guarded}")
            names.append(f"run_{code.lower()}")
            continue
        start = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", []))])
        body.append("\n".join(lines[start - 1 : statement.end_lineno]))
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(statement.name)
        elif isinstance(statement, ast.Assign):
            names += [t.id for t in statement.targets if isinstance(t, ast.Name)]
    return imports, "\n\n\n".join(body), names


def mixed(lines: int) -> str:
    """Copies of every bad fixture's body, each copy's names suffixed, until the file has about `lines` lines."""
    parts = [_fixture_parts(code) for code in _STATIC_FIXTURES]
    imports = sorted({text for part in parts for text in part[0]})
    templates = []
    for code, (_, body, names) in zip(_STATIC_FIXTURES, parts):
        for name in names:  # a bound name, not an attribute or keyword of the same spelling
            body = re.sub(rf"(?<![.\w]){name}\b", f"{name}_{code}_{{copy}}", body)
        templates.append(body.replace("{", "{{").replace("}", "}}").replace("{{copy}}", "{copy}"))
    block = "\n\n\n".join(templates) + "\n\n\n"
    out = ["\n".join(imports), "\n\n"]
    written, copy = len(imports) + 2, 0
    while written < lines:
        text = block.format(copy=copy)
        out.append(text)
        written += text.count("\n")
        copy += 1
    return "".join(out)


def script(lines: int) -> str:
    """The statements of every bad fixture's functions and main guard, dedented into one long module-level script
    (as a notebook exported to a file reads): one scope with every loop, loader, save and launch, names reused."""
    parts = {code: _fixture_parts(code) for code in _STATIC_FIXTURES if code != "PFL301"}  # a script spawns once
    imports = sorted({text for part in parts.values() for text in part[0]})
    statements = []
    for code, (_, body, _) in parts.items():
        for node in ast.parse(body).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(("run_", "pitfall")):
                continue  # drivers and examples call the functions this script inlines
            inner = node.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else [node]
            statements += [ast.unparse(s) for s in inner if not any(isinstance(n, ast.Return) for n in ast.walk(s))]
    block = "\n".join(statements) + "\n"
    out = ["\n".join(imports), "\n\n", "steps = epochs = 2\n"]
    written = len(imports) + 3
    while written < lines:
        out.append(block)
        written += block.count("\n")
    return "".join(out)


_SAVES_HEADER = '''import os

import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group("gloo")
RANK = dist.get_rank()
model = nn.Linear(4, 2)
'''


def many_saves(saves: int) -> str:
    """A DDP script with `saves` calls of `torch.save`; the ones every rank runs carry `# expect: PFL201`."""
    out = [_SAVES_HEADER]
    per_kind = max(saves // 5, 1)
    # Module level: unguarded, guarded, and per-rank paths.
    for k in range(per_kind):
        if k % 3 == 0:
            out.append(f'torch.save(model.state_dict(), "module_{k}.pt")  # expect: PFL201\n')
        elif k % 3 == 1:
            out.append(f'if RANK == 0:\n    torch.save(model.state_dict(), "guarded_{k}.pt")\n')
        else:
            out.append(f'torch.save(model.state_dict(), f"rank{{RANK}}_{k}.pt")\n')
    # One long function, a save after every few statements.
    out.append("\n\ndef train(steps):\n    rank = dist.get_rank()\n")
    for k in range(per_kind * 2):
        out.append(f"    loss_{k} = model(torch.randn(2, 4)).sum()\n")
        out.append(f"    path_{k} = os.path.join('out', 'step_{k}.pt')\n")
        if k % 2 == 0:
            out.append(f"    torch.save(model.state_dict(), path_{k})  # expect: PFL201\n")
        else:
            out.append(f"    if rank == 0:\n        torch.save(model.state_dict(), path_{k})\n")
    # Small helpers that save; one of two is called only by rank 0.
    for k in range(per_kind * 2):
        mark = "  # expect: PFL201" if k % 2 == 0 else ""
        out.append(f"\n\ndef save_{k}(state):\n    torch.save(state, 'helper_{k}.pt'){mark}\n")
    out.append("\n\ndef main():\n    train(2)\n")
    for k in range(per_kind * 2):
        call = f"save_{k}(model.state_dict())"
        out.append(f"    {call}\n" if k % 2 == 0 else f"    if RANK == 0:\n        {call}\n")
    return "".join(out)


def generate(kind: str, lines: int) -> str:
    if kind == "mixed":
        return mixed(lines)
    if kind == "script":
        return script(lines)
    # About 4.6 lines per save in many_saves.
    return many_saves(max(int(lines / 4.6), 5))


def measure(path: Path, runs: int) -> tuple[float, float, float, int]:
    """Median wall and CPU seconds, the largest peak memory (MiB), and the number of diagnostics."""
    command = [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", "--select", "ALL", "--format", "json",
               "--exit-zero", str(path)]
    times, cpu, peaks, found = [], [], [], 0
    for _ in range(runs):
        with tempfile.TemporaryFile() as output:
            started = time.perf_counter()
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.DEVNULL, cwd=path.parent)
            _, status, usage = os.wait4(process.pid, 0)
            times.append(time.perf_counter() - started)
            cpu.append(usage.ru_utime + usage.ru_stime)
            peaks.append(usage.ru_maxrss / 1024)
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit(f"error: check failed on {path}")
            output.seek(0)
            found = len(json.loads(output.read())["diagnostics"])
    return statistics.median(times), statistics.median(cpu), max(peaks), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000,600000", help="lines per generated file")
    parser.add_argument("--kinds", default="mixed,script,saves")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="write the generated files here instead of a temporary folder")
    options = parser.parse_args()
    folder = options.keep or Path(tempfile.mkdtemp(prefix="pitfall-lint-scaling-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{'kind':<7}{'lines':>9}{'wall s':>9}{'CPU s':>9}{'CPU ms/1k lines':>17}{'peak MiB':>10}{'diagnostics':>13}")
    for kind in options.kinds.split(","):
        for size in (int(s) for s in options.sizes.split(",")):
            path = folder / f"{kind}_{size}.py"
            path.write_text(generate(kind, size))
            lines = path.read_bytes().count(b"\n")
            wall, cpu, peak, found = measure(path, options.runs)
            per_line = cpu / lines * 1e6
            print(f"{kind:<7}{lines:>9}{wall:>9.2f}{cpu:>9.2f}{per_line:>17.1f}{peak:>10.0f}{found:>13}", flush=True)
            if not options.keep:
                path.unlink()
    if not options.keep:
        folder.rmdir()


if __name__ == "__main__":
    main()
