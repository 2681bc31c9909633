"""PFL203 wrapped-state-dict: which saves of a wrapper's state_dict are flagged, and when strict=False is."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from marks import assert_marks
from test_projects import check, found

# Building DDP makes a file distributed, so the DDP cases guard their saves (else PFL201 reports them too)
# and pass map_location to their loads (else PFL202 does).
SETUP = """
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
"""

CASES = {
    "ddp-alias-in-function": """
        def train(net):
            model = DDP(net)
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "ddp-full-spelling": """
        def train(net):
            model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[0])
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "ddp-imported-inside-the-function": """
        def train(net):
            from torch.nn.parallel import DistributedDataParallel
            model = DistributedDataParallel(net)
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "nn-dataparallel": """
        def train(net):
            model = nn.DataParallel(net)
            torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "torch-nn-dataparallel-at-module-level": """
        model = torch.nn.DataParallel(nn.Linear(2, 2))
        torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "dataparallel-alias": """
        from torch.nn import DataParallel as DP
        model = DP(nn.Linear(2, 2))
        torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "ddp-rebound-to-itself-moved": """
        def train(net):
            model = DDP(net)
            model = model.to("cuda").train()
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "dataparallel-chained-then-rebound-at-module-level": """
        model = nn.DataParallel(nn.Linear(2, 2)).cuda()
        model = model.float()
        torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "rebound-to-itself-moved-saving-the-module": """
        def train(net):
            model = nn.DataParallel(net)
            model = model.cuda()
            torch.save(model.module.state_dict(), "ckpt.pt")
        model = nn.DataParallel(nn.Linear(2, 2))
        model = model.cuda()
        torch.save(model.module.state_dict(), "ckpt.pt")
    """,
    "moved-in-the-branch-that-does-not-wrap": """
        def train(net, parallel):
            if parallel:
                model = nn.DataParallel(net)
            else:
                model = net.cuda()
                model = model.eval()
                torch.save(model.state_dict(), "ckpt.pt")
    """,
    "module-level-wrapper-saved-in-a-function": """
        model = nn.DataParallel(nn.Linear(2, 2))
        def save_checkpoint(path):
            torch.save(model.state_dict(), path)  # expect: PFL203
    """,
    "aliased-save": """
        from torch import save as tsave
        def train(net):
            model = nn.DataParallel(net)
            tsave(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "through-a-local-variable": """
        def train(net):
            model = nn.DataParallel(net)
            state = model.state_dict()
            torch.save(state, "ckpt.pt")  # expect: PFL203
    """,
    "dict-literal-value": """
        def train(net, optimizer, epoch):
            model = nn.DataParallel(net)
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, "ckpt.pt")  # expect: PFL203
    """,
    "dict-literal-through-a-local-variable": """
        def train(net, optimizer):
            model = DDP(net)
            checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
            if dist.get_rank() == 0:
                torch.save(checkpoint, "ckpt.pt")  # expect: PFL203
    """,
    "lenient-load-in-a-file-that-saves-prefixed-keys": """
        def evaluate(net):
            net.load_state_dict(torch.load("ckpt.pt"), strict=False)  # expect: PFL203
        def train(net):
            model = nn.DataParallel(net)
            torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    # Keys without the prefix.
    "module-state-dict": """
        def train(net):
            model = DDP(net)
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "ckpt.pt")
    """,
    "bare-model-state-dict": """
        def train(net):
            model = nn.DataParallel(net)
            torch.save(net.state_dict(), "ckpt.pt")
    """,
    "unwrapped-through-a-local-variable": """
        def train(net):
            model = nn.DataParallel(net)
            model_without_dp = model.module
            torch.save({"model": model_without_dp.state_dict()}, "ckpt.pt")
    """,
    # Not known to be a wrapper in this scope.
    "wrapper-built-in-another-function": """
        def build(net):
            model = nn.DataParallel(net)
            return model
        def save_checkpoint(model):
            torch.save(model.state_dict(), "ckpt.pt")
    """,
    "wrapper-stored-on-an-attribute": """
        class Trainer:
            def __init__(self, net):
                self.model = nn.DataParallel(net)
            def save(self):
                torch.save(self.model.state_dict(), "ckpt.pt")
    """,
    # strict=False alone is fine for partial loads.
    "lenient-load-without-prefixed-saves": """
        def train(net):
            model = nn.DataParallel(net)
            torch.save(model.module.state_dict(), "ckpt.pt")
            net.load_state_dict(torch.load("pretrained.pt"), strict=False)
    """,
    "strict-load-in-a-file-that-saves-prefixed-keys": """
        def train(net, strict):
            model = nn.DataParallel(net)
            torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
            net.load_state_dict(torch.load("a.pt"))
            net.load_state_dict(torch.load("b.pt"), strict=True)
            net.load_state_dict(torch.load("c.pt"), strict=strict)
    """,
    # Read back into the wrapper that saved it (a resume), and loaded into no bare model: the keys fit.
    "resume-into-the-same-wrapper": """
        import os
        def train(net, folder):
            model = DDP(net)
            path = os.path.join(folder, "last.pt")
            if os.path.exists(path):
                model.load_state_dict(torch.load(path, map_location="cpu"))
            for epoch in range(3):
                if dist.get_rank() == 0:
                    torch.save(model.state_dict(), path)
    """,
    "resume-through-a-loading-helper": """
        import os
        def train(net, optimizer, folder, utils):
            classifier = DDP(net)
            utils.restart_from_checkpoint(os.path.join(folder, "checkpoint.pth.tar"), state_dict=classifier, optimizer=optimizer)
            for epoch in range(3):
                if dist.get_rank() == 0:
                    state = {"state_dict": classifier.state_dict(), "epoch": epoch}
                    torch.save(state, os.path.join(folder, "checkpoint.pth.tar"))
    """,
    # The optimizer's (scheduler's, scaler's) state restored from the same checkpoint is no bare model's load.
    "resume-restoring-the-optimizer-too": """
        def train(net, local_rank):
            net = DDP(net, device_ids=[local_rank])
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
            if dist.get_rank() == 0:
                torch.save({"state_dict": net.state_dict(), "optimizer": optimizer.state_dict()}, "./ckpt.pth.tar")
            dist.barrier()
            checkpoint = torch.load("./ckpt.pth.tar", map_location=f"cuda:{local_rank}")
            net.load_state_dict(checkpoint["state_dict"])
            optimizer.load_state_dict(checkpoint["optimizer"])
    """,
    "resume-restoring-a-scheduler-and-a-scaler-by-their-entries": """
        def train(net, opt, sched, scaler):
            model = DDP(net)
            state = torch.load("last.pt", map_location="cpu")
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optim"])
            sched.load_state_dict(state["lr_scheduler"])
            scaler.load_state_dict(state["scaler"])
            if dist.get_rank() == 0:
                torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, "last.pt")
    """,
    "resume-and-an-ema-model-loaded-bare": """
        def train(net, ema):
            model = DDP(net)
            state = torch.load("last.pt", map_location="cpu")
            model.load_state_dict(state["model"])
            ema.load_state_dict(state["model"])
            if dist.get_rank() == 0:
                torch.save({"model": model.state_dict()}, "last.pt")  # expect: PFL203
    """,
    # The save in the branch where the model was not wrapped (a later `if` on the wrap's own test) saves bare keys.
    "save-in-the-branch-that-did-not-wrap": """
        def main(args, net):
            model = net.to("cpu")
            if args.distributed:
                model = DDP(model)
            if args.distributed:
                if dist.get_rank() == 0:
                    torch.save(model.state_dict(), "mnist_cnn.pt")  # expect: PFL203
            else:
                torch.save(model.state_dict(), "mnist_cnn_single.pt")
    """,
    "save-after-a-wrap-in-one-branch": """
        def main(args, net):
            model = net.to("cpu")
            if args.distributed:
                model = DDP(model)
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "mnist_cnn.pt")  # expect: PFL203
    """,
    "resume-into-a-wrap-that-only-some-runs-make": """
        net = nn.Linear(2, 2)
        if torch.cuda.is_available():
            net = nn.DataParallel(net)
        checkpoint = torch.load("./checkpoint/ckpt.pth", map_location="cpu")
        net.load_state_dict(checkpoint["net"])
        def test(acc):
            torch.save({"net": net.state_dict(), "acc": acc}, "./checkpoint/ckpt.pth")  # expect: PFL203
    """,
    "resume-and-a-load-into-the-bare-model": """
        def evaluate(net):
            net.load_state_dict(torch.load("best.pt", map_location="cpu"))
        def train(net):
            model = DDP(net)
            model.load_state_dict(torch.load("best.pt", map_location="cpu"))
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "best.pt")  # expect: PFL203
    """,
    "resume-of-another-checkpoint": """
        def train(net):
            model = DDP(net)
            model.load_state_dict(torch.load("init.pt", map_location="cpu"))
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "best.pt")  # expect: PFL203
    """,
    "lenient-load-into-the-wrapper-itself": """
        def train(net):
            model = nn.DataParallel(net)
            model.load_state_dict(torch.load("pretrained.pt"), strict=False)
            torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """,
    "local-function-named-save": """
        def save(obj, path):
            pass
        def train(net):
            model = nn.DataParallel(net)
            save(model.state_dict(), "ckpt.pt")
    """,
}


# strict=False after the loading function strips the prefix itself: the keys fit the bare model.
STRIPPED = {
    "slice": "{k[7:]: v for k, v in state.items()}",
    "slice-of-the-prefix-length": '{k[len("module."):]: v for k, v in state.items()}',
    "replace": '{k.replace("module.", ""): v for k, v in state.items()}',
    "removeprefix": '{k.removeprefix("module."): v for k, v in state.items()}',
    "torch-helper": 'consume_prefix_in_state_dict_if_present(state, "module.") or state',
}
for spelling, stripped in STRIPPED.items():
    CASES[f"lenient-load-after-the-prefix-is-stripped-{spelling}"] = f"""
        from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present
        def evaluate(net):
            state = torch.load("ckpt.pt")
            net.load_state_dict({stripped}, strict=False)
        def train(net):
            model = nn.DataParallel(net)
            torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL203
    """


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))


def test_name_rebound_to_the_unwrapped_module_is_not_flagged() -> None:
    assert_marks(SETUP + dedent("""
        def train(net):
            model = nn.DataParallel(net)
            model = model.module
            torch.save(model.state_dict(), "ckpt.pt")
    """))


def test_save_before_wrapping_is_not_flagged() -> None:
    assert_marks(SETUP + dedent("""
        def train(model):
            torch.save(model.state_dict(), "init.pt")
            model = nn.DataParallel(model)
    """))


def test_module_level_state_variable_is_flagged() -> None:
    assert_marks(SETUP + dedent("""
        model = nn.DataParallel(nn.Linear(2, 2))
        state = model.state_dict()
        torch.save(state, "ckpt.pt")  # expect: PFL203
    """))


RESUMING_TRAINER = """
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def main(folder):
    dist.init_process_group("gloo")
    model = DistributedDataParallel(nn.Linear(8, 1))
    if (folder / "model.pt").exists():
        model.load_state_dict(torch.load(folder / "model.pt", map_location="cpu"))
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), folder / "model.pt")
"""

BARE_EVALUATION = """
import torch
import torch.nn as nn


def load_to_cpu(path):
    return torch.load(path, map_location="cpu")


def evaluate(folder):
    model = nn.Linear(8, 1)
    model.load_state_dict(load_to_cpu(folder / "model.pt"))
"""


def test_a_resume_is_reported_where_another_file_loads_the_checkpoint_into_the_bare_model(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(RESUMING_TRAINER)
    assert check("--no-cache", "--select", "PFL203", cwd=tmp_path)["diagnostics"] == []
    (tmp_path / "evaluate.py").write_text(BARE_EVALUATION)
    assert found(check("--no-cache", "--select", "PFL203", cwd=tmp_path)) == {("train.py", "PFL203", 14)}
    # A file checked alone asks the rest of the project too, and a cached result follows the other file.
    assert found(check("--select", "PFL203", "train.py", cwd=tmp_path)) == {("train.py", "PFL203", 14)}
    (tmp_path / "evaluate.py").write_text(BARE_EVALUATION.replace('"model.pt"', '"baseline.pt"'))
    assert check("--select", "PFL203", "train.py", cwd=tmp_path)["diagnostics"] == []
