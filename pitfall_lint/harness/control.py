"""The control run: a failure that no finding explains, run again with one device or one rank, is told apart as the
code's own error (it fails the same way alone) or a parallel one (alone, the run gets past its line)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pitfall_lint.harness.probes.data_parallel import BoundMethodProbe
from pitfall_lint.harness.reasons import BUDGET_ENDED, TIMED_OUT, Stop, said, shown_path
from pitfall_lint.harness.record import RunRecord


@dataclass(frozen=True)
class Alone:
    """How the run is made one of a kind, in the words of its parallelism."""

    one: str  # "on one device"
    without: str  # "without DataParallel"
    only: str  # "only under 2-way DataParallel"
    how: str  # what --nproc 1 gives it
    units: str  # "replicas": what there would be several of

    @classmethod
    def of(cls, ranks: bool, count: int) -> Alone:
        if ranks:
            return cls("on one rank", "in a process group of one", f"only with {count} ranks", "a world size of 1", "ranks")
        return cls("on one device", "without DataParallel", f"only under {count}-way DataParallel",
                   "one CUDA device, where nn.DataParallel calls the module itself", "replicas")


@dataclass(frozen=True)
class Control:
    """What the control run showed: the run's stop as it now reads, the note that announces the control run, and
    whether the failure is a parallel one."""

    stop: Stop
    note: str
    parallel_only: bool = False


def wants_control(stop: Stop | None, run: RunRecord, confirmed: bool, unexplained: list[dict[str, Any]]) -> bool:
    """A run ended by an error that nothing explains: no finding confirmed, no next step of the user's environment
    (a package, data, an argument), not verify's own limit."""
    if stop is None or stop.error is None or stop.hint or confirmed or not unexplained:
        return False
    return not run.errors[stop.error].get("limit")


def judge(stop: Stop, run: RunRecord, control: RunRecord, control_stop: Stop | None, alone: Alone,
          seconds: float) -> Control:
    """The stop of the run, told by the control run (`control`, ended by `control_stop`)."""
    error = run.errors[stop.error] if stop.error is not None else {}
    frame = error.get("user_frame") or {}
    place = f"{shown_path(frame['file'])}:{frame['line']}" if frame.get("file") and frame.get("line") else None
    ran = f"verify ran it again {alone.one} (--nproc 1, {alone.how}; {seconds:.1f} s) to tell the code's own error " \
          "from a parallel one"
    event, field = ("data-parallel", "replicas") if alone.units == "replicas" else ("group-joined", "world_size")
    several = _most(control, event, field)
    if several > 1:
        return Control(stop, f"{ran}: inconclusive, the script still ran {several} {alone.units}")
    ended = control.errors[control_stop.error] if control_stop is not None and control_stop.error is not None else None
    if ended is not None and _signature(ended) == _signature(error):
        return Control(Stop(f"{stop.text}; it fails the same way {alone.one}, {alone.without}: the code's own error, "
                            "not a parallel one", f"fix {place or 'it'} and run verify again", stop.error),
                       f"{ran}: it failed the same way")
    if place is None:
        past = control_stop is None or control_stop.text.startswith(BUDGET_ENDED)
    else:
        failed_there = ended is not None and _place(ended) == _place(error)
        past = control.ran(frame["file"], frame["line"]) and not failed_there
    if not past:
        note = f"{ran}: inconclusive, {_why_not_past(place, ended is not None, control_stop)}"
        if control_stop is not None and control_stop.error is None and control_stop.text.startswith(TIMED_OUT):
            return out_of_time(stop, alone, f"the control run {alone.one} had {seconds:.0f} s, too few to reach "
                                            f"{place or 'the failing line'}", note)
        return Control(stop, note)
    return _parallel_only(stop, run, error, place, alone, ran)


def out_of_time(stop: Stop, alone: Alone, why: str, note: str) -> Control:
    """A control run that --timeout left too short: the reason names the longer run as the user's next step (the
    ImageNet example's DDP script spent 45 of its 50 s on a first run and the one at batch 8)."""
    return Control(Stop(stop.text, f"run verify again with a longer --timeout: {why}, and {alone.one} the run tells the "
                                   "code's own error from a parallel one", stop.error), note)


def _parallel_only(stop: Stop, run: RunRecord, error: dict[str, Any], place: str | None, alone: Alone,
                   ran: str) -> Control:
    """The failure shows only in parallel: what the run saw of it, and the line to fix."""
    past = f"{alone.one} the run gets past {place}" if place else f"{alone.one} the run does not fail"
    text = f"{stop.text}; it fails {alone.only}: {past}, so this is a parallel failure that no finding explains"
    note = f"{ran}: it got past {place}" if place else f"{ran}: it did not fail"
    bound = _bound_callable(run, error)
    if bound is None:
        hint = (f"fix {place}, where only the parallel run fails, and run verify again" if place
                else "run verify again once the parallel failure is fixed")
        return Control(Stop(text, hint, stop.error), note, parallel_only=True)
    made = bound.get("made_at") or {}
    target = f"{shown_path(made['file'])}:{made['line']}" if made.get("file") and made.get("line") else place
    remedy = ("make the function a method of the module, called through `self`" if made
              else "call the method through `self` rather than storing it on the module")
    hint = f"fix {target} so that each replica uses its own modules ({remedy})"
    return Control(Stop(f"{text}: {BoundMethodProbe().mechanism(error, run)}", hint, stop.error), note,
                   parallel_only=True)


def _why_not_past(place: str | None, failed: bool, control_stop: Stop | None) -> str:
    line = place or "the failing line"
    if control_stop is None:
        return f"it ran to its end without reaching {line}"
    if failed:
        return f"it failed before getting past {line}: {control_stop.text}"
    return f"it stopped before reaching {line}: {control_stop.text}"


def _bound_callable(run: RunRecord, error: dict[str, Any]) -> dict[str, Any] | None:
    """The callable stored on a replica and bound to the original module (a lambda closing over its submodules, a
    method of the original) that the failing frames ran, as the DataParallel emulation recorded it."""
    frames = error.get("frames") or ([error["user_frame"]] if error.get("user_frame") else [])
    called = {frame.get("function") for frame in frames}
    return next((b for e in run.of("data-parallel") for b in e.get("bound", []) if b["callable"] in called), None)


def _most(run: RunRecord, event: str, field: str) -> int:
    return max((int(e[field]) for e in run.of(event) if str(e.get(field)).isdigit()), default=0)


def _place(error: dict[str, Any]) -> tuple[str, int] | None:
    frame = error.get("user_frame") or {}
    return (os.path.realpath(frame["file"]), frame.get("line")) if frame.get("file") else None


def _signature(error: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two failures the same: the exception's type and the line of the code that raised it; without such a
    line, its message."""
    kind, message = said(error)
    place = _place(error)
    return (kind, place) if place is not None else (kind, message)
