"""PFL306: a hard-coded port, observed by holding it first, as a second job on the machine would."""

from __future__ import annotations

import linecache
import re

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import SPAWN_ECHOES, Probe, errors_signed, signature
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

_PORT = re.compile(r"(?<![\d.])(\d{4,5})(?!\d)")


def _port_on(line: str) -> int | None:
    ports = [int(p) for p in _PORT.findall(line) if 1024 <= int(p) <= 65535]
    return ports[0] if ports else None


def _ports(findings: list[Diagnostic]) -> list[int]:
    """The fixed ports the findings' lines name: verify holds them, as a second job on the machine would."""
    return sorted({port for f in findings if (port := _port_on(linecache.getline(f.path, f.line))) is not None})


class HardcodedPortProbe(Probe):
    code = "PFL306"
    kinds = frozenset({"script", "distributed", "notebook"})
    # torch 2.x's DistNetworkError (errno 98 as EADDRINUSE); torch 1.x's RuntimeError; a socket the script binds.
    signatures = (signature("DistNetworkError DistStoreError RuntimeError OSError",
                            r"EADDRINUSE|[Aa]ddress already in use",
                            "the port was already taken, as by a second job on the machine, so the script could not "
                            "start"),)

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        ports = _ports(findings)
        return {"PITFALL_LINT_HOLD_PORTS": ",".join(map(str, ports))} if ports else {}

    def lifted(self, findings: list[Diagnostic]) -> str | None:
        ports = _ports(findings)
        return f"with port {', '.join(map(str, ports))} free" if ports else None

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        held = [e["port"] for e in run.of("port-held") if not e.get("error")]
        if not held:
            return None
        failures = tuple(errors_signed(run, self.signatures))
        if failures:
            error = run.errors[failures[0]]
            said = next(found for known in self.signatures if (found := known.matches(error)) is not None)
            return Judgement(
                "confirmed",
                Evidence(
                    f"with port {held[0]} already taken (as by a second job on the machine), the script could not start",
                    *said,
                    error.get("user_frame"),
                ),
                failures + tuple(i for i, e in enumerate(run.errors) if e.get("type") in SPAWN_ECHOES),
            )
        if "EADDRINUSE" in run.output or "address already in use" in run.output.lower():
            return Judgement("confirmed", Evidence(f"with port {held[0]} already taken, the rendezvous failed: address already in use"))
        if run.returncode == 0:
            return Judgement("not-reproduced", Evidence(f"the script ran to the end although port {held[0]} was taken"))
        return None
