"""PFL301 missing-main-guard: direct and indirect launches at import time, and guarded ones."""

from __future__ import annotations

import json
import os
from pathlib import Path
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
    # DataLoader workers start where the loader is iterated (a `for`, `iter(...)`, a comprehension).
    "dataloader-iterated-at-import": """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=2, num_workers=2)
        for (batch,) in loader:  # expect: PFL301
            print(batch)
    """,
    "dataloader-next-iter-and-comprehension": """
        import torch.utils.data as data
        NUM_WORKERS = 4
        dataset = data.TensorDataset()
        first = next(iter(data.DataLoader(dataset, num_workers=NUM_WORKERS)))  # expect: PFL301
        sizes = [len(b) for b in data.DataLoader(dataset, 8, True, None, None, 2)]  # expect: PFL301
    """,
    "dataloader-in-nested-loops": """
        from torch.utils.data import DataLoader
        loader = DataLoader([1, 2, 3], num_workers=2)
        for epoch in range(3):
            for step, batch in enumerate(loader):  # expect: PFL301
                pass
    """,
    "dataloader-iterated-by-a-function-called-at-import": """
        from torch.utils.data import DataLoader
        loader = DataLoader([1, 2, 3], num_workers=2)
        def train():
            for batch in loader:
                pass
        def main():
            train()
        main()  # expect: PFL301
    """,
    "dataloader-handed-to-a-function-called-at-import": """
        import os
        from torch.utils.data import DataLoader
        def train(model, loader, epochs):
            for epoch in range(epochs):
                for batch in loader:
                    pass
        train_loader = DataLoader([1, 2, 3], batch_size=1, num_workers=os.cpu_count())
        train(None, train_loader, 3)  # expect: PFL301
        train(None, DataLoader([4]), 1)
        train(None, epochs=1, loader=DataLoader([5], num_workers=1))  # expect: PFL301
    """,
    "dataloader-returned-by-a-function": """
        from torch.utils.data import DataLoader
        def make_loader(workers):
            return DataLoader([1, 2, 3], num_workers=workers, persistent_workers=True)
        loader = make_loader(4)
        batch = next(iter(loader))  # expect: PFL301
    """,
    "dataloader-workers-from-a-command-line-default": """
        import argparse
        from torch.utils.data import DataLoader
        parser = argparse.ArgumentParser()
        parser.add_argument("-j", "--num-workers", type=int, default=4)
        parser.add_argument("--eval", dest="eval_workers", type=int, default=0)
        parser.add_argument("--threads", type=int)
        args = parser.parse_args()
        for batch in DataLoader([1], num_workers=args.num_workers):  # expect: PFL301
            pass
        for batch in DataLoader([1], num_workers=args.eval_workers):
            pass
        for batch in DataLoader([1], num_workers=args.threads):
            pass
    """,
    "dataloader-with-a-spawn-context": """
        import multiprocessing
        from torch.utils.data import DataLoader
        SPAWN = multiprocessing.get_context("spawn")
        for batch in DataLoader([1], num_workers=1, multiprocessing_context=SPAWN):  # expect: PFL301
            pass
        for batch in DataLoader([1], num_workers=1, multiprocessing_context="forkserver"):  # expect: PFL301
            pass
    """,
    "process-pool-executor-in-with": """
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(max_workers=2) as executor:
            squares = list(executor.map(abs, [1, -2]))  # expect: PFL301
    """,
    "process-pool-executor-submit-and-inline-map": """
        import concurrent.futures
        executor = concurrent.futures.ProcessPoolExecutor(2)
        future = executor.submit(abs, -1)  # expect: PFL301
        print(list(concurrent.futures.ProcessPoolExecutor().map(abs, [1])))  # expect: PFL301
    """,
    "torch-multiprocessing-pool-class": """
        from torch.multiprocessing.pool import Pool
        pool = Pool(2)  # expect: PFL301
    """,
    # Fine.
    "dataloader-iterated-only-under-the-guard": """
        from torch.utils.data import DataLoader
        loader = DataLoader([1, 2, 3], num_workers=2)
        def train(loader):
            for batch in loader:
                pass
        def evaluate():
            for batch in loader:
                pass
        if __name__ == "__main__":
            train(loader)
            evaluate()
    """,
    "dataloader-without-workers": """
        from torch.utils.data import DataLoader
        NO_WORKERS = 0
        workers = 4
        def evaluate(workers=0):
            for batch in DataLoader([1, 2, 3], num_workers=workers):
                pass
        evaluate()
        for batch in DataLoader([1, 2, 3]):
            pass
        for batch in DataLoader([1, 2, 3], num_workers=NO_WORKERS, persistent_workers=False):
            pass
        def train(loader):
            for batch in loader:
                pass
        train(DataLoader([1], num_workers=0))
        if __name__ == "__main__":
            train(DataLoader([1], num_workers=2))
    """,
    "dataloader-built-but-not-iterated-at-import": """
        from torch.utils.data import DataLoader
        loader = DataLoader([1, 2, 3], num_workers=2)
        print(len(loader))
    """,
    "dataloader-worker-count-the-file-does-not-tell": """
        import argparse
        from torch.utils.data import DataLoader
        args = argparse.ArgumentParser().parse_args()
        for batch in DataLoader([1, 2, 3], num_workers=args.workers):
            pass
    """,
    "fork-chosen-explicitly": """
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        from torch.utils.data import DataLoader
        import torch.multiprocessing as tmp
        def work(rank):
            pass
        for batch in DataLoader([1], num_workers=2, multiprocessing_context="fork"):
            pass
        for batch in DataLoader([1], num_workers=2, multiprocessing_context=mp.get_context("fork")):
            pass
        mp.get_context("fork").Pool(2)
        ProcessPoolExecutor(mp_context=mp.get_context("fork")).submit(abs, 1)
        tmp.start_processes(work, nprocs=2, start_method="fork")
        tmp.start_processes(work, (), 2, True, False, "fork")
    """,
    "fork-set-for-the-module": """
        import multiprocessing
        from torch.utils.data import DataLoader
        multiprocessing.set_start_method("fork")
        with multiprocessing.Pool(2) as pool:
            pool.map(abs, [1, -2])
        for batch in DataLoader([1], num_workers=2):
            pass
    """,
    "start-method-the-file-does-not-tell": """
        import multiprocessing as mp
        import sys
        mp.get_context(sys.argv[1]).Pool(2)
    """,
    "process-pool-executor-built-but-not-used-at-import": """
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
        executor = ProcessPoolExecutor()
        def run():
            return list(executor.map(abs, [1]))
        with ThreadPoolExecutor() as threads:
            threads.map(abs, [1])
        if __name__ == "__main__":
            run()
    """,
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


