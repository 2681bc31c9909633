"""`pitfall-lint verify` over real third-party training scripts and model files, as a new user would run it.

    python bench/verify_realworld.py CORPUS_DIR [--manifest bench/verify_realworld.json] [--only NAME] [--timeout S]

The repositories are fetched for the measurement and never committed: CORPUS_DIR holds one checkout per
repository, named as the repository (`CORPUS_DIR/examples` for pytorch/examples). The manifest names, per
script, the repository, the commit it was measured at, the path, and the arguments its README passes
(`args`), run from the folder its README runs it in (`cwd`, default: the script's folder). Run it with the torch
users get (the CUDA build, with torchvision) to measure what they meet.

Per script the table gives the verdicts, how far the run went (the flagged lines it reached; whether it ran to the
end of its step budget), the reason verify gave, the seconds, and the run's category:
  confirmed        a finding confirmed with the real error
  ran to the end   the run reached the end of its step budget (its flagged lines reached or not: the column says)
  parallel failure a failure no finding explains that a run on one device or one rank does not have (a pitfall
                   no rule flags), with the line to fix
  environment      stopped by the user's environment, with a next step (an argument, a package, data, a GPU, the
                   line of the code's own error to fix)
  verify itself    stopped by verify: a stand-in, a virtual device, the budget, a timeout, a crash of the harness
  no next step     stopped with a reason that names no next step
  FALSE GREEN      said clean ("passed") without reaching every flagged line: a bug, always
After each run the bench checks that no process of the run is alive (every process carries a marker in its
environment) and that the repository's files (paths, sizes, modification times) are unchanged, and the summary
says both. Every run ends within --wall seconds (120): verify's own --timeout is set below it. Nothing here
asserts a result.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pitfall_lint.harness.reasons import BUDGET_ENDED

REPO = Path(__file__).resolve().parents[1]
# Reasons whose next step is the user's, recognised by the sentence verify gives them.
_NEXT_STEP = re.compile(
    r"pass them after `--`|pip install|is part of the project|needs CUDA|run verify on a GPU machine|--allow-network"
    r"|the data or file it reads is missing|lower the work with the script's own options|a longer --timeout would not help"
    r"|run verify again with a longer --timeout"
    r"|add pitfall_lint_example|needs constructor arguments|can shape only one|--nproc N gives it|under another package"
    r"|use a torch built with MPI|run verify on a machine with N GPUs|after `--`"
    r"|before the command \(|runs it under torchrun: pitfall-lint verify"
    r"|PYTHONPATH=\S+ pitfall-lint verify "  # the command line that finds the repository's own package
    r"|; fix \S+:\d+ "  # the line of the code's own error, or of a parallel failure, told by the control run
)
# Reasons that are verify's own doing: its budget and timeouts, its stand-ins and virtual devices, its crashes.
_VERIFY_ITSELF = re.compile(
    r"verify's own limit|did not finish within|still going after|internal error in verify|PythonDispatcher"
    r"|record_stream|pitfall_lint|stand-in|Can't pickle|PicklingError|the bench stopped it"
)
# A run that ended by itself, or that verify ended at its step budget.
_ENDED = ("finished", "ran to the end of its step budget")
CATEGORIES = ("confirmed", "ran to the end", "parallel failure", "environment", "verify itself", "no next step",
              "FALSE GREEN")


def _commit(folder: Path) -> str:
    completed = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
    return completed.stdout.strip()


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under the folder with its size and modification time: what a run must leave as it found it."""
    listing = {}
    for parent, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(parent, name)
            stat = os.lstat(path)
            listing[os.path.relpath(path, folder)] = (stat.st_size if not os.path.isdir(path) else 0, stat.st_mtime_ns)
    return listing


def _changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    added = [f"+{p}" for p in after.keys() - before.keys()]
    removed = [f"-{p}" for p in before.keys() - after.keys()]
    modified = [f"~{p}" for p in before.keys() & after.keys() if before[p] != after[p]]
    return sorted(added + removed + modified)


