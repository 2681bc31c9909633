"""What a verify run observed, read back from the children's event files, and the verdicts given."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["confirmed", "not-reproduced", "not-run"]


@dataclass
class RunRecord:
    script: str  # absolute path of the user's file
    events: list[dict[str, Any]]
    output: str
    returncode: int | None
    timed_out: bool
    lines: set[int] = field(default_factory=set)

    @classmethod
    def read(cls, script: str, trace_dir: Path, output: str, returncode: int | None, timed_out: bool) -> RunRecord:
        events: list[dict[str, Any]] = []
        for path in sorted(trace_dir.glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a process killed mid-write
        real = os.path.realpath(script)
        lines = {n for e in events if e["event"] == "lines" and os.path.realpath(e["file"]) == real for n in e["lines"]}
        return cls(script, events, output, returncode, timed_out, lines)

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.of("error")


@dataclass(frozen=True)
class Evidence:
    """Why a verdict was given: the real error where there was one, and the mechanism in one sentence."""

    mechanism: str
    error_type: str | None = None
    message: str | None = None
    user_frame: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "error_type": self.error_type, "message": self.message, "user_frame": self.user_frame}


@dataclass(frozen=True)
class Judgement:
    status: Status
    evidence: Evidence
    explains: tuple[int, ...] = ()  # indices into RunRecord.errors that this verdict accounts for
