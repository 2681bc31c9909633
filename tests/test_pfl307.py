"""PFL307 legacy-local-rank-argument: `--local_rank` alone where today's launchers get it wrong, and the parsers
that are right (both spellings, LOCAL_RANK read, the DeepSpeed launcher, processes the script starts itself)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks
from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules

CASES = {
    "flag-is-the-only-source-of-the-local-rank": """
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=-1)  # expect: PFL307
        args = parser.parse_args()
        torch.cuda.set_device(args.local_rank)
    """,
    "argument-group-in-a-function": """
        import argparse
        def get_args():
            parser = argparse.ArgumentParser()
            group = parser.add_argument_group("distributed")
            group.add_argument('--local_rank', default=0, type=int)  # expect: PFL307
            return parser.parse_args()
        def main():
            args = get_args()
            print(args.local_rank)
    """,
    "documented-launch-with-the-environment-read": '''
        """Run with: python -m torch.distributed.launch --nproc_per_node=8 convert.py"""
        import argparse
        import os
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=os.getenv("LOCAL_RANK", -1))  # expect: PFL307
        args = parser.parse_args()
    ''',
    "parse-known-args-sets-the-flag-aside": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=0)  # expect: PFL307
        args, unknown = parser.parse_known_args()
        print(args.local_rank)
    """,
    # Right, or nothing a launcher of today gets wrong for sure.
    "both-spellings": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--local-rank", "--local_rank", type=int, default=0)
        args = parser.parse_args()
        print(args.local_rank)
    """,
    "dashed-spelling-only": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--local-rank", type=int, default=0)
        args = parser.parse_args()
        print(args.local_rank)
    """,
    "local-rank-from-the-environment": """
        import argparse
        import os
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=-1)
        args = parser.parse_args()
        local_rank = int(os.environ.get("LOCAL_RANK", args.local_rank))
    """,
    "unused-leftover-without-a-documented-launch": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=-1)
        args = parser.parse_args()
    """,
    "documented-launch-but-parse-known-args-and-the-environment": '''
        """python -m torch.distributed.launch --nproc_per_node=2 train.py"""
        import argparse
        import os
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=0)
        args, _ = parser.parse_known_args()
        local_rank = int(os.environ["LOCAL_RANK"])
    ''',
    "deepspeed-launcher-passes-the-underscored-flag": """
        import argparse
        import deepspeed
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=-1)
        parser = deepspeed.add_config_arguments(parser)
        args = parser.parse_args()
        print(args.local_rank)
    """,
    "processes-started-by-the-script-itself": """
        import argparse
        import torch.multiprocessing as mp
        def worker(local_rank, args):
            args.local_rank = local_rank
        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--local_rank", type=int, default=-1)
            args = parser.parse_args()
            print(args.local_rank)
            mp.spawn(worker, args=(args,), nprocs=2)
    """,
    "parsing-a-given-list": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=0)
        args = parser.parse_args([])
        print(args.local_rank)
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(CASES[name]))


def _message(name: str) -> str:
    (diagnostic,) = Engine(all_rules()).check_source("train.py", dedent(CASES[name]).encode()).diagnostics
    return diagnostic.message


def test_message_says_what_each_launcher_does() -> None:
    assert _message("flag-is-the-only-source-of-the-local-rank") == (
        "`--local_rank` without the `--local-rank` spelling: `python -m torch.distributed.launch` passes "
        '`--local-rank=<n>` since torch 2.0, and parsing stops every process with "error: unrecognized arguments: '
        '--local-rank=0"; torchrun passes no flag at all (only LOCAL_RANK in the environment), so under torchrun '
        "`local_rank` keeps its default on every process; add the spelling (`add_argument(\"--local-rank\", "
        '"--local_rank", ...)`) and read `int(os.environ["LOCAL_RANK"])`, which every launcher sets'
    )
    assert _message("documented-launch-with-the-environment-read") == (
        "`--local_rank` without the `--local-rank` spelling: `python -m torch.distributed.launch` passes "
        '`--local-rank=<n>` since torch 2.0, and parsing stops every process with "error: unrecognized arguments: '
        '--local-rank=0"; add the spelling (`add_argument("--local-rank", "--local_rank", ...)`)'
    )
    assert "which parse_known_args() sets aside, so `local_rank` keeps its default" in _message(
        "parse-known-args-sets-the-flag-aside"
    )


def test_the_launchers_of_the_installed_torch_do_what_the_message_says() -> None:
    """torch.distributed.launch adds `--local-rank=<n>` unless --use-env; torchrun (no use_env attribute) never does."""
    pytest.importorskip("torch")
    from torch.distributed import launch, run

    torchrun_args = run.get_args_parser().parse_args(["--nproc-per-node=1", "train.py", "--x"])
    launch_args = launch.parse_args(["--nproc-per-node=1", "train.py", "--x"])
    _, _, torchrun_argv = run.config_from_args(torchrun_args)
    _, _, launch_argv = run.config_from_args(launch_args)
    assert [a for a in torchrun_argv if "local" in a] == []
    # The agent replaces the macro with each worker's local rank.
    assert launch_argv[launch_argv.index("train.py") + 1] == f"--local-rank={run.macros.local_rank}"
