"""verify on a model file (modules, no training loop): the module built as the project builds it, or from its
parameters (tests/verify_cases/realistic/model_args: SimSiam's builder and DINO's head, the training script in another
file), and fed inputs made for its first layer."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from test_verify import verdicts
from test_verify_realistic import _works, project, run_verify, snapshot
from verify_outcome import assert_finished

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")

_SIMSIAM_BUILT = (
    "verify built SimSiam(encoders.resnet_tiny, 64, 16) as called at train.py:31 with the argparse defaults "
    "arch='resnet_tiny', dim=64, pred_dim=16 and fed it inputs of shape [8, 3, 28, 28], [8, 3, 28, 28], made for its "
    "first layer Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)"
)


def test_a_model_needing_a_module_class_is_built_as_the_training_script_builds_it(tmp_path: Path) -> None:
    """`SimSiam(encoders.__dict__[args.arch], args.dim, args.pred_dim)` in train.py, `--arch resnet_tiny` by default."""
    folder = project(tmp_path, "model_args")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "builder.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (1, "model", [], None), stderr
    assert verdicts(report) == {("PFL101", 20, "confirmed")}
    (finding,) = report["findings"]
    assert finding["evidence"]["mechanism"] == (
        "replica 1 ran `forward` (stored in `embed`), bound to the original SmallResNet, on the original's parameters")
    assert _SIMSIAM_BUILT in report["notes"]
    assert snapshot(folder) == before


@pytest.mark.skipif(not _works("torchvision"), reason="needs a torchvision that loads beside this torch (the CUDA "
                    "build users get: torch 2.14.1 with torchvision 0.29.1, /work/venv-cu here)")
def test_a_model_is_built_with_the_torchvision_architecture_the_scripts_arch_option_names(tmp_path: Path) -> None:
    """main_simsiam.py as written: `models.__dict__[args.arch]` with `--arch resnet50`, torchvision's real resnet50."""
    folder = project(tmp_path, "model_args")
    (folder / "train.py").unlink()
    (folder / "main_simsiam.py").write_text(textwrap.dedent("""\
        import argparse

        import torchvision.models as models

        import builder

        model_names = sorted(name for name in models.__dict__
                             if name.islower() and not name.startswith("__") and callable(models.__dict__[name]))
        parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
        parser.add_argument("data", metavar="DIR", help="path to dataset")
        parser.add_argument("-a", "--arch", metavar="ARCH", default="resnet50", choices=model_names)
        parser.add_argument("--dim", default=2048, type=int, help="feature dimension (default: 2048)")
        parser.add_argument("--pred-dim", default=512, type=int, help="hidden dimension of the predictor (default: 512)")


        def main_worker(gpu, ngpus_per_node, args):
            model = builder.SimSiam(models.__dict__[args.arch], args.dim, args.pred_dim)
            return model
        """))
    returncode, report, stderr = run_verify(folder / "builder.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (1, "model", [], None), stderr
    assert verdicts(report) == {("PFL101", 20, "confirmed")}
    assert report["findings"][0]["evidence"]["mechanism"] == (
        "replica 1 ran `forward` (stored in `embed`), bound to the original ResNet, on the original's parameters")
    assert ("verify built SimSiam(torchvision.models.resnet50, 2048, 512) as called at main_simsiam.py:17 with the "
            "argparse defaults arch='resnet50', dim=2048, pred_dim=512 and fed it inputs of shape [8, 3, 28, 28], "
            "[8, 3, 28, 28], made for its first layer Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), "
            "bias=False)") in report["notes"]


def test_a_model_with_annotated_parameters_no_call_builds_is_built_from_them(tmp_path: Path) -> None:
    folder = project(tmp_path, "model_args")
    returncode, report, stderr = run_verify(folder / "heads.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (1, "model", [], None), stderr
    assert verdicts(report) == {("PFL101", 19, "confirmed")}
    assert ("verify built DINOHead(in_dim=8, out_dim=8) (in_dim: annotated int; out_dim: annotated int; no call in the "
            "project builds it) and fed it inputs of shape [8, 8], made for its first layer Linear(in_features=8, "
            "out_features=64, bias=True)") in report["notes"]


def test_an_argument_known_only_at_run_time_is_filled_from_its_parameter(tmp_path: Path) -> None:
    """DINO's `DINOHead(embed_dim, args.out_dim)`, `embed_dim` read from the backbone built at run time."""
    folder = project(tmp_path, "model_args")
    (folder / "train_dino.py").write_text(textwrap.dedent("""\
        import argparse

        import encoders
        from heads import DINOHead

        parser = argparse.ArgumentParser()
        parser.add_argument("--out_dim", default=256, type=int)


        def main():
            args = parser.parse_args()
            student = encoders.resnet_tiny(num_classes=10)
            embed_dim = student.fc.weight.shape[1]
            head = DINOHead(embed_dim, args.out_dim)
            print(head)


        if __name__ == "__main__":
            main()
        """))
    returncode, report, stderr = run_verify(folder / "heads.py", cwd=folder)
    assert (returncode, report["unexplained"]) == (1, []), stderr
    assert verdicts(report) == {("PFL101", 19, "confirmed")}
    assert ("verify built DINOHead(8, 256) as called at train_dino.py:14 with the argparse defaults out_dim=256 "
            "(in_dim=8 for embed_dim: annotated int) and fed it inputs of shape [8, 8], made for its first layer "
            "Linear(in_features=8, out_features=64, bias=True)") in report["notes"]


def test_a_model_that_fails_to_build_from_verifys_values_asks_for_an_example(tmp_path: Path) -> None:
    """builder.py without its training script: SimSiam needs a real encoder class, verify's stand-in cannot serve."""
    folder = project(tmp_path, "model_args")
    (folder / "train.py").unlink()
    returncode, report, stderr = run_verify(folder / "builder.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"]) == (2, "model", []), stderr  # verify's limit
    assert verdicts(report) == {("PFL101", 20, "not-run")}
    limit = ("verify's own limit (not a failure of the code): SimSiam() needs constructor arguments: built from its "
             "parameters (base_encoder: a module, by its name), it failed (TypeError: Identity.forward() got an "
             "unexpected keyword argument 'num_classes'); add pitfall_lint_example() returning (model, args)")
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'builder.py'}: not run to its end: {limit}"


