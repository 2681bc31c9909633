"""How verify decides to run a file (no run here: the decisions alone, fast)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from pitfall_lint.harness.planning import constructor_call, hard_coded_devices, model_classes, plan_run
from pitfall_lint.harness.project import project_root
from pitfall_lint.harness.reasons import final_statement


def plan(source: str, path: str = "model.py", example: str | None = None):  # type: ignore[no-untyped-def]
    data = textwrap.dedent(source).encode()
    return plan_run(path, data, ast.parse(data), example)


MODEL = """
    import torch.nn as nn
    try:
        from apex import amp
    except ImportError:
        amp = None
    if hasattr(nn, "SiLU"):
        Activation = nn.SiLU
    else:
        Activation = nn.ReLU
    import sys
    sys.path.append("..")


    class Encoder(nn.Module):
        def __init__(self, width=8):
            super().__init__()
            self.linear = nn.Linear(width, width)


    class Net(nn.Module):
        def __init__(self, width=8):
            super().__init__()
            self.encoder = Encoder(width)
    """


def test_a_module_level_try_and_setup_calls_keep_a_model_file_a_model_file() -> None:
    assert (plan(MODEL).kind, plan(MODEL).reason) == (
        "model",
        "it defines modules (Encoder, Net) and no entry point: verify builds one and runs it N-way in nn.DataParallel",
    )
    with_example = textwrap.dedent(MODEL) + "\n\ndef pitfall_lint_example():\n    return Net(), (None,)\n"
    assert (plan(with_example).kind, plan(with_example).example) == ("example", "pitfall_lint_example")


def test_the_whole_model_is_built_first() -> None:
    data = textwrap.dedent(MODEL).encode()
    assert model_classes("model.py", data, ast.parse(data)) == ["Net", "Encoder"]


def test_the_constructor_call_of_the_training_script_is_found(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("from model import Net\nwidth = 4\nm = Net(width)\nmodel = Net(16, depth=2)\n")
    assert constructor_call(["Net"], [str(tmp_path / "train.py")], str(tmp_path)) == {
        "class": "Net", "args": [{"value": 4}], "kwargs": {}, "options": [], "source": f"{tmp_path / 'train.py'}:3",
        "folder": "."}
    (tmp_path / "train.py").write_text("from model import Net\nsizes = [4]\nm = Net(*sizes)\nn = Net(**{'width': 4})\n")
    assert constructor_call(["Net"], [str(tmp_path / "train.py")], str(tmp_path)) is None


SIMSIAM_MAIN = """
    import argparse
    import torchvision.models as models
    import simsiam.builder

    parser = argparse.ArgumentParser()
    parser.add_argument("-a", "--arch", metavar="ARCH", default="resnet50")
    parser.add_argument("--dim", default=2048, type=int)
    parser.add_argument("--pred-dim", default=512, type=int)

    def main_worker(gpu, ngpus_per_node, args):
        model = simsiam.builder.SimSiam(models.__dict__[args.arch], args.dim, args.pred_dim)
        head = simsiam.builder.Head(getattr(models, args.arch)(num_classes=10), norm=nn.LayerNorm)
    """


def _call(tmp_path: Path, source: str, cls: str, **files: str) -> dict[str, object] | None:
    (tmp_path / "scripts").mkdir()
    for name, text in {"scripts/train.py": source, **files}.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    paths = sorted(str(p) for p in tmp_path.rglob("*.py"))
    return constructor_call([cls], paths, str(tmp_path))


def test_a_constructor_call_is_resolved_through_argparse_defaults_and_imported_modules(tmp_path: Path) -> None:
    found = _call(tmp_path, SIMSIAM_MAIN, "SimSiam")
    assert found == {
        "class": "SimSiam", "args": [{"object": "torchvision.models.resnet50"}, {"value": 2048}, {"value": 512}],
        "kwargs": {}, "options": ["arch='resnet50'", "dim=2048", "pred_dim=512"],
        "source": f"{tmp_path / 'scripts' / 'train.py'}:12", "folder": "scripts"}


def test_a_call_of_an_imported_function_is_resolved_and_an_unimported_name_is_not(tmp_path: Path) -> None:
    found = _call(tmp_path, SIMSIAM_MAIN, "Head")
    assert (found or {})["args"] == [
        {"call": "torchvision.models.resnet50", "args": [], "kwargs": {"num_classes": {"value": 10}}}]
    assert (found or {})["kwargs"] == {"norm": {"unknown": "nn.LayerNorm"}}  # `nn` is not imported by the script


def test_options_declared_in_another_file_and_the_call_with_fewest_unknowns(tmp_path: Path) -> None:
    source = """
        from options import opt
        from model import DINOHead
        student = build()
        first = DINOHead(student.embed_dim, opt.out_dim, use_bn=opt.use_bn)
        second = DINOHead(opt.embed_dim, opt.out_dim)
        """
    options = ("import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--out_dim', default=65536)\n"
               "parser.add_argument('--use-bn', dest='use_bn', action='store_true', default=False)\nopt = parser.parse_args()\n")
    found = _call(tmp_path, source, "DINOHead", **{"scripts/options.py": options})
    assert (found or {})["args"] == [{"unknown": "student.embed_dim"}, {"value": 65536}]
    assert ((found or {})["kwargs"], (found or {})["options"]) == ({"use_bn": {"value": False}}, ["out_dim=65536", "use_bn=False"])


def test_a_notebook_runs_as_a_notebook() -> None:
    assert plan("import torch\n", path="analysis.ipynb").kind == "notebook"


def test_a_distributed_script_with_its_own_workers_runs_once() -> None:
    decided = plan("""
        import torch.distributed as dist
        from torch.multiprocessing import Process
        def run(rank):
            dist.init_process_group("gloo", rank=rank, world_size=2)
        if __name__ == "__main__":
            for rank in range(2):
                Process(target=run, args=(rank,)).start()
        """, path="train.py")
    assert (decided.kind, decided.reason) == (
        "script", "it starts its own worker processes (Process), so it runs once as `python FILE` and its workers are the ranks")


@pytest.mark.parametrize("option", ["--local_rank", "--local-rank"])
def test_the_local_rank_option_a_script_declares_is_passed(option: str) -> None:
    decided = plan(f"""
        import argparse
        import torch.distributed as dist
        parser = argparse.ArgumentParser()
        parser.add_argument("{option}", type=int, default=0)
        dist.init_process_group("nccl")
        """, path="train.py")
    assert (decided.kind, decided.local_rank_option) == ("distributed", option)


def test_the_rank_and_world_size_a_script_passes_to_init_process_group_are_given_each_rank() -> None:
    decided = plan("""
        import argparse
        from torch import distributed
        parser = argparse.ArgumentParser()
        parser.add_argument("-s", "--world-size", type=int, default=1)
        parser.add_argument("-r", "--rank", type=int, default=0)
        parser.add_argument("--node", dest="node_rank", type=int, default=0)
        args = parser.parse_args()
        distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:23456", world_size=args.world_size,
                                       rank=args.rank)
        """, path="main.py")
    assert (decided.kind, decided.rank_options) == ("distributed", (("--rank", "RANK"), ("--world-size", "WORLD_SIZE")))


def test_a_rank_option_the_script_does_not_pass_to_init_process_group_is_left_alone() -> None:
    decided = plan("""
        import argparse
        import torch.distributed as dist
        parser = argparse.ArgumentParser()
        parser.add_argument("--rank", type=int, default=0)
        args = parser.parse_args()
        dist.init_process_group("gloo")
        """, path="main.py")
    assert (decided.kind, decided.rank_options) == ("distributed", ())


@pytest.mark.parametrize(("binding", "found"), [
    ("gpus = [0, 1, 2, 3]", (4, 6)),  # the line of the DataParallel
    ("gpus = [0, 1, 2]; gpus += [3]", None),  # bound twice: not one constant
    ("gpus = list(range(4))", None),
])
def test_a_gpu_list_handed_to_data_parallel_by_name_is_a_constant_count(binding: str, found: tuple[int, int] | None) -> None:
    data = textwrap.dedent(f"""\
        import torch.nn as nn
        {binding}
        def worker(gpus):
            pass

        model = nn.DataParallel(nn.Linear(2, 2), device_ids=gpus)
        """).encode()
    assert hard_coded_devices("train.py", data, ast.parse(data)) == found


def test_the_final_statement_is_the_last_one_under_the_main_guard() -> None:
    tree = ast.parse("import sys\ndef main():\n    return 0\nif __name__ == '__main__':\n    print(1)\n    sys.exit(\n        main())\n")
    assert final_statement(tree) == range(6, 8)


def test_the_project_root_is_the_nearest_marked_folder(tmp_path: Path) -> None:
    (tmp_path / "proj" / "tools").mkdir(parents=True)
    (tmp_path / "proj" / "setup.cfg").write_text("")
    assert project_root(str(tmp_path / "proj" / "tools" / "train.py")) == (tmp_path / "proj", True)
    (tmp_path / "loose").mkdir()
    assert project_root(str(tmp_path / "loose" / "train.py")) == (tmp_path / "loose", False)


@pytest.mark.parametrize(
    ("visible", "said"),
    [
        ("", "2 virtual CUDA devices on the CPU (no real GPU visible)"),
        ("0", "2 virtual CUDA devices on the CPU (1 real GPU visible, fewer than 2)"),
    ],
)
def test_the_devices_are_counted_in_plain_words(visible: str, said: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from pitfall_lint.harness.probes.base import Command
    from pitfall_lint.harness.verify import VerifyOptions, _device_mode

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert _device_mode(VerifyOptions(), Command([], "the script", 2))[1] == said
