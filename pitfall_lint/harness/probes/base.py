"""The probe contract: judge one static finding from what the run recorded, or say it cannot."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

# How the parent's mp.spawn reports a child's failure: part of that failure, never a cause of its own.
SPAWN_ECHOES = frozenset({"ProcessExitedException", "ProcessRaisedException"})
# The error a rule's message predicts, quoted word for word: `die with "AttributeError: Can't get attribute 'train' on
# <module '__main__'"`, `fails with "TypeError: train() takes 2 positional arguments but 3 were given"`.
_PREDICTED = re.compile(r'"(?P<error>[A-Z]\w*(?:Error|Exception): [^"]+)"')


@dataclass(frozen=True)
class Signature:
    """A failure a rule predicts, as Python and torch word it: the exception's types and a pattern of its message
    (the alternatives cover the wordings of the versions users run). `means`: what the failure shows about the
    pitfall, for the verdict. `telling`: the failure names the pitfall by itself, so that a run raising it with no
    static finding on its stack has found one; any other confirms only a finding on the failing stack. `context`:
    what the error's report must also show (raised in a DataParallel replica, inside `pack_padded_sequence`), where
    the message alone is common to other mistakes."""

    types: frozenset[str]
    pattern: re.Pattern[str]
    means: str
    telling: bool = False
    context: re.Pattern[str] | None = None

    def said(self, error: dict[str, Any]) -> tuple[str, str] | None:
        """The error's type and own words (the line of its message that matched, or the line that carries it in
        another process's or a replica's report, "AttributeError: ...") when the error is this failure."""
        message = error.get("message") or ""
        for found in self.pattern.finditer(message):
            start = message.rfind("\n", 0, found.start()) + 1
            end = message.find("\n", found.end())
            line = message[start:end if end >= 0 else len(message)].strip()
            kind, _, words = line.partition(": ")
            if not (words and kind.replace(".", "").isidentifier()):
                kind, words = str(error.get("type")), line
            if kind.rpartition(".")[2] in self.types:
                return kind.rpartition(".")[2], words
        return None

    def matches(self, error: dict[str, Any]) -> tuple[str, str] | None:
        said = self.said(error)
        if said is None or self.context is None:
            return said
        report = f"{error.get('message') or ''}\n{error.get('traceback') or ''}"
        return said if self.context.search(report) else None


def signature(types: str, pattern: str, means: str, telling: bool = False, context: str | None = None) -> Signature:
    """A signature from a space-separated list of exception types and regular expressions."""
    return Signature(frozenset(types.split()), re.compile(pattern), means, telling,
                     re.compile(context) if context else None)


@dataclass(frozen=True)
class Command:
    """How a run starts: its command line, what it runs in words, and the CUDA devices each of its nodes uses (one
    per replica, or per local rank)."""

    argv: list[str]
    what: str
    devices: int
    nodes: int = 1


@dataclass(frozen=True)
class Launch:
    """What a probe needs to start the user's script its own way (another launcher, two nodes)."""

    script: str
    nproc: int
    port: int
    script_args: tuple[str, ...]

    def agent(self, module: str, nnodes: int, nproc_per_node: int, entry: str = "pitfall_lint.harness.child.run_script") -> list[str]:
        """One torch elastic agent (`torch.distributed.run` or `torch.distributed.launch`) on loopback, each rank
        running `entry` on the script."""
        return [
            sys.executable, "-m", module, f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{self.port}", "--local-addr=127.0.0.1",
            "--max-restarts=0", "--monitor-interval=0.5", "-m", entry, self.script, *self.script_args,
        ]


