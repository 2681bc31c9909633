"""PFL301, observed by running the script unchanged: children started with spawn or forkserver re-import it.

A script with a finding that fails only where the platform's default start method re-imports it (a DataLoader's
workers, a pool, an executor) runs twice, with spawn (the default on macOS and Windows) and then forkserver (the
default on Linux from Python 3.14) made the default, whatever this machine's default is.
"""

from __future__ import annotations

import os
import re

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.child.start_methods import RE_IMPORTING, SCRIPTS
from pitfall_lint.harness.probes.base import SPAWN_ECHOES, Probe, errors_signed, signature
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

BOOTSTRAPPING = "An attempt has been made to start a new process before the current process has finished its bootstrapping phase"

# The rule's words for a finding that depends on the platform's default start method.
_DEFAULT_METHOD = "the default start method is spawn"
_WHERE_DEFAULT = {"spawn": "spawn (macOS, Windows)", "forkserver": "forkserver (Linux from Python 3.14)"}
# The parent then learns that its children died: part of the same failure.
_CONSEQUENCES = SPAWN_ECHOES | {"BrokenProcessPool"}
_DEAD_LOADER_WORKERS = "DataLoader worker (pid"


def _flat(text: str | None) -> str:
    return " ".join((text or "").split())


class MainGuardProbe(Probe):
    code = "PFL301"
    kinds = frozenset({"script"})
    signatures = (signature("RuntimeError", r"\s+".join(map(re.escape, BOOTSTRAPPING.split())),
                            "a child started with spawn or forkserver re-imported the script and started processes "
                            "again before it had finished bootstrapping", telling=True),)
    remedy = "start processes only under `if __name__ == \"__main__\":`"

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        """The files whose findings depend on the default start method: run as the script, they run under each."""
        scripts = sorted({f.path for f in findings if _DEFAULT_METHOD in f.message})
        return {SCRIPTS: os.pathsep.join(scripts)} if scripts else {}

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        if _DEFAULT_METHOD in finding.message and not any(e.get("start_method") for e in run.of("start")):
            return None  # run as imported by another script, with this machine's default: maybe fork
        explained = tuple(errors_signed(run, self.signatures))
        if BOOTSTRAPPING in _flat(run.output) or explained:
            children = [run.errors[i] for i in explained]
            explained += tuple(
                i for i, e in enumerate(run.errors)
                if e.get("type") in _CONSEQUENCES or _DEAD_LOADER_WORKERS in (e.get("message") or "")
            )
            child = children[0] if children else next((run.errors[i] for i in explained), None)
            return Judgement(
                "confirmed",
                Evidence(_mechanism(finding, run, children), "RuntimeError", BOOTSTRAPPING + ".",
                         child.get("user_frame") if child else None),
                explained,
            )
        if run.returncode == 0:
            return Judgement("not-reproduced", Evidence("the workers started and the script ran to the end"))
        return None


def _mechanism(finding: Diagnostic, run: RunRecord, children: list[dict]) -> str:
    """Which start methods the run set as the default, and under which the children failed."""
    defaults = [m for m in RE_IMPORTING if any(e.get("start_method") == m for e in run.of("start"))]
    methods = [m for m in RE_IMPORTING if any(c.get("started_with") == m for c in children)]
    made = " and then ".join(_WHERE_DEFAULT[m] for m in defaults)
    run_as = f"run with {made} as the default start method: " if defaults else ""
    started = f"children started with {' and with '.join(methods)}" if methods else "a spawned child"
    return (f"{run_as}{started} re-imported the script and reached {run.line_name(finding.path, finding.line)} again, starting processes "
            "before the current process had finished bootstrapping")
