"""The run as it goes, from the children's event files: what to show on a terminal, and when waiting is pointless."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pitfall_lint.harness.probes.main_guard import BOOTSTRAPPING
from pitfall_lint.harness.words import counted

_BOOTSTRAP_FAILURES_TO_STOP = 3  # a Pool started at import time respawns its failing workers forever


class Monitor:
    def __init__(self, trace_dir: Path) -> None:
        self._trace_dir = trace_dir
        self._offsets: dict[Path, int] = {}
        self._started = time.monotonic()
        self._steps: dict[Any, int] = {}
        self._ranks: set[Any] = set()
        self._phase = "starting"
        self._bootstrap_failures: Counter[str | None] = Counter()  # by start method: each runs the script on its own

    def _read_new_events(self) -> list[dict[str, Any]]:
        events = []
        for path in self._trace_dir.glob("*.jsonl"):
            offset = self._offsets.get(path, 0)
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._offsets[path] = offset + len(complete)
            for line in complete.splitlines():
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue
        return events

    def poll(self) -> str | None:
        """Takes in what happened since the last call; a reason to stop the run early, or None."""
        for event in self._read_new_events():
            kind = event.get("event")
            if event.get("rank") is not None:
                self._ranks.add(event["rank"])
            if kind == "step":
                self._steps[event.get("rank")] = event["step"]
                self._phase = "training"
            elif kind == "group-joining" and self._phase == "starting":
                self._phase = "joining the process group"
            elif kind == "group-joined" and self._phase != "training":
                self._phase = "running"
            elif kind == "error" and BOOTSTRAPPING in " ".join((event.get("message") or "").split()):
                self._bootstrap_failures[event.get("started_with")] += 1
            elif kind == "start" and self._phase == "starting":
                self._phase = "running"
        failures = max(self._bootstrap_failures.values(), default=0)
        if failures >= _BOOTSTRAP_FAILURES_TO_STOP:
            return (f"spawned workers failed {failures} times while importing the script (processes "
                    "started at import time, re-run by every child), so the run was stopped without waiting")
        return None

    def status(self) -> str:
        steps = ", ".join(f"rank {r} step {s}" if r is not None else f"step {s}" for r, s in sorted(self._steps.items(), key=str))
        ranks = counted(len(self._ranks), "rank") if self._ranks and not steps else steps
        parts = [self._phase, ranks, f"{time.monotonic() - self._started:.0f} s"]
        return " | ".join(p for p in parts if p)