class Probe:
    code: ClassVar[str]
    # The run kinds that can exercise the pitfall at all.
    kinds: ClassVar[frozenset[str]]
    # The failures the rule predicts; the telling ones make a finding of a failure no static finding explains.
    signatures: ClassVar[tuple[Signature, ...]] = ()
    # For a finding found at run time: what to do instead, after what the failure meant.
    remedy: ClassVar[str] = ""

    def environment(self, findings: list[Diagnostic]) -> dict[str, str]:
        """Conditions to set up for the run (a slower disk, a busy port), given this probe's findings."""
        return {}

    def lifted(self, findings: list[Diagnostic]) -> str | None:
        """For a probe whose conditions or launch make the run fail on purpose: how a second run goes without them,
        once a finding of it is confirmed ("with port 12355 free"), so that the other findings get their run; None for
        a probe that changes nothing the script can fail on."""
        return None

    def launch(self, findings: list[Diagnostic], launch: Launch) -> Command | None:
        """The command when the pitfall shows only under another launch than the plan's; None to run as planned.
        Asked only for a distributed script with findings of this probe."""
        return None

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        """A verdict, or None when the run never reached the mechanism (the caller says why)."""
        raise NotImplementedError

    def observe(self, script: str, run: RunRecord) -> list[tuple[Diagnostic, Judgement]]:
        """Findings that only the run can make (rules with no static check)."""
        return []

    def on_the_stack(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        """Confirmed by a failure the rule predicts whose stack passes through the finding's line (the spawn call
        of a child's error, the forward a replica failed in), when the probe's own observations said nothing."""
        for index, error in enumerate(run.errors):
            frames = [*(error.get("frames") or ()), error.get("user_frame") or {}]
            if not any(at(frame, finding) for frame in frames):
                continue
            for known in self.signatures:
                said = known.matches(error)
                if said is not None:
                    return Judgement("confirmed", Evidence(known.means, *said, error.get("user_frame")), (index,))
        return None


def predicted_failure(probes: dict[str, Probe], error: dict[str, Any]) -> tuple[Probe, Signature, tuple[str, str]] | None:
    """The rule whose telling signature the error is, with the error's own words; None for a failure that names no
    pitfall by itself."""
    for probe in probes.values():
        for known in probe.signatures:
            said = known.matches(error) if known.telling else None
            if said is not None:
                return probe, known, said
    return None


def errors_signed(run: RunRecord, signatures: tuple[Signature, ...]) -> list[int]:
    """Indices of the run's errors that are one of these failures."""
    return [i for i, e in enumerate(run.errors) if any(known.matches(e) is not None for known in signatures)]


def at(event: dict, finding: Diagnostic) -> bool:
    """Whether an event happened at the finding's line (of its file)."""
    return event.get("line") == finding.line and same_file(event.get("file"), finding.path)


def same_file(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)  # type: ignore[arg-type]


def errors_matching(run: RunRecord, *fragments: str) -> list[int]:
    """Indices of the run's errors whose message contains one of the fragments."""
    return [i for i, e in enumerate(run.errors) if any(f in (e.get("message") or "") for f in fragments)]


def predicted_error(finding: Diagnostic) -> str | None:
    """The error the finding's message predicts ("TypeError: ..."), when it quotes one."""
    predicted = _PREDICTED.search(finding.message)
    return predicted["error"] if predicted else None


def errors_predicted(run: RunRecord, predicted: str) -> list[tuple[int, str]]:
    """The run's errors that are the predicted one, word for word as far as the rule can know it (Python names
    `__main__`'s loader after it), raised here or carried in the message of another process's error (spawn's
    ProcessRaisedException): each as its index in run.errors and the error's own text."""
    found = []
    for index, error in enumerate(run.errors):
        message = error.get("message") or ""
        lines = [f"{error.get('type')}: {message}", *message.splitlines()]
        said = next((line.strip() for line in lines if line.strip().startswith(predicted)), None)
        if said is not None:
            found.append((index, said.splitlines()[0].partition(": ")[2]))
    return found


def last_line(text: str | None) -> str:
    stripped = (text or "").strip()
    return stripped.splitlines()[-1] if stripped else ""
