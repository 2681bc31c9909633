"""PFL302 spawn-signature: spawn calls fn(index, *args); counts that cannot bind, the rank passed again, and the
spellings that bind (defaults, *args, methods, starred args) or that the source cannot tell."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks, reported
from pitfall_lint.rules.spawn_signature import type_error

CASES = {
    "rank-passed-again-too-many": """
        import torch.multiprocessing as mp
        def train(rank, world_size):
            pass
        if __name__ == "__main__":
            rank = 0
            mp.spawn(train, args=(rank, 2), nprocs=2)  # expect: PFL302
    """,
    "too-few-values": """
        import torch.multiprocessing as mp
        def train(rank, world_size, config):
            pass
        def main():
            mp.spawn(train, args=(2,), nprocs=2)  # expect: PFL302
    """,
    "no-args-at-all": """
        import torch.multiprocessing as mp
        def train(rank, world_size):
            pass
        def main():
            mp.spawn(train, nprocs=2)  # expect: PFL302
    """,
    "function-without-the-index": """
        from torch.multiprocessing import spawn
        def train():
            pass
        def main():
            spawn(train, nprocs=2)  # expect: PFL302
    """,
    "positional-args-and-start-processes": """
        import torch.multiprocessing as mp
        def train(rank, world_size):
            pass
        def main():
            mp.start_processes(train, (0, 2), 2, start_method="spawn")  # expect: PFL302
            mp.spawn(train, (2,), 2)
    """,
    "defining-module-spelling": """
        import torch.multiprocessing.spawn as spawning
        def train(rank):
            pass
        def main():
            spawning.spawn(train, args=(1,), nprocs=2)  # expect: PFL302
    """,
    "required-keyword-only": """
        import torch.multiprocessing as mp
        def train(rank, world_size, *, config):
            pass
        def main():
            mp.spawn(train, args=(2,), nprocs=2)  # expect: PFL302
    """,
    "args-through-a-variable": """
        import torch.multiprocessing as mp
        def train(rank, world_size):
            pass
        def main():
            spawn_args = (0, 2)
            mp.spawn(train, args=spawn_args, nprocs=2)  # expect: PFL302
    """,
    "bound-method": """
        import torch.multiprocessing as mp
        class Launcher:
            def work(self, rank, world_size):
                pass
            def start(self):
                mp.spawn(self.work, args=(0, 2), nprocs=2)  # expect: PFL302
                mp.spawn(self.work, args=(2,), nprocs=2)
    """,
    "parenthesised-value-is-not-a-tuple": """
        import torch.multiprocessing as mp
        def train(rank, config):
            pass
        def main(config):
            mp.spawn(train, args=(config), nprocs=2)  # expect: PFL302
            mp.spawn(train, args=(config,), nprocs=2)
            mp.spawn(train, args=(
                config  # expect: PFL302
            ), nprocs=2)
    """,
    "parenthesised-number": """
        import torch.multiprocessing as mp
        def train(rank, world_size, steps):
            pass
        def main():
            mp.spawn(train, args=(4), nprocs=2)  # expect: PFL302
    """,
    "index-ignored-and-rank-taken-from-args": """
        import torch.multiprocessing as mp
        def train(_, rank, world_size):
            print(rank, world_size)
        def main(args):
            mp.spawn(train, args=(args.rank, 2), nprocs=2)  # expect: PFL302
    """,
    # Fine: these bind, or say nothing the source can count.
    "index-first-plus-args": """
        import torch.multiprocessing as mp
        def train(rank, world_size, config=None):
            pass
        def main(config):
            mp.spawn(train, args=(2,), nprocs=2)
            mp.spawn(train, args=(2, config), nprocs=2)
    """,
    "varargs-takes-anything": """
        import torch.multiprocessing as mp
        def train(rank, *args):
            pass
        def main():
            mp.spawn(train, args=(1, 2, 3, 4), nprocs=2)
    """,
    "starred-args-may-hold-the-rest": """
        import torch.multiprocessing as mp
        def train(rank, world_size, tmp, func):
            pass
        def main(extra):
            mp.spawn(train, args=(2, *extra), nprocs=2)
    """,
    "index-used-with-a-node-rank-from-args": """
        import torch.multiprocessing as mp
        def train(local_rank, node_rank, gpus):
            rank = node_rank * gpus + local_rank
        def main(args):
            mp.spawn(train, args=(args.node_rank, 8), nprocs=8)
    """,
    "index-ignored-but-one-process": """
        import torch.multiprocessing as mp
        def train(_, rank, world_size):
            print(rank, world_size)
        def main(args):
            mp.spawn(train, args=(args.rank, 2), nprocs=1)
    """,
    "unknown-target-or-args": """
        import torch.multiprocessing as mp
        from functools import partial
        def train(rank, world_size):
            pass
        def main(fn, spawn_args, config):
            mp.spawn(fn, args=(1, 2, 3), nprocs=2)
            mp.spawn(train, args=spawn_args, nprocs=2)
            mp.spawn(partial(train, world_size=2), nprocs=2)
            mp.spawn(train, args=config.spawn_args, nprocs=2)
    """,
    "decorated-target-may-take-anything": """
        import torch.multiprocessing as mp
        from somewhere import wrap
        @wrap
        def train(rank):
            pass
        def main():
            mp.spawn(train, args=(1, 2), nprocs=2)
    """,
    "a-local-spawn-function": """
        def spawn(fn, args=(), nprocs=1):
            pass
        def train(rank):
            pass
        def main():
            spawn(train, args=(1, 2), nprocs=2)
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(CASES[name]))


