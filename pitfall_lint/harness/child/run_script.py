"""`python -m pitfall_lint.harness.child.run_script SCRIPT ARGS...`: run SCRIPT as `python SCRIPT` would.

Also the entry point of each rank under torch.distributed.run, and of a per-rank harness inside an
existing multi-node `torchrun` launch (see the README).
"""

from __future__ import annotations

import os
import runpy
import sys

from pitfall_lint.harness.child.events import SCRIPT, emit
from pitfall_lint.harness.child.observe import observed


def main() -> int:
    script = os.path.abspath(sys.argv[1])
    os.environ[SCRIPT] = script
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)
    emit("start", mode="script", argv=sys.argv)
    with observed(where="script"):
        runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