def test_a_model_whose_arguments_cannot_be_made_up_asks_for_an_example(tmp_path: Path) -> None:
    (tmp_path / "tokens.py").write_text(textwrap.dedent("""\
        import torch.nn as nn


        class Tagger(nn.Module):
            def __init__(self, vocab_file: str, width: int = 16) -> None:
                super().__init__()
                words = open(vocab_file).read().split()
                self.embedding = nn.Embedding(len(words), width)
                self.score = lambda x: self.embedding(x).sum(-1)

            def forward(self, x):
                return self.score(x)
        """))
    returncode, report, stderr = run_verify(tmp_path / "tokens.py", cwd=tmp_path)
    assert (returncode, report["run"], report["unexplained"]) == (2, "model", []), stderr  # verify's limit
    assert verdicts(report) == {("PFL101", 9, "not-run")}
    limit = ("verify's own limit (not a failure of the code): Tagger() needs constructor arguments (vocab_file: str "
             "verify cannot make up); no call in the project builds it: add pitfall_lint_example() returning (model, args)")
    assert report["findings"][0]["evidence"]["mechanism"] == f"line 9 never ran: {limit}"
    assert stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'tokens.py'}: not run to its end: {limit}"


def test_a_forward_taking_two_views_gets_a_batch_for_each(tmp_path: Path) -> None:
    (tmp_path / "siamese.py").write_text(textwrap.dedent("""\
        import torch.nn as nn


        class Siamese(nn.Module):
            def __init__(self, width: int = 8) -> None:
                super().__init__()
                self.encoder = nn.Linear(width, width)
                self.embed = self.encoder.forward

            def forward(self, x1, x2):
                return self.embed(x1) - self.embed(x2)
        """))
    returncode, report, stderr = run_verify(tmp_path / "siamese.py", cwd=tmp_path)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (1, "model", [], None), stderr
    assert verdicts(report) == {("PFL101", 8, "confirmed")}
    assert ("verify built Siamese() with its default arguments and fed it inputs of shape [8, 8], [8, 8], made for its "
            "first layer Linear(in_features=8, out_features=8, bias=True)") in report["notes"]


def test_a_block_class_defined_beside_the_model_is_passed_as_that_class(tmp_path: Path) -> None:
    """kuangliu/pytorch-cifar's models/resnet.py: `ResNet(BasicBlock, [2, 2, 2, 2])`, BasicBlock a class of the file."""
    folder = project(tmp_path, "cifar_models")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "models" / "resnet.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (0, "model", [], None), stderr
    assert verdicts(report) == set()
    assert ("verify built ResNet(models.resnet.BasicBlock, [2, 2, 2, 2]) as called at models/resnet.py:71 and fed it "
            "inputs of shape [8, 3, 28, 28], made for its first layer Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), "
            "padding=(1, 1), bias=False)") in report["notes"]
    assert snapshot(folder) == before