@pytest.mark.parametrize(
    ("positional", "defaults", "varargs", "keyword_only", "given", "message"),
    [
        (("rank", "world_size"), 0, False, (), 3, "train() takes 2 positional arguments but 3 were given"),
        (("rank",), 0, False, (), 2, "train() takes 1 positional argument but 2 were given"),
        ((), 0, False, (), 1, "train() takes 0 positional arguments but 1 was given"),
        (("rank", "world_size"), 1, False, (), 3, "train() takes from 1 to 2 positional arguments but 3 were given"),
        (("rank", "a", "b", "c"), 0, False, (), 1, "train() missing 3 required positional arguments: 'a', 'b', and 'c'"),
        (("rank", "a", "b"), 0, False, (), 1, "train() missing 2 required positional arguments: 'a' and 'b'"),
        (("rank",), 0, False, ("config",), 1, "train() missing 1 required keyword-only argument: 'config'"),
        (("rank",), 0, True, (), 5, None),
    ],
)
def test_type_error_is_the_one_cpython_raises(positional, defaults, varargs, keyword_only, given, message) -> None:
    assert type_error("train", positional, defaults, varargs, keyword_only, given, exact=True) == message
    if message is not None:  # and CPython agrees
        namespace: dict = {}
        parameters = ", ".join([*positional[: len(positional) - defaults], *(f"{p}=0" for p in positional[len(positional) - defaults:])])
        parameters += ", *args" if varargs else ""
        parameters += (", *, " + ", ".join(keyword_only)) if keyword_only else ""
        exec(f"def train({parameters}): pass", namespace)
        with pytest.raises(TypeError) as raised:
            namespace["train"](*range(given))
        assert str(raised.value) == message


def _messages(name: str) -> list[str]:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    return [d.message for d in Engine(all_rules()).check_source("train.py", dedent(CASES[name]).encode()).diagnostics]


def test_message_names_the_error_and_the_fix() -> None:
    assert _messages("rank-passed-again-too-many") == [
        '`spawn` calls `train(index, *args)` with 2 values in args: every child fails with "TypeError: train() takes 2 '
        'positional arguments but 3 were given"; spawn already passes the process index first: drop `rank` from args'
    ]
    assert _messages("too-few-values") == [
        '`spawn` calls `train(index, *args)` with 1 value in args: every child fails with "TypeError: train() missing 1 '
        "required positional argument: 'config'\"; pass the missing values in args (spawn adds only the process index "
        "before them)"
    ]
    assert _messages("required-keyword-only")[0].endswith(
        "spawn passes no keyword arguments: give them defaults, or make them positional and pass them in args"
    )
    assert _messages("parenthesised-value-is-not-a-tuple")[0] == (
        "`args=(config)` is not a tuple: the parentheses alone make none, so `spawn` unpacks `config` itself into "
        "`train(index, *config)`; write `args=(config,)`"
    )
    assert _messages("index-ignored-and-rank-taken-from-args") == [
        "`train` ignores its first parameter `_`, the process index that `spawn` passes, and takes `rank` from args: "
        "every process gets the same rank; use the index as the rank (derive a global rank from it) and drop it from args"
    ]


def test_nothing_without_spawn() -> None:
    assert reported("def train(rank):\n    pass\ntrain(1, 2)\n") == set()