def _alive(marker: str) -> list[int]:
    """The processes that carry this run's marker in their environment."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            alive.append(int(entry))
    return alive


def _how_far(report: dict[str, Any]) -> str:
    findings = report.get("findings", [])
    reached = sum(f["status"] != "not-run" for f in findings)
    flagged = f"reached {reached}/{len(findings)} flagged" if findings else "nothing flagged"
    end = "to the end" if report.get("outcome", "").startswith(_ENDED) and not report.get("stop") else "stopped short"
    return f"{flagged}, {end}" if report else "no report"


def _judge(returncode: int, report: dict[str, Any], stderr: str) -> tuple[str, str, str]:
    """(verdicts, reason, category)."""
    findings = report.get("findings", [])
    verdicts = ", ".join(f"{f['code']}:{f['line']} {f['status']}" for f in findings) or "no probed finding"
    error = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    reason = error.removeprefix("error: ").split(": ", 1)[-1] if returncode != 0 else ""
    unreached = any(f["status"] == "not-run" for f in findings)
    if returncode == 1 and any(f["status"] == "confirmed" for f in findings):
        return verdicts, "", "confirmed"
    if returncode == 0:
        ended = report.get("outcome", "").startswith(_ENDED) and not report.get("stop")
        return verdicts, "", "FALSE GREEN" if unreached or not ended else "ran to the end"
    if "the program ran to its end without reaching it" in reason or reason.startswith(BUDGET_ENDED):
        return verdicts, reason, "ran to the end"
    if _VERIFY_ITSELF.search(reason) or returncode not in (1, 2):
        return verdicts, reason or f"exit code {returncode}", "verify itself"
    if any(f.get("parallel_only") for f in report.get("unexplained", [])):
        return verdicts, reason, "parallel failure"
    return verdicts, reason, "environment" if _NEXT_STEP.search(reason) else "no next step"


def _run(argv: list[str], cwd: Path, env: dict[str, str], wall: float) -> tuple[int, str, str]:
    """The verify run, stopped as a user would (SIGTERM, then SIGKILL) if it outlasts the wall-clock limit."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=wall)
        return process.returncode, stdout, stderr
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        return process.returncode, stdout, stderr + f"\nerror: the bench stopped it after {wall:g} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--manifest", type=Path, default=REPO / "bench" / "verify_realworld.json")
    parser.add_argument("--only", help="run only the entries whose name contains this")
    parser.add_argument("--timeout", type=float, default=50.0,
                        help="verify's --timeout; a verify may run twice (the script, then a model it never called)")
    parser.add_argument("--wall", type=float, default=120.0, help="seconds after which the bench stops a verify")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--python-path", help="put this in front of PYTHONPATH for the runs (packages the scripts need)")
    options = parser.parse_args()
    entries = json.loads(options.manifest.read_text())
    results = []
    print(f"{'script':<62} {'exit':>4} {'time':>5}  {'category':<14} {'how far':<36} verdicts | reason", flush=True)
    for entry in entries:
        name = f"{entry['repo']}:{entry['path']}"
        if options.only and options.only not in name:
            continue
        checkout = options.corpus / entry["repo"].split("/")[1]
        script = checkout / entry["path"]
        if not script.exists():
            print(f"{name:<62} missing: fetch {entry['repo']} at {entry['commit'][:10]} into {checkout}")
            continue
        commit = _commit(checkout)
        if commit and not commit.startswith(entry["commit"]):
            print(f"  note: {entry['repo']} is at {commit[:10]}, the manifest was measured at {entry['commit'][:10]}")
        cwd = checkout / entry.get("cwd", str(Path(entry["path"]).parent))
        marker = f"PITFALL_LINT_BENCH_RUN={uuid.uuid4().hex}"
        env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
        if options.python_path:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [options.python_path, env.get("PYTHONPATH")]))
        argv = [sys.executable, "-m", "pitfall_lint", "verify", "--format", "json", "--timeout", f"{options.timeout:g}",
                str(script.relative_to(cwd)) if script.is_relative_to(cwd) else str(script),
                *entry.get("verify_args", []), "--", *entry.get("args", [])]
        before = _listing(checkout)
        with tempfile.TemporaryDirectory(prefix="verify-realworld-") as scratch:
            env["TMPDIR"] = scratch
            started = time.monotonic()
            returncode, stdout, stderr = _run(argv, cwd, env, options.wall)
            seconds = time.monotonic() - started
            left_scratch = os.listdir(scratch)
        alive = _alive(marker)
        for pid in alive:  # the bench's own clean-up, after it has counted them
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        changed = _changed(before, _listing(checkout))
        try:
            report = json.loads(stdout)
        except ValueError:
            report = {}
        verdicts, reason, category = _judge(returncode, report, stderr)
        results.append({"name": name, "exit": returncode, "seconds": round(seconds, 1), "category": category,
                        "how_far": _how_far(report), "verdicts": verdicts, "reason": reason,
                        "stop": report.get("stop"), "notes": report.get("notes", []),
                        "unexplained": report.get("unexplained", []), "alive": alive, "changed": changed,
                        "scratch_left": left_scratch, "stderr_tail": stderr.strip().splitlines()[-3:]})
        text = verdicts + (f" | {reason}" if reason else "")
        trouble = (f" [ALIVE {alive}]" if alive else "") + (f" [CHANGED {changed[:5]}]" if changed else "") + (
            f" [SCRATCH LEFT {left_scratch}]" if left_scratch else "")
        print(f"{name:<62} {returncode:>4} {seconds:>4.0f}s  {category:<14} {_how_far(report):<36} {text}{trouble}",
              flush=True)
    _summary(results)
    if options.json:
        options.json.write_text(json.dumps(results, indent=2) + "\n")


def _summary(results: list[dict[str, Any]]) -> None:
    total = max(len(results), 1)
    print(f"\n{len(results)} runs of {len({r['name'].split(':')[0] for r in results})} repositories:")
    for category in CATEGORIES:
        count = sum(r["category"] == category for r in results)
        print(f"  {category:<16} {count:>3}  ({100 * count / total:.0f} %)")
    rules = {v.split(":")[0] for r in results for v in r["verdicts"].split(", ") if v.endswith(" confirmed")}
    confirmations = sum(v.endswith(" confirmed") for r in results for v in r["verdicts"].split(", "))
    print(f"  {confirmations} confirmations of {len(rules)} rules ({', '.join(sorted(rules))})")
    slowest = max((r["seconds"] for r in results), default=0)
    print(f"  longest run {slowest:.0f} s")
    alive = [r["name"] for r in results if r["alive"]]
    changed = [r["name"] for r in results if r["changed"]]
    scratch = [r["name"] for r in results if r["scratch_left"]]
    print(f"  processes left alive after the run: {len(alive)}" + (f" ({', '.join(alive)})" if alive else ""))
    print(f"  repositories whose files changed: {len(changed)}" + (f" ({', '.join(changed)})" if changed else ""))
    print(f"  scratch folders left: {len(scratch)}" + (f" ({', '.join(scratch)})" if scratch else ""))


if __name__ == "__main__":
    main()