def test_a_model_is_fed_the_tensors_its_caller_feeds_it_a_sample_for_each_replica(tmp_path: Path) -> None:
    """lucidrains/vit-pytorch: patches are cut before the first Linear; tests/test_vit.py feeds a [1, 3, 32, 32] image."""
    folder = project(tmp_path, "vit_model")
    returncode, report, stderr = run_verify(folder / "vit_pytorch" / "vit.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (1, "model", [], None), stderr
    assert verdicts(report) == {("PFL101", 83, "confirmed")}
    assert ("verify built ViT(image_size=32, patch_size=8, num_classes=10, dim=32, depth=2, heads=4, mlp_dim=64, "
            "dropout=0.1, emb_dropout=0.1) as called at tests/test_vit.py:5 and fed it inputs of shape [2, 3, 32, 32], as "
            "tests/test_vit.py:19 feeds it (batch 1 raised to 2, a sample for each replica)") in report["notes"]


def test_a_model_whose_first_layer_is_not_its_inputs_shape_asks_for_an_example(tmp_path: Path) -> None:
    """The ViT with no caller feeding it: inputs made for its first Linear fail in the patch rearrangement before it."""
    folder = project(tmp_path, "vit_model")
    (folder / "tests" / "test_vit.py").write_text("from vit_pytorch import ViT\n\nmodel = ViT(image_size=32, patch_size=8, "
                                                  "num_classes=10, dim=32, depth=2, heads=4, mlp_dim=64)\n")
    returncode, report, stderr = run_verify(folder / "vit_pytorch" / "vit.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"]) == (2, "model", []), stderr  # verify's limit
    assert verdicts(report) == {("PFL101", 83, "not-run")}
    limit = ("verify's own limit (not a failure of the code): ViT does not take inputs made for its first layer "
             "Linear(in_features=192, out_features=32, bias=True) (shape [8, 192]: ValueError: not enough values to "
             "unpack (expected 4, got 2)); the first layer is not always the input's shape (an einops Rearrange, a patch "
             "embedding) and no call in the project feeds it tensors of a literal shape: add pitfall_lint_example() "
             "returning (model, args)")
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'vit_pytorch' / 'vit.py'}: not run to its end: {limit}"


def test_a_model_whose_forward_calls_collectives_runs_in_ranks_under_ddp(tmp_path: Path) -> None:
    """facebookresearch/moco's builder.py: the forward shuffles the keys across GPUs with all_gather and broadcast,
    which under nn.DataParallel fail for want of a process group."""
    folder = project(tmp_path, "moco_model")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "moco" / "builder.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (0, "model", [], None), stderr
    assert verdicts(report) == set()
    assert report["why"] == (
        "it defines modules (MoCo) and no entry point, and its code calls torch.distributed.broadcast (line 73), which "
        "needs a process group: verify builds one in each of N ranks under torch.distributed.run and runs it in "
        "DistributedDataParallel")
    assert report["mode"].startswith(
        "model: 2 ranks under torch.distributed.run, each running the file's module in DistributedDataParallel; ")
    assert_finished(report)
    assert ("verify built MoCo(encoders.convnet_tiny, 16, 64, 0.999, 0.07, False) as called at main_moco.py:37 with the "
            "argparse defaults arch='convnet_tiny', moco_dim=16, moco_k=64, moco_m=0.999, moco_t=0.07 (mlp=False for "
            "args.mlp: its default) and fed it inputs of shape [8, 3, 28, 28], [8, 3, 28, 28], made for its first layer "
            "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)") in report["notes"]
    assert snapshot(folder) == before


def test_a_model_built_from_a_config_object_gets_the_config_the_training_script_makes(tmp_path: Path) -> None:
    """karpathy/minGPT: `GPT(config.model)` in projects/chargpt/chargpt.py, `config.model` made by
    `GPT.get_default_config()` in its get_config(), given a model type there and sizes read off the dataset."""
    folder = project(tmp_path, "mingpt_config")
    returncode, report, stderr = run_verify(folder / "mingpt" / "model.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (0, "model", [], None), stderr
    assert verdicts(report) == {("PFL105", 115, "not-reproduced")}
    assert ("verify built GPT(mingpt.model.GPT.get_default_config() with model_type='gpt-nano', vocab_size=8, "
            "block_size=8) as called at projects/chargpt/chargpt.py:79 (vocab_size=8 for "
            "train_dataset.get_vocab_size(): a size, by its name; block_size=8 for train_dataset.get_block_size(): a "
            "size, by its name) and fed it inputs of shape [8, 8], made for its first layer Embedding(8, 48)"
            ) in report["notes"]
