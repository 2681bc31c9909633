"""PFL301 missing-main-guard: direct and indirect launches at import time, and guarded ones."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

CASES = {
    "mp-spawn": """
        import torch.multiprocessing as mp
        def work(rank):
            pass
        mp.spawn(work, nprocs=2)  # expect: PFL301
    """,
    "imported-spawn-and-start-processes": """
        from torch.multiprocessing import spawn, start_processes
        def work(rank):
            pass
        spawn(work, nprocs=2)  # expect: PFL301
        start_processes(work, nprocs=2, start_method="spawn")  # expect: PFL301
    """,
    "process-start": """
        import multiprocessing
        def work():
            pass
        multiprocessing.Process(target=work).start()  # expect: PFL301
    """,
    "process-variable-start": """
        from torch.multiprocessing import Process
        def work():
            pass
        workers = [Process(target=work) for _ in range(2)]
        for w in workers:
            w.start()  # expect: PFL301
    """,
    "pool-in-with": """
        from multiprocessing import Pool
        with Pool(2) as pool:  # expect: PFL301
            pool.map(abs, [1, -2])
    """,
    "context-process": """
        import multiprocessing as mp
        def work():
            pass
        mp.get_context("spawn").Process(target=work).start()  # expect: PFL301
    """,
    "indirect-through-two-functions": """
        import torch.multiprocessing as mp
        def work(rank):
            pass
        def launch():
            mp.spawn(work, nprocs=2)
        def main():
            launch()
        main()  # expect: PFL301
    """,
    "unguarded-branch-of-inverted-guard": """
        import torch.multiprocessing as mp
        def work(rank):
            pass
        if __name__ != "__main__":
            mp.spawn(work, nprocs=2)  # expect: PFL301
    """,
    # Fine.
    "guarded": """
        import torch.multiprocessing as mp
        def work(rank):
            pass
        def main():
            mp.spawn(work, nprocs=2)
        if __name__ == "__main__":
            main()
    """,
    "reversed-guard-operands": """
        import torch.multiprocessing as mp
        def work(rank):
            pass
        if "__main__" == __name__:
            mp.spawn(work, nprocs=2)
    """,
    "else-branch-of-inverted-guard": """
        import torch.multiprocessing as mp
        def work(rank):
            pass
        if __name__ != "__main__":
            pass
        else:
            mp.spawn(work, nprocs=2)
    """,
    "defined-but-not-called-at-import": """
        import torch.multiprocessing as mp
        def work(rank):
            pass
        def main():
            mp.spawn(work, nprocs=2)
    """,
    "process-never-started": """
        import multiprocessing
        p = multiprocessing.Process(target=print)
    """,
    "thread-start-is-not-a-process": """
        import threading
        import multiprocessing
        queue = multiprocessing.Queue()
        threading.Thread(target=print).start()
    """,
    "local-function-named-spawn": """
        import multiprocessing
        def spawn(fn, nprocs):
            pass
        spawn(print, nprocs=2)
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(CASES[name]))
