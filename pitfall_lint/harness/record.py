"""What a verify run observed, read back from the children's event files, and the verdicts given."""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pitfall_lint.notebook import NotebookSource

Status = Literal["confirmed", "not-reproduced", "not-run"]
_STACK_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)", re.MULTILINE)


@dataclass
class RunRecord:
    script: str  # real path of the user's file
    events: list[dict[str, Any]]
    output: str
    returncode: int | None
    timed_out: bool
    lines: dict[str, set[int]] = field(default_factory=dict)  # real path -> lines that ran
    stacks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # pid -> main thread's frames when stopped
    stopped: str | None = None
    notebook: NotebookSource | None = None  # when the script is a notebook: its lines are the cells' joined

    @classmethod
    def read(
        cls, script: str, trace_dir: Path, output: str, returncode: int | None, timed_out: bool,
        user_path: Callable[[str], str] = lambda path: path, stopped: str | None = None,
        stopping_since: float | None = None,
    ) -> RunRecord:
        """The events of every process; errors raised once verify began stopping the run (the launcher's
        SignalException for verify's SIGTERM, a rank whose peer was killed first) are left out: the stop is
        verify's, not a failure of the script."""
        events: list[dict[str, Any]] = []
        for path in sorted(trace_dir.glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    event = _mapped(json.loads(line), user_path)
                except json.JSONDecodeError:
                    continue  # a process killed mid-write
                stopping = stopping_since is not None and event.get("time", 0) >= stopping_since
                if not (event["event"] == "error" and stopping):
                    events.append(event)
        lines: dict[str, set[int]] = defaultdict(set)
        for event in events:
            if event["event"] == "lines":
                lines[os.path.realpath(event["file"])].update(event["lines"])
        stacks = {int(p.stem): _main_thread(p.read_text(errors="replace"), user_path) for p in trace_dir.glob("*.stacks")}
        return cls(os.path.realpath(script), events, output, returncode, timed_out, dict(lines),
                   {pid: frames for pid, frames in stacks.items() if frames}, stopped)

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.of("error")

    def ran(self, path: str, line: int) -> bool:
        return line in self.lines.get(os.path.realpath(path), ())

    @property
    def reached_the_end(self) -> bool:
        """Every process ended by itself, without an error or an early exit."""
        exits = self.of("exit")
        return (
            not self.timed_out and self.stopped is None and self.returncode == 0 and not self.errors
            and all(e.get("status") == "ok" for e in exits)
        )

    def line_name(self, path: str | None, line: int | None) -> str:
        """A line as its reader counts it: 'line 12', or in the notebook that ran, 'cell 3, line 2'."""
        if self.notebook is not None and isinstance(line, int) and path and os.path.realpath(path) == self.script:
            cell, cell_line = self.notebook.origin(line)
            return f"cell {cell}, line {cell_line}"
        return f"line {line}"

    def rank_of(self, pid: int) -> int | None:
        return next((e["rank"] for e in self.events if e.get("pid") == pid and e.get("rank") is not None), None)


def _mapped(event: dict[str, Any], user_path: Callable[[str], str]) -> dict[str, Any]:
    """Paths of a run in a scratch copy, put back where they are in the user's tree."""
    for key in ("file", "path"):
        if isinstance(event.get(key), str):
            event[key] = user_path(event[key])
    for key in ("user_frame", "place", "set_at"):
        if isinstance(event.get(key), dict) and "file" in event[key]:
            event[key]["file"] = user_path(event[key]["file"])
    for frame in event.get("frames") or ():
        frame["file"] = user_path(frame["file"])
    for bound in event.get("bound") or ():  # a DataParallel replica's callable, where it was written
        if isinstance(bound.get("made_at"), dict) and "file" in bound["made_at"]:
            bound["made_at"]["file"] = user_path(bound["made_at"]["file"])
    return event


def _main_thread(text: str, user_path: Callable[[str], str]) -> list[dict[str, Any]]:
    """faulthandler's dump: the frames of the thread that was running Python code last (the main one), innermost
    first as faulthandler writes them."""
    blocks = _THREAD.split(text)
    if len(blocks) < 4:
        return []
    # blocks: [preamble, kind, id, body, kind, id, body, ...]; the main thread is the last one listed.
    body = blocks[-1]
    return [
        {"file": user_path(m["file"]), "line": int(m["line"]), "function": m["function"]}
        for m in _STACK_FRAME.finditer(body)
    ]


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