# --- the message: under which start methods, platforms and Python versions the script fails ----------------------

LOADER_AT_IMPORT = dedent("""
    from torch.utils.data import DataLoader
    loader = DataLoader([1, 2, 3], num_workers=2)
    for batch in loader:
        pass
""")
DEFAULT_METHOD_MESSAGE = (
    "`iter(DataLoader(num_workers=2))` starts processes at import time: where the default start method is spawn "
    "(macOS, Windows) or forkserver (Linux from Python 3.14), each child re-imports the module, reaches it again and "
    'fails while bootstrapping; only fork (Linux up to Python 3.13) runs it; move it under `if __name__ == "__main__":`'
)


def messages(source: str) -> list[tuple[str, int, str]]:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    result = Engine(all_rules()).check_source("script.py", source.encode())
    return [(d.code, d.line, d.message) for d in result.diagnostics]


def test_the_message_names_the_platforms_and_versions_where_the_default_start_method_fails() -> None:
    assert messages(LOADER_AT_IMPORT) == [("PFL301", 4, DEFAULT_METHOD_MESSAGE)]


def test_the_message_of_a_start_method_chosen_in_the_code_says_it_fails_everywhere() -> None:
    source = dedent("""
        import multiprocessing
        import torch.multiprocessing as mp
        def work(rank):
            pass
        def launch():
            mp.spawn(work, nprocs=2)
        launch()
        multiprocessing.get_context("forkserver").Pool(2)
    """)
    assert messages(source) == [
        ("PFL301", 8, ("`launch() -> torch.multiprocessing.spawn` starts processes at import time with the spawn start "
                      "method, on every platform: each child re-imports the module, reaches it again and fails while "
                      'bootstrapping; move it under `if __name__ == "__main__":`')),
        ("PFL301", 9, ("`multiprocessing.Pool` starts processes at import time with the forkserver start method, on "
                      "every platform: each child re-imports the module, reaches it again and fails while bootstrapping; "
                      'move it under `if __name__ == "__main__":`')),
    ]


def check_project(folder: Path) -> list[tuple[str, str, int, str]]:
    from click.testing import CliRunner

    from pitfall_lint.cli import main

    previous = Path.cwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "."])
    finally:
        os.chdir(previous)
    assert result.exit_code == 1, result.output
    return [(d["path"], d["code"], d["line"], d["message"]) for d in json.loads(result.stdout)["diagnostics"]]


@pytest.mark.parametrize(
    ("pyproject", "target"),
    [("[project]\nname = 'x'\nrequires-python = '>=3.14'\n", "3.14+ (the project's requires-python)"),
     ("[project]\nrequires-python = '>=3.9'\n[tool.pitfall-lint]\ntarget-version = 'py314'\n",
      "3.14+ (the project's target-version)")],
)
def test_a_project_for_python_3_14_fails_on_every_platform(tmp_path: Path, pyproject: str, target: str) -> None:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "script.py").write_text(LOADER_AT_IMPORT)
    assert check_project(tmp_path) == [(
        "script.py", "PFL301", 4,
        (f"`iter(DataLoader(num_workers=2))` starts processes at import time: on Python {target} the default start "
        "method is spawn (macOS, Windows) or forkserver (Linux), and each child re-imports the module, reaches it again "
        'and fails while bootstrapping; move it under `if __name__ == "__main__":`'),
    )]


def test_a_project_for_older_pythons_is_told_where_fork_still_runs_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\nrequires-python = '>=3.9'\n")
    (tmp_path / "script.py").write_text(LOADER_AT_IMPORT)
    assert check_project(tmp_path) == [("script.py", "PFL301", 4, DEFAULT_METHOD_MESSAGE)]
