"""The verify report for people (text) and for programs (json)."""

from __future__ import annotations

import json
import linecache
from typing import TextIO

from pitfall_lint import __version__
from pitfall_lint.harness.verify import VerifyReport


def _frame(frame: dict | None) -> str:
    if not frame:
        return ""
    text = frame.get("code") or linecache.getline(frame["file"], frame["line"])
    code = f": {text.strip()}" if text.strip() else ""
    return f"at {frame['file']}:{frame['line']} in {frame['function']}{code}"


def write_text(report: VerifyReport, out: TextIO) -> None:
    out.write(f"verify {report.path}: {report.mode}" + (f" ({report.seconds:.1f} s)" if report.seconds else "") + "\n")
    out.write(f"  why this way: {report.plan.reason}\n")
    if report.scratch:
        out.write(f"  run {report.outcome}; checkpoints were redirected to {report.scratch} (deleted)\n")
        out.write(f"  network: {report.isolation}\n")
    for note in report.notes:
        out.write(f"  note: {note}\n")
    for verdict in report.verdicts:
        f = verdict.finding
        out.write(f"{f.path}:{f.line}: {f.code} {verdict.status}\n")
        evidence = verdict.evidence
        if evidence.error_type:
            out.write(f"    {evidence.error_type}: {evidence.message}\n")
        if evidence.user_frame:
            out.write(f"    {_frame(evidence.user_frame)}\n")
        out.write(f"    {evidence.mechanism}\n")
    for failure in report.unexplained:
        rank = f" (rank {failure['rank']})" if failure.get("rank") is not None else ""
        out.write(f"unexplained failure{rank}: {failure['type']}: {failure['message']}\n")
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
        "mode": report.mode,
        "seconds": round(report.seconds, 2),
        "outcome": report.outcome,
        "network": report.isolation,
        "notes": report.notes,
        "findings": [
            {
                "code": v.finding.code,
                "name": v.finding.name,
                "path": v.finding.path,
                "line": v.finding.line,
                "status": v.status,
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
