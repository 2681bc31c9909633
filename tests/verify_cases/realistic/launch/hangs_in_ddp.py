"""Two ranks that never finish (a rank waiting forever), for the tests that kill verify itself."""

import os
import time

import torch.distributed as dist

if __name__ == "__main__":
    dist.init_process_group("gloo")
    with open(os.path.join(os.environ["HANG_PID_DIR"], f"{os.getpid()}.pid"), "w") as handle:
        handle.write(str(dist.get_rank()))
    time.sleep(600)
