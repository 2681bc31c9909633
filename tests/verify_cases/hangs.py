"""Hangs, with a child that escapes the process group: verify must stop it and leave nothing behind."""

import os
import sys
import time
from multiprocessing import Process


def escape_and_sleep(pid_dir: str) -> None:
    os.setsid()
    with open(os.path.join(pid_dir, f"{os.getpid()}.pid"), "w") as handle:
        handle.write("escaped")
    time.sleep(600)


if __name__ == "__main__":
    pid_dir = os.environ["HANG_PID_DIR"]
    with open(os.path.join(pid_dir, f"{os.getpid()}.pid"), "w") as handle:
        handle.write("main")
    Process(target=escape_and_sleep, args=(pid_dir,)).start()
    print("sleeping", file=sys.stderr)
    time.sleep(600)
