"""PFL302, observed by running the script: spawn calls fn(index, *args) in each child."""

from __future__ import annotations

import re
from collections import defaultdict

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.base import SPAWN_ECHOES, Probe, errors_predicted, last_line, predicted_error, signature
from pitfall_lint.harness.record import Evidence, Judgement, RunRecord

_CHILD = re.compile(r"-- Process (?P<index>\d+) terminated with the following error")
# The child's call `fn(i, *args)` in torch.multiprocessing.spawn's _wrap, the last line of the child's traceback.
_ON_ENTRY = r"in _wrap\s+fn\(i, \*args\)[\s^~]+TypeError"
_CANNOT_BIND = "spawn called the function as fn(index, *args), a call that cannot bind"
_KEYS_AS_ARGUMENTS = ("`args` was not a tuple: spawn unpacked the dict given as args, so the function got its keys, "
                      "strings, as its arguments")


class SpawnSignatureProbe(Probe):
    code = "PFL302"
    kinds = frozenset({"script"})
    signatures = (
        signature("TypeError", r"\w+\(\) takes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ (?:were|was) given",
                  _CANNOT_BIND, telling=True, context=_ON_ENTRY),
        signature("TypeError", r"\w+\(\) missing \d+ required (?:positional|keyword-only) arguments?", _CANNOT_BIND,
                  telling=True, context=_ON_ENTRY),
        # args=(value) is value itself: spawn unpacks it (Python 3.11 and later say "Value after *").
        signature("TypeError", r"(?:\w+\(\) argument|Value) after \* must be an iterable, not \w+",
                  "`args` was not a tuple: spawn called fn(index, *args) on an object that cannot be unpacked",
                  telling=True, context=_ON_ENTRY),
        # A dict unpacked: its keys, strings, became the function's arguments.
        signature("AttributeError", r"'str' object has no attribute '\w+'", _KEYS_AS_ARGUMENTS),
        signature("TypeError", r"string indices must be integers", _KEYS_AS_ARGUMENTS),
    )
    remedy = "spawn calls fn(index, *args): let the index be the first parameter and pass the rest as a tuple, `args=(cfg,)`"

    def judge(self, finding: Diagnostic, run: RunRecord) -> Judgement | None:
        predicted = predicted_error(finding)
        if predicted is None:
            return self._same_rank(finding, run)
        matched = errors_predicted(run, predicted)
        if matched:
            index, raised = matched[0]
            error = run.errors[index]
            child = _CHILD.search(error.get("message") or "")
            who = f"process {child['index']}" if child else "a spawned process"
            return Judgement(
                "confirmed",
                Evidence(
                    f"{who} failed on entry: {_CANNOT_BIND}; "
                    f"the parent's spawn raised {error.get('type')} with the child's error",
                    "TypeError",
                    raised,
                    error.get("user_frame"),
                ),
                (index,),
            )
        if run.returncode == 0:
            return Judgement("not-reproduced", Evidence("every spawned process took its arguments and the script ran to the end"))
        return None

    @staticmethod
    def _same_rank(finding: Diagnostic, run: RunRecord) -> Judgement | None:
        """The index ignored and a rank taken from args: the processes join with one rank, and the second one to
        host that rank's store, or to wait for the missing ranks, fails."""
        by_rank: dict[int, set[int]] = defaultdict(set)
        for event in run.of("group-joining"):
            if event.get("asked_rank", -1) >= 0:
                by_rank[event["asked_rank"]].add(event["pid"])
        shared = {rank: pids for rank, pids in by_rank.items() if len(pids) > 1}
        if shared:
            rank, pids = min(shared.items())
            failures = tuple(
                i for i, e in enumerate(run.errors) if e.get("pid") in pids or e.get("type") in SPAWN_ECHOES
            )
            error = run.errors[failures[0]] if failures else {}
            return Judgement(
                "confirmed",
                Evidence(
                    f"{len(pids)} spawned processes joined the process group as rank {rank}: each got the rank from args "
                    "and none used its index",
                    error.get("type"),
                    last_line(error.get("message")) or None,
                    error.get("user_frame"),
                ),
                failures,
            )
        if by_rank:
            return Judgement("not-reproduced", Evidence(f"the processes joined as ranks {sorted(by_rank)}, each once"))
        return None
