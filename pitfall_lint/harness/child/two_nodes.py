"""`python -m pitfall_lint.harness.child.two_nodes NPROC_PER_NODE PORT SCRIPT ARGS...`: one job on two nodes.

Two torch.distributed.run agents on this machine join one c10d rendezvous on 127.0.0.1, as the agents of two
nodes would: the second node's processes get RANK = NPROC_PER_NODE + LOCAL_RANK. When one agent fails, the
other is stopped after a grace period, as a cluster's scheduler ends a job whose node failed (its ranks would
otherwise wait for the dead ones until the collective timeout).
"""

from __future__ import annotations

import subprocess
import sys
import time

from pitfall_lint.harness.probes.base import Launch

_GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.2


def main() -> int:
    per_node, port, script, *script_args = sys.argv[1:]
    launch = Launch(script, 2 * int(per_node), int(port), tuple(script_args))
    agents = [subprocess.Popen(launch.agent("torch.distributed.run", 2, int(per_node))) for _ in range(2)]
    failed_at: float | None = None
    while None in [a.poll() for a in agents]:  # every agent polled, each time
        if failed_at is None and any(a.returncode for a in agents):
            failed_at = time.monotonic()
        waited = time.monotonic() - failed_at if failed_at is not None else 0.0
        for agent in agents if waited > _GRACE_SECONDS else ():
            if agent.poll() is None:
                agent.kill() if waited > 2 * _GRACE_SECONDS else agent.terminate()
        time.sleep(_POLL_SECONDS)
    return next((a.returncode for a in agents if a.returncode), 0)


if __name__ == "__main__":
    sys.exit(main())
