"""`python -m pitfall_lint.harness.child.run_script SCRIPT ARGS...`: run SCRIPT as `python SCRIPT` would (once
with spawn and once with forkserver as the default start method, where a probe asks for it).

Also the entry point of each rank under torch.distributed.run, and of a per-rank harness inside an
existing multi-node `torchrun` launch (see docs/verify.md).
"""

from __future__ import annotations

import json
import os
import runpy
import sys

from pitfall_lint.harness.child.events import SCRIPT, SCRIPT_AS_GIVEN, emit
from pitfall_lint.harness.child.observe import observed
from pitfall_lint.harness.child.start_methods import START_METHOD, make_default, run_under_each, under_each

# The option a script reads its local rank from (`--local_rank`), given to each rank as
# torch.distributed.launch gives it; torchrun itself only sets LOCAL_RANK.
LOCAL_RANK_OPTION = "PITFALL_LINT_LOCAL_RANK_OPTION"
# [option, variable] pairs (`--rank`, RANK): options the script passes to init_process_group, each rank given its own.
RANK_OPTIONS = "PITFALL_LINT_RANK_OPTIONS"


def _argv0_as_given(script: str) -> None:
    """`python PATH` leaves sys.argv[0] as typed, where runpy puts the (absolute) path it runs: scripts name their logs
    and checkpoints after it (`'log_' + sys.argv[0][:-3]`). The next run_path, this module's, gets the path as the
    user gave it, where that names the same file from here; any run_path of the script's own is left alone."""
    given = os.environ.get(SCRIPT_AS_GIVEN)
    modified = getattr(runpy, "_ModifiedArgv0", None)
    if not given or modified is None or os.path.realpath(given) != os.path.realpath(script):
        return

    def once(_path: str) -> object:
        runpy._ModifiedArgv0 = modified  # type: ignore[attr-defined]
        return modified(given)

    runpy._ModifiedArgv0 = once  # type: ignore[attr-defined]


def main() -> int:
    if under_each(sys.argv[1]) and "LOCAL_RANK" not in os.environ:  # a launcher's rank runs once, as it was started
        return run_under_each("pitfall_lint.harness.child.run_script", sys.argv[1:])
    script = os.path.abspath(sys.argv[1])
    os.environ[SCRIPT] = script
    sys.argv = sys.argv[1:]
    option = os.environ.get(LOCAL_RANK_OPTION)
    if option and "LOCAL_RANK" in os.environ:
        sys.argv.append(f"{option}={os.environ['LOCAL_RANK']}")
        emit("local-rank-option", option=option)
    given = [(o, v, os.environ[v]) for o, v in json.loads(os.environ.get(RANK_OPTIONS, "[]")) if v in os.environ]
    if given:
        sys.argv += [f"{option}={value}" for option, _, value in given]
        emit("rank-options", given=given)
    sys.path[0] = os.path.dirname(script)
    method = os.environ.get(START_METHOD)
    if method:
        make_default(method)
    emit("start", mode="script", argv=sys.argv, start_method=method)
    _argv0_as_given(script)
    with observed(where="script"):
        runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
