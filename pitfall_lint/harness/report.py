"""The verify report for people (text) and for programs (json)."""

from __future__ import annotations

import json
import linecache
from typing import TextIO

from pitfall_lint import __version__
from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.verify import VerifyReport
from pitfall_lint.harness.words import counted


def _frame(frame: dict | None) -> str:
    if not frame:
        return ""
    text = frame.get("code") or linecache.getline(frame["file"], frame["line"])
    code = f": {text.strip()}" if text.strip() else ""
    line = f"cell {frame['cell']}:{frame['cell_line']}" if frame.get("cell") else frame["line"]
    return f"at {frame['file']}:{line} in {frame['function']}{code}"


def _place(finding: Diagnostic) -> str:
    return f"{finding.path}:cell {finding.cell}:{finding.line}" if finding.cell is not None else f"{finding.path}:{finding.line}"


def write_text(report: VerifyReport, out: TextIO) -> None:
    out.write(f"verify {report.path}: {report.mode}" + (f" ({report.seconds:.1f} s)" if report.seconds else "") + "\n")
    out.write(f"  why this way: {report.plan.reason}\n")
    if report.scratch:
        out.write(f"  run {report.outcome}; checkpoints were redirected to {report.scratch} (deleted)\n")
        out.write(f"  network: {report.isolation}\n")
        out.write(f"  files: {report.sealed}; " + (
            f"the run wrote {counted(len(report.written), 'file')}, "
            f"{'not kept' if len(report.written) == 1 else 'none of them kept'}: {', '.join(report.written[:8])}"
            + (" ..." if len(report.written) > 8 else "") if report.written else "the run wrote nothing there") + "\n")
    if report.stop:
        out.write(f"  stopped short: {report.stop}\n")
    for note in report.notes:
        out.write(f"  note: {note}\n")
    for verdict in report.verdicts:
        f = verdict.finding
        found = " (found at run time)" if verdict.runtime_only else ""
        out.write(f"{_place(f)}: {f.code} {verdict.status}{found}\n")
        if verdict.runtime_only:
            out.write(f"    {f.message}\n")
        evidence = verdict.evidence
        if evidence.error_type:
            out.write(f"    {evidence.error_type}: {evidence.message}\n")
        if evidence.user_frame:
            out.write(f"    {_frame(evidence.user_frame)}\n")
        out.write(f"    {evidence.mechanism}\n")
        if verdict.mode != report.mode:
            out.write(f"    run: {verdict.mode}\n")
    for failure in report.unexplained:
        rank = f" (rank {failure['rank']})" if failure.get("rank") is not None else ""
        parallel = " parallel" if failure.get("parallel_only") else ""
        # A replica's error comes back with its type in the message ("RuntimeError: ..."): said once.
        message = str(failure["message"]).removeprefix(f"{failure['type']}: ")
        out.write(f"unexplained{parallel} failure{rank}: {failure['type']}: {message}\n")
        if failure.get("user_frame"):
            out.write(f"    {_frame(failure['user_frame'])}\n")
    counts = {s: sum(v.status == s for v in report.verdicts) for s in ("confirmed", "not-reproduced", "not-run")}
    if not report.verdicts:
        out.write("No finding with a runtime probe in this file.\n")
    else:
        out.write(", ".join(f"{n} {s}" for s, n in counts.items()) + ".\n")


def write_json(report: VerifyReport, out: TextIO) -> None:
    document = {
        "version": __version__,
        "path": report.path,
        "run": report.plan.kind,
        "why": report.plan.reason,
        "mode": report.mode,
        "seconds": round(report.seconds, 2),
        "outcome": report.outcome,
        "network": report.isolation,
        "files": report.sealed,
        "written": report.written,
        "stop": report.stop,
        "notes": report.notes,
        "findings": [
            {
                "code": v.finding.code,
                "name": v.finding.name,
                "path": v.finding.path,
                "line": v.finding.line,
                "cell": v.finding.cell,
                "status": v.status,
                "found_at_run_time": v.runtime_only,
                "evidence": v.evidence.as_dict(),
                "mode": v.mode,
                "seconds": v.seconds,
            }
            for v in report.verdicts
        ],
        "unexplained": report.unexplained,
    }
    json.dump(document, out, indent=2)
    out.write("\n")
