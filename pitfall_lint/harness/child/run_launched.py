"""Each rank's entry under `python -m torch.distributed.launch ... -m pitfall_lint.harness.child.run_launched SCRIPT`.

That launcher puts `--local-rank=<n>` right after what it starts, here this module; a script started directly
gets it right after its own name. Moved there, the script sees the argv it would get from the launcher.
"""

from __future__ import annotations

import os
import sys

from pitfall_lint.harness.child import run_script


def main() -> int:
    os.environ.pop(run_script.LOCAL_RANK_OPTION, None)  # this launcher passes its own flag: verify adds none
    flags = [a for a in sys.argv[1:] if a.startswith("--local-rank=")][:1]
    rest = [a for a in sys.argv[1:] if a not in flags]
    sys.argv = [sys.argv[0], rest[0], *flags, *rest[1:]]
    return run_script.main()


if __name__ == "__main__":
    sys.exit(main())
