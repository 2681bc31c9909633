"""The run as it goes, from the children's event files: what to show on a terminal, and when waiting is pointless."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pitfall_lint.harness.probes.main_guard import BOOTSTRAPPING
from pitfall_lint.harness.reasons import BUDGET_ENDED, NO_STEP_YET, batch_to_lower, shown_path
from pitfall_lint.harness.words import counted

_BOOTSTRAP_FAILURES_TO_STOP = 3  # a Pool started at import time respawns its failing workers forever
# Two processes that asked for one rank and neither failed within this time wait for a group that cannot form.
_COLLISION_SECONDS = 3.0
# The program repeats itself once a step ran with no new line of the project since the last new one, for this long
# (above the children's one-second coverage flush) or a tenth of the timeout, whichever is longer.
_REPEATING_SECONDS = 3.0
# How long a run is given for its first optimizer step once it asks for batches, at the script's own large batch
# size: this share of the timeout, or these seconds, whichever is longer.
_FIRST_STEP_SHARE = 0.15
_FIRST_STEP_SECONDS = 5.0


class Monitor:
    def __init__(self, trace_dir: Path, budget: int = 0, flagged: frozenset[tuple[str, int]] = frozenset(),
                 timeout: float = float("inf"), given: tuple[str, ...] | None = None) -> None:
        """`budget` is --steps (0: none), `flagged` the (real path, line) of the findings the run should reach,
        `given` the script's arguments when a run with no step may be stopped to run again with a smaller batch."""
        self._given = given
        self._bounds: list[dict[str, Any]] = []
        self._loading_since: float | None = None
        self._trace_dir = trace_dir
        self._budget = budget
        self._flagged = flagged
        self._timeout = timeout
        self._stepped: Counter[int] = Counter()  # by pid: the optimizer steps it made
        self._steps_since_new_lines: Counter[int] = Counter()
        self._covered: set[tuple[str, int]] = set()
        self._ended: set[int] = set()
        self._joined: set[int] = set()
        self._offsets: dict[Path, int] = {}
        self._started = self._new_lines_at = time.monotonic()
        self._steps: dict[Any, int] = {}
        self._ranks: set[Any] = set()
        self._phase = "starting"
        self._bootstrap_failures: Counter[str | None] = Counter()  # by start method: each runs the script on its own
        self._places: dict[int, dict[str, Any]] = {}  # by pid: node and local rank, as the launcher gave them
        self._joining: dict[int, dict[str, Any]] = {}  # by pid: the group-joining event of a process not yet joined
        self._failed: set[int] = set()
        self._collided_since: float | None = None

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
                self._stepped[event["pid"]] += 1
                self._steps_since_new_lines[event["pid"]] += 1
                self._phase = "training"
            elif kind == "lines":
                self._take_lines(event)
            elif kind == "arguments":
                self._bounds += event.get("bounds", [])
            elif kind == "loader":
                self._loading_since = self._loading_since or time.monotonic()
            elif kind == "exit":
                self._ended.add(event["pid"])
            elif kind == "group-joining":
                self._joining[event["pid"]] = event
                self._phase = "joining the process group" if self._phase == "starting" else self._phase
            elif kind == "group-joined":
                self._joining.pop(event["pid"], None)
                self._joined.add(event["pid"])
                self._phase = "running" if self._phase != "training" else self._phase
            elif kind == "launched":
                self._places[event["pid"]] = event
            elif kind == "error":
                self._failed.add(event["pid"])
                if BOOTSTRAPPING in " ".join((event.get("message") or "").split()):
                    self._bootstrap_failures[event.get("started_with")] += 1
            elif kind == "start" and self._phase == "starting":
                self._phase = "running"
        failures = max(self._bootstrap_failures.values(), default=0)
        if failures >= _BOOTSTRAP_FAILURES_TO_STOP:
            return (f"spawned workers failed {failures} times while importing the script (processes "
                    "started at import time, re-run by every child), so the run was stopped without waiting")
        return self._collision() or self._budget_spent() or self._no_step_yet()

    def _no_step_yet(self) -> str | None:
        """Batches are being drawn, no failure, and not one step in a good part of the timeout, at a batch size of
        the script's own default (ImageNet's 256 to 3200 images on a CPU): a run again with a small batch can get
        somewhere; waiting for the timeout cannot."""
        waited = max(self._timeout * _FIRST_STEP_SHARE, _FIRST_STEP_SECONDS)
        if self._given is None or self._stepped or self._failed or self._loading_since is None or (
                time.monotonic() - self._loading_since < waited):
            return None
        bound = batch_to_lower(self._bounds, self._given)
        return (f"{NO_STEP_YET} {waited:g} s after the first batches were asked for, at {bound['option']} "
                f"{bound['value']}") if bound else None

    def _take_lines(self, event: dict[str, Any]) -> None:
        lines = {(event["file"], line) for line in event.get("lines", ())}
        if not lines <= self._covered:
            self._covered |= lines
            self._new_lines_at = time.monotonic()
            self._steps_since_new_lines.clear()

    def _budget_spent(self) -> str | None:
        """Every process that steps made its --steps and then steps on through lines it already ran (an epoch loop of
        200 epochs, one batch each; a `while True` loop): the rest of the run is the same again, so waiting for the
        timeout is pointless. The flagged lines not reached yet get half the timeout to be reached."""
        stepping = [pid for pid in self._stepped if pid not in self._ended]
        if self._budget <= 0 or not stepping or self._joined - self._ended - self._stepped.keys():
            return None
        # A step past the budget, through no new line: the budget's own batches can be all the loop there is.
        if any(self._stepped[pid] <= self._budget or not self._steps_since_new_lines[pid] for pid in stepping):
            return None
        now = time.monotonic()
        if now - self._new_lines_at < max(_REPEATING_SECONDS, self._timeout / 10):
            return None
        if self._flagged - self._covered and now - self._started < self._timeout / 2:
            return None
        made = f"{counted(self._budget, 'optimizer step')} (--steps {self._budget})"
        if len(stepping) == 1:
            return f"{BUDGET_ENDED}: after its {made}, the program went on through lines it had already run"
        return (f"{BUDGET_ENDED}: after each of its {len(stepping)} processes made its {made}, they went on through "
                "lines they had already run")

    def _collision(self) -> str | None:
        """Processes waiting to join the process group as one rank: the group can never form, so waiting for the
        timeout is pointless (LOCAL_RANK passed as the rank, the same on every node)."""
        by_rank: dict[int, list[dict[str, Any]]] = {}
        for pid, event in self._joining.items():
            if event.get("asked_rank", -1) >= 0 and pid not in self._failed:
                by_rank.setdefault(event["asked_rank"], []).append(event)
        shared = sorted((rank, events) for rank, events in by_rank.items() if len(events) > 1)
        if not shared:
            self._collided_since = None
            return None
        now = time.monotonic()
        self._collided_since = self._collided_since or now
        if now - self._collided_since < _COLLISION_SECONDS:
            return None
        rank, events = shared[0]
        places = [self._places.get(e["pid"], {}) for e in events]
        where = f" at {shown_path(events[0]['file'])}:{events[0].get('line')}" if events[0].get("file") else ""
        nodes = sorted({p.get("node") for p in places if p.get("node") is not None})
        local = all(p.get("local_rank") == rank for p in places) and len(nodes) > 1
        named = ", ".join(map(str, nodes[:-1])) + f" and {nodes[-1]}" if nodes else ""
        who = (f"the processes of nodes {named} each asked{where} to join as rank {rank} (their local rank)" if local
               else f"{counted(len(events), 'process', 'processes')} asked{where} to join as rank {rank}")
        why = ("; the script passes LOCAL_RANK where the global rank belongs (RANK, or no rank= at all: the launcher's "
               "environment gives it)" if local else "")
        return (f"ranks collided: {who}, so the process group of {events[0].get('world_size')} could never form and "
                f"the run was stopped without waiting{why}")

    def status(self) -> str:
        steps = ", ".join(f"rank {r} step {s}" if r is not None else f"step {s}" for r, s in sorted(self._steps.items(), key=str))
        ranks = counted(len(self._ranks), "rank") if self._ranks and not steps else steps
        parts = [self._phase, ranks, f"{time.monotonic() - self._started:.0f} s"]
        return " | ".join(p for p in parts if p)
