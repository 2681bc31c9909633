"""PFL307 legacy-local-rank-argument: `--local_rank` alone where today's launchers get it wrong, and the parsers
that are right (both spellings, LOCAL_RANK read, the DeepSpeed launcher, processes the script starts itself)."""

from __future__ import annotations

import shutil
from pathlib import Path
from textwrap import dedent

import pytest

from marks import REPO, assert_marks
from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules
from test_projects import check, found

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


# -- launch commands written outside Python (shell scripts, Makefiles, the documentation)

LAUNCH_PROJECT = "fixtures/projects/launch-commands"


def test_a_launch_written_outside_python_is_read() -> None:
    """Each script is launched by a command of another file: the README's code block, a shell script's continued
    line through `$(dirname "$0")/..`, a Makefile's `-m package.module`, an rst block naming a script of another
    folder, torchrun for a required flag."""
    document = check("--no-cache", "--select", "PFL307", f"{LAUNCH_PROJECT}/bad")
    bad = f"{LAUNCH_PROJECT}/bad"
    assert found(document) == {
        (f"{bad}/train.py", "PFL307", 9),
        (f"{bad}/tools/evaluate.py", "PFL307", 9),
        (f"{bad}/lm/pretrain.py", "PFL307", 9),
        (f"{bad}/examples/finetune.py", "PFL307", 9),
        (f"{bad}/serve/worker.py", "PFL307", 9),
    }
    by_path = {d["path"]: d for d in document["diagnostics"]}
    assert by_path[f"{bad}/train.py"]["message"] == (
        "`--local_rank` without the `--local-rank` spelling: `python -m torch.distributed.launch` passes "
        f"`--local-rank=<n>` since torch 2.0 (the launch command at {bad}/README.md:6), and parsing stops every "
        'process with "error: unrecognized arguments: --local-rank=0"; add the spelling '
        '(`add_argument("--local-rank", "--local_rank", ...)`)'
    )
    assert by_path[f"{bad}/train.py"]["related"] == [{"path": f"{bad}/README.md", "line": 6, "message": "the launch command"}]
    assert [f"{r['path']}:{r['line']}" for d in document["diagnostics"] for r in d["related"]] == [
        f"{bad}/docs/usage.rst:6",
        f"{bad}/Makefile:2",
        f"{bad}/serve/start.sh:2",
        f"{bad}/scripts/run_eval.sh:4",
        f"{bad}/README.md:6",
    ]
    assert by_path[f"{bad}/serve/worker.py"]["message"] == (
        f"`--local_rank` is required, but `torchrun` (the launch command at {bad}/serve/start.sh:2) passes no flag "
        'at all (only LOCAL_RANK in the environment), and parsing stops every process with "error: the following '
        'arguments are required: --local_rank"; drop `required=True` and read `int(os.environ["LOCAL_RANK"])`, '
        "which every launcher sets"
    )


def test_launches_that_pass_what_the_parser_knows_are_quiet() -> None:
    """torchrun for a leftover flag, `--use_env`, DeepSpeed's `--local_rank` for a script that reads the flag alone,
    a command commented out, a script name that two folders hold, a flag added only under torch 1."""
    assert check("--no-cache", "--select", "PFL307", f"{LAUNCH_PROJECT}/clean")["diagnostics"] == []


def test_a_cached_result_is_dropped_when_a_document_changes_the_launch(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(REPO / LAUNCH_PROJECT / "clean", project)
    assert check("--select", "PFL307", "train.py", cwd=project)["diagnostics"] == []
    readme = project / "README.md"
    readme.write_text(readme.read_text().replace("torchrun --nproc_per_node=2 train.py", "python -m torch.distributed.launch train.py"))
    assert found(check("--select", "PFL307", "train.py", cwd=project)) == {("train.py", "PFL307", 9)}
    assert found(check("--select", "PFL307", cwd=project)) == {("train.py", "PFL307", 9)}


@pytest.mark.parametrize(
    ("text", "launches"),
    [
        ("python -m torch.distributed.launch --nproc_per_node=2 train.py --lr 0.1", [("--local-rank", "train.py", 1)]),
        ("python3 -u -m torch.distributed.launch --nproc_per_node 2 --master_port $PORT tools/train.py", [("--local-rank", "tools/train.py", 1)]),
        ("python -m torch.distributed.launch --use_env --nproc_per_node=2 train.py", [("", "train.py", 1)]),
        ("python -m torch.distributed.launch --use-env train.py", [("", "train.py", 1)]),
        ("torchrun --standalone --nproc-per-node=gpu train.py", [("", "train.py", 1)]),
        ("python -m torch.distributed.run --nnodes 1 -m pkg.train", [("", "pkg/train.py", 1)]),
        ("deepspeed --num_gpus 8 train.py --deepspeed ds.json", [("--local_rank", "train.py", 1)]),
        ("deepspeed --no_local_rank train.py", [("", "train.py", 1)]),
        ("accelerate launch --multi_gpu --num_processes 2 train.py", [("", "train.py", 1)]),
        ("run:\n\tpython -m torch.distributed.launch \\\n\t  --nproc_per_node=8 \\\n\t  main.py", [("--local-rank", "main.py", 2)]),
        ('python -m torch.distributed.launch ${ARGS} "$(dirname "$0")/train.py"', [("--local-rank", "$V/train.py", 1)]),
        ("python -m torch.distributed.launch --nproc_per_node <num-gpus> main.py", [("--local-rank", "main.py", 1)]),
        ("Run `torchrun --nproc_per_node=2 main.py` on each node.", [("", "main.py", 1)]),
        # No script named: a variable, prose, an executable, a command commented out.
        ("torchrun --nproc_per_node=2 $SCRIPT", []),
        ("We launch with torchrun instead of torch.distributed.launch.", []),
        ("torchrun --no-python --nproc-per-node 1 coverage run train.py", []),
        ("# python -m torch.distributed.launch --nproc_per_node=2 train.py", []),
        ("pip install deepspeed accelerate", []),
    ],
)
def test_launch_commands_are_read_from_text(text: str, launches: list[tuple[str, str, int]]) -> None:
    from pitfall_lint.project.launches import read_launches

    assert [(launch.passes, launch.script, launch.line) for launch in read_launches(text.encode())] == launches
