"""`pitfall-lint verify` over real third-party training scripts and model files, as a new user would run it.

    python bench/verify_realworld.py CORPUS_DIR [--manifest bench/verify_realworld.json] [--only NAME] [--timeout S]

The repositories are fetched for the measurement and never committed: CORPUS_DIR holds one checkout per
repository, named as the repository (`CORPUS_DIR/examples` for pytorch/examples). The manifest names, per
script, the repository, the commit it was measured at, the path, and the arguments its README passes
(`args`), run from the folder its README runs it in (`cwd`, default: the script's folder). For each script the
table gives the verdicts and, when there is none, the one-line reason verify gave; the last column says whether
the answer is useful: a confirmed finding, a clean run that reached the end (every flagged line run), or a
reason the user can act on (an argument to pass, a package to install, data to provide, a GPU to use).
Nothing here asserts a result.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Reasons the user can act on, recognised by the sentence verify gives them.
_ACTIONABLE = re.compile(
    r"pass them after `--`|pip install|is part of the project|needs CUDA|run verify on a GPU machine|--allow-network"
    r"|the data or file it reads is missing|lower the work with the script's own options|a longer --timeout would not help"
    r"|add pitfall_lint_example|needs constructor arguments|can shape only one|--nproc N gives it|under another package"
    r"|use a torch built with MPI|run verify on a machine with N GPUs"
)


def _commit(folder: Path) -> str:
    completed = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
    return completed.stdout.strip()


def _judge(returncode: int, report: dict[str, Any], stderr: str) -> tuple[str, str, bool]:
    """(verdicts, reason, useful)."""
    findings = report.get("findings", [])
    verdicts = ", ".join(f"{f['code']}:{f['line']} {f['status']}" for f in findings) or "no probed finding"
    error = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    reason = error.removeprefix("error: ").split(": ", 1)[-1] if returncode == 2 else ""
    if returncode == 1:
        return verdicts, "", True
    if returncode == 0:
        return verdicts, "ran to its end N-way" + ("" if findings else ", nothing to confirm"), True
    return verdicts, reason, bool(_ACTIONABLE.search(reason))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--manifest", type=Path, default=REPO / "bench" / "verify_realworld.json")
    parser.add_argument("--only", help="run only the entries whose name contains this")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--python-path", help="put this in front of PYTHONPATH for the runs (packages the scripts need)")
    options = parser.parse_args()
    entries = json.loads(options.manifest.read_text())
    results = []
    print(f"{'script':<58} {'exit':>4} {'time':>6}  useful  verdicts / reason")
    for entry in entries:
        name = f"{entry['repo']}:{entry['path']}"
        if options.only and options.only not in name:
            continue
        checkout = options.corpus / entry["repo"].split("/")[1]
        script = checkout / entry["path"]
        if not script.exists():
            print(f"{name:<58} missing: fetch {entry['repo']} at {entry['commit'][:10]} into {checkout}")
            continue
        commit = _commit(checkout)
        if commit and not commit.startswith(entry["commit"]):
            print(f"  note: {entry['repo']} is at {commit[:10]}, the manifest was measured at {entry['commit'][:10]}")
        cwd = checkout / entry.get("cwd", str(Path(entry["path"]).parent))
        started = time.monotonic()
        env = dict(os.environ)
        if options.python_path:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [options.python_path, env.get("PYTHONPATH")]))
        completed = subprocess.run(
            [sys.executable, "-m", "pitfall_lint", "verify", "--format", "json", "--timeout", str(options.timeout),
             str(script.relative_to(cwd)) if script.is_relative_to(cwd) else str(script), *entry.get("verify_args", []),
             "--", *entry.get("args", [])],
            cwd=cwd, capture_output=True, text=True, timeout=options.timeout + 120, env=env,
        )
        seconds = time.monotonic() - started
        try:
            report = json.loads(completed.stdout)
        except ValueError:
            report = {}
        verdicts, reason, useful = _judge(completed.returncode, report, completed.stderr)
        results.append({"name": name, "exit": completed.returncode, "seconds": round(seconds, 1), "verdicts": verdicts,
                        "reason": reason, "useful": useful, "notes": report.get("notes", [])})
        text = verdicts + (f" | {reason}" if reason else "")
        print(f"{name:<58} {completed.returncode:>4} {seconds:>5.0f}s  {'yes' if useful else 'NO':<6}  {text}")
    useful = sum(r["useful"] for r in results)
    confirmed = sum(" confirmed" in r["verdicts"] for r in results)
    print(f"\n{useful} of {len(results)} scripts got a useful answer ({100 * useful / max(len(results), 1):.0f} %); "
          f"{confirmed} with a confirmed finding.")
    if options.json:
        options.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
