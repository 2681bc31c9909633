"""PFL305 and PFL307: what a launcher gives each process, observed by launching the script the way it goes wrong.

PFL305 needs two nodes (on one node RANK == LOCAL_RANK and both pitfalls hide): two torch.distributed.run agents on
loopback, one c10d rendezvous. PFL307 needs the launcher that passes the flag: `python -m torch.distributed.launch`
(torchrun passes none).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from typing import Any

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.child.nodes import RECORD_WRITES
from pitfall_lint.harness.probes.base import Command, Launch, Probe, at, errors_signed, last_line, signature
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord
from pitfall_lint.harness.words import counted

_UNRECOGNIZED = "error: unrecognized arguments: --local-rank="
# A `--local_rank` that is required is never given: argparse says so before it names the flag it did not know.
_REQUIRED = re.compile(r"error: the following arguments are required: (.*, )?--local_rank\b")
_INVALID_ORDINAL = signature("RuntimeError AcceleratorError", "invalid device ordinal",
                             "a rank picked a device its node does not have")
# What the agents raise when a rank failed: its own report, and on the other node the rendezvous store gone with
# the failed node's agent (or the stop that ends the job): echoes of the failure a verdict explains.
_AGENT_ECHOES = frozenset({"ChildFailedError", "RendezvousConnectionError", "RendezvousClosedError", "SignalException"})


def _agent_failures(run: RunRecord) -> tuple[int, ...]:
    return tuple(i for i, e in enumerate(run.errors) if e.get("type") in _AGENT_ECHOES and e.get("rank") is None)


def _places(run: RunRecord) -> dict[int, dict[str, Any]]:
    """Where each process ran (node, local rank), by pid."""
    return {e["pid"]: e for e in run.of("launched")}


def _who(event: dict[str, Any], places: dict[int, dict[str, Any]]) -> str:
    place = places.get(event["pid"], event)
    return f"rank {event.get('rank')} (node {place.get('node')}, local rank {place.get('local_rank')})"


class RankVsLocalRankProbe(Probe):
    code = "PFL305"
    kinds = frozenset({"distributed"})
    signatures = (_INVALID_ORDINAL,)

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        return {RECORD_WRITES: "1"} if findings else {}

    def lifted(self, findings: list[Diagnostic]) -> str:
        return "on one node"

    def launch(self, findings: list[Diagnostic], launch: Launch) -> Command:
        per_node = max(1, launch.nproc // 2)
        command = [
            sys.executable, "-m", "pitfall_lint.harness.child.two_nodes", str(per_node), str(launch.port), launch.script,
            *launch.script_args,
        ]
        return Command(command, f"2 nodes x {counted(per_node, 'rank')} under torch.distributed.run (two agents on loopback)",
                       per_node, nodes=2)

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        places = _places(run)
        picks = [e for e in run.of("device-pick") if at(e, finding)]
        if picks:
            return self._device(picks, places, run)
        writes = [e for e in [*run.of("save"), *run.of("write")] if at(e, finding) and e.get("path")]
        if writes:
            return self._writers(writes, places)
        return None

    @staticmethod
    def _device(picks: list[dict[str, Any]], places: dict[int, dict[str, Any]], run: RunRecord) -> Judgement:
        chosen = "; ".join(
            f"{_who(p, places)} picked cuda:{p['index']}, its node having {p['devices']}"
            for p in sorted(picks, key=lambda p: p.get("rank") or 0)
        )
        missing = [p for p in picks if p["index"] >= p["devices"]]
        if not missing:
            return Judgement("not-reproduced", Evidence(f"every rank picked a device its node has: {chosen}"))
        failures = tuple(i for i in errors_signed(run, (_INVALID_ORDINAL,)) if run.errors[i]["pid"] in {p["pid"] for p in missing})
        error = run.errors[failures[0]] if failures else None
        pickers = {p["pid"] for p in picks}
        virtual = any(e["pid"] in pickers for e in run.of("virtual-devices"))
        devices = " (virtual devices: one CUDA device per local process)" if virtual else ""
        return Judgement(
            "confirmed",
            Evidence(
                f"with RANK and LOCAL_RANK apart on two nodes{devices}, the global rank picked a device the node does not have: {chosen}",
                error.get("type") if error else None,
                error.get("message", "").splitlines()[0] if error else None,
                error.get("user_frame") if error else None,
            ),
            failures + _agent_failures(run),
        )

    @staticmethod
    def _writers(writes: list[dict[str, Any]], places: dict[int, dict[str, Any]]) -> Judgement:
        by_path: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for write in writes:
            by_path[write["path"]].append(write)
        path, writers = max(by_path.items(), key=lambda item: len({w["pid"] for w in item[1]}))
        nodes = {places.get(w["pid"], {}).get("node") for w in writers}
        who = " and ".join(sorted({_who(w, places) for w in writers}))
        if len({w["pid"] for w in writers}) > 1 and len(nodes) > 1:
            return Judgement(
                "confirmed",
                Evidence(f"{who} each wrote {path}: every node has a local rank 0, so the one writer is one per node"),
            )
        return Judgement("not-reproduced", Evidence(f"only {who} wrote {path}"))


class LegacyLocalRankProbe(Probe):
    code = "PFL307"
    kinds = frozenset({"distributed"})

    def lifted(self, findings: list[Diagnostic]) -> str:
        return "under torch.distributed.run"

    def launch(self, findings: list[Diagnostic], launch: Launch) -> Command:
        command = launch.agent("torch.distributed.launch", 1, launch.nproc, "pitfall_lint.harness.child.run_launched")
        return Command(command, f"{launch.nproc} ranks under python -m torch.distributed.launch (it passes --local-rank=<n>)",
                       launch.nproc)

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        rejected = sorted(line for line in run.output.splitlines() if _UNRECOGNIZED in line or _REQUIRED.search(line))
        exits = [e for e in run.of("exit") if e.get("status") == "exit" and e.get("code")]
        if rejected:
            frame = next((e["place"] for e in exits if e.get("place")), None)
            unset = "" if _UNRECOGNIZED in rejected[0] else " left the required --local_rank unset and"
            return Judgement(
                "confirmed",
                Evidence(
                    f"torch.distributed.launch passed --local-rank=<n> to each of {counted(len(rejected), 'rank')} and the "
                    f"parser, which knows only --local_rank,{unset} stopped each with exit code 2",
                    "SystemExit",
                    last_line(rejected[0]),
                    frame,
                ),
                _agent_failures(run),
            )
        if run.returncode == 0:
            return Judgement("not-reproduced", Evidence("the script took the --local-rank=<n> that torch.distributed.launch passed"))
        return None
