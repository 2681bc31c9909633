"""Helpers of the training script; the progress bar fits the terminal, whose width `stty size` gives at import."""

import os
import sys
import time

_, term_width = os.popen("stty size", "r").read().split()
term_width = int(term_width)

TOTAL_BAR_LENGTH = 40
begin_time = time.time()


def progress_bar(current: int, total: int, msg: str = "") -> None:
    global begin_time
    if current == 0:
        begin_time = time.time()
    done = int(TOTAL_BAR_LENGTH * (current + 1) / total)
    line = f" [{'=' * done}>{'.' * (TOTAL_BAR_LENGTH - done)}] {current + 1}/{total} | {msg}"
    sys.stdout.write(line[: term_width - 1].ljust(term_width - 1) + ("\n" if current == total - 1 else "\r"))
    sys.stdout.flush()
