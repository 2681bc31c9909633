"""PFL210 ddp-wrap-order: moves, casts, freezes and edits of a model after DistributedDataParallel wrapped it, and
`device_ids` for a model built on the CPU; wrapping again afterwards is the fix."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

SETUP = """
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
"""

CASES = {
    "cast-the-wrapper": """
        def setup(net):
            ddp = DDP(net)
            ddp.half()  # expect: PFL210
            return ddp
    """,
    "cast-the-inner-model-and-through-module": """
        def setup(net):
            ddp = DDP(net)
            net.to(torch.bfloat16)  # expect: PFL210
            ddp.module.double()  # expect: PFL210
            return ddp
    """,
    "a-cast-sharing-the-line-of-the-wrap-in-a-script": """
        net = nn.Linear(2, 2)
        ddp = DDP(net); net.half()  # expect: PFL210
        for step in range(2):
            ddp(torch.ones(1, 2)).sum().backward()
    """,
    "a-move-once-a-script-has-trained": """
        net = nn.Linear(2, 2)
        ddp = DDP(net)
        for step in range(2):
            ddp(torch.ones(1, 2)).sum().backward()
        net.cpu(); print(net.weight.sum())
        print("done")
    """,
    "cast-chained-on-the-wrap": """
        def setup(net):
            model = DDP(net).to(dtype=torch.float16)  # expect: PFL210
            return model
    """,
    "move-a-model-built-on-the-cpu": """
        def setup(device):
            model = nn.Linear(4, 4)
            model = DDP(model)
            model.cuda()  # expect: PFL210
            return model
    """,
    "device-ids-for-a-cpu-model": """
        def setup(rank):
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            model = DDP(model, device_ids=[rank])  # expect: PFL210
    """,
    "rebound-to-itself-moved-after-the-wrap": """
        def setup(loader):
            model = nn.Linear(4, 4)
            model = DDP(model)
            model = model.cuda()  # expect: PFL210
            for x in loader:
                model(x).sum().backward()
    """,
    "rebound-to-itself-cast-at-module-level": """
        model = DDP(nn.Linear(4, 4).to(0), device_ids=[0])
        model = model.train().half()  # expect: PFL210
        for x in range(3):
            model(x).sum().backward()
    """,
    "inner-model-rebound-moved-after-the-wrap": """
        def setup(loader):
            net = nn.Linear(4, 4)
            ddp = DDP(net)
            net = net.to("cuda")  # expect: PFL210
            for x in loader:
                ddp(x).sum().backward()
    """,
    "device-ids-for-a-torchvision-model": """
        import torchvision
        def setup(rank):
            model = torchvision.models.resnet50(weights=None)
            model = DDP(model, device_ids=[rank])  # expect: PFL210
    """,
    "device-ids-for-a-model-by-architecture-name": """
        import torchvision.models as models
        def setup(rank, arch):
            model = models.__dict__[arch](pretrained=True)
            model = DDP(model, device_ids=[rank])  # expect: PFL210
        def other(rank, arch):
            model = getattr(models, arch)()
            ddp = DDP(model, device_ids=[rank])  # expect: PFL210
    """,
    "device-ids-for-a-timm-model-at-module-level": """
        import timm
        from torchvision.models.detection import fasterrcnn_resnet50_fpn
        model = timm.create_model("resnet50", pretrained=True)
        model = DDP(model, device_ids=[0])  # expect: PFL210
        detector = fasterrcnn_resnet50_fpn()
        detector = DDP(detector, device_ids=[0])  # expect: PFL210
    """,
    "device-ids-for-a-module-of-the-project": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
        def setup(rank):
            net = Net()
            ddp = DDP(module=net, device_ids=[rank])  # expect: PFL210
    """,
    "replace-a-submodule": """
        def setup(net):
            ddp = DDP(net)
            ddp.module.head = nn.Linear(4, 2)  # expect: PFL210
            net.add_module("extra", nn.Linear(4, 4))  # expect: PFL210
            return ddp
    """,
    "freeze-after-wrapping": """
        def setup(net):
            ddp = DDP(net)
            for p in ddp.module.backbone.parameters():  # expect: PFL210
                p.requires_grad = False
            net.head.requires_grad_(False)  # expect: PFL210
            net.bias.requires_grad = False  # expect: PFL210
            return ddp
    """,
    "sync-batchnorm-after-wrapping": """
        def setup(net):
            ddp = DDP(net)
            nn.SyncBatchNorm.convert_sync_batchnorm(net)  # expect: PFL210
            return ddp
    """,
    "move-off-the-device-and-back-under-a-condition": """
        def run(rank, move_model_to_cpu_and_back):
            model = nn.Linear(10, 5).to(rank)
            ddp_model = DDP(model, device_ids=[rank])
            if move_model_to_cpu_and_back:
                ddp_model.cpu()  # expect: PFL210
                ddp_model.cuda(rank)
            loss = ddp_model(torch.randn(20, 10).to(rank)).sum()
            loss.backward()
    """,
    "move-off-the-device-a-model-given-as-a-parameter": """
        def train(rank, model, loader):
            model = model.to(rank)
            ddp_model = DDP(model, device_ids=[rank])
            ddp_model.module.to("cpu")  # expect: PFL210
            ddp_model.cuda(rank)
            for data in loader:
                ddp_model(data).sum().backward()
    """,
    "move-off-the-device-inside-the-training-loop": """
        def train(rank, loader):
            ddp_model = DDP(nn.Linear(10, 5).to(rank))
            for data in loader:
                outputs = ddp_model(data)
                snapshot = ddp_model.to(torch.device("cpu")).state_dict()  # expect: PFL210
                ddp_model.to(rank)
                outputs.sum().backward()
    """,
    "move-onto-the-device-right-after-wrapping-a-parameter": """
        def setup(model, local_rank):
            model = DDP(model)
            model.cuda(local_rank)  # expect: PFL210
            return model
    """,
    "move-onto-the-gpu-after-a-wrap-with-device-ids": """
        def setup(build, local_rank):
            model = build()
            model = DDP(model, device_ids=[local_rank])
            model.cuda(local_rank)  # expect: PFL210
            return model
    """,
    "freeze-everything-then-unfreeze-a-part": """
        def finetune(net, loader):
            ddp = DDP(net)
            for p in ddp.parameters():  # expect: PFL210
                p.requires_grad = False
            ddp.module.head.requires_grad_(True)
            for x in loader:
                ddp(x).sum().backward()
    """,
    "freeze-some-parameters-of-a-trained-wrapper": """
        def train(net, loader):
            ddp = DDP(net)
            for name, p in ddp.named_parameters():  # expect: PFL210
                if name.startswith("backbone"):
                    p.requires_grad = False
            for x in loader:
                ddp(x).sum().backward()
    """,
    # Fine.
    "zoo-models-placed-before-the-wrap": """
        import timm
        import torchvision.models as models
        from torchvision.models import resnet50
        def setup(rank, arch):
            model = models.__dict__[arch]()
            model.cuda(rank)
            model = DDP(model, device_ids=[rank])
        def other(rank):
            model = resnet50().to(rank)
            model = DDP(model, device_ids=[rank])
        def third(rank):
            model = timm.create_model("resnet50", device=f"cuda:{rank}")
            model = DDP(model, device_ids=[rank])
        model = getattr(models, "resnet18")()
        model = model.to(0)
        model = DDP(model, device_ids=[0])
    """,
    "models-from-a-hub-or-a-feature-extractor": """
        import torchvision.models as models
        from torchvision.models.feature_extraction import create_feature_extractor
        def setup(rank, backbone):
            model = torch.hub.load("ultralytics/yolov5", "yolov5s")
            model = DDP(model, device_ids=[rank])
            features = create_feature_extractor(backbone, return_nodes=["layer4"])
            features = DDP(features, device_ids=[rank])
    """,
    "rebound-to-itself-before-the-wrap": """
        def setup(rank, loader):
            model = nn.Linear(4, 4)
            model = model.cuda(rank)
            model = DDP(model, device_ids=[rank])
            model = model.train()
            for x in loader:
                model(x).sum().backward()
    """,
    "a-frozen-teacher-wrapped-for-sync-batchnorm": """
        def main(student, teacher, gpu, train_one_epoch):
            student, teacher = student.cuda(), teacher.cuda()
            teacher = nn.SyncBatchNorm.convert_sync_batchnorm(teacher)
            teacher = nn.parallel.DistributedDataParallel(teacher, device_ids=[gpu])
            teacher_without_ddp = teacher.module
            student = nn.parallel.DistributedDataParallel(student, device_ids=[gpu])
            teacher_without_ddp.load_state_dict(student.module.state_dict())
            for p in teacher.parameters():
                p.requires_grad = False
            train_one_epoch(student, teacher)
    """,
    "frozen-whole-through-the-wrapper-or-its-module": """
        def main(student, teacher, ema, train):
            teacher = DDP(teacher)
            teacher.requires_grad_(False)
            ema = DDP(ema)
            for p in ema.module.parameters():
                p.requires_grad_(False)
            train(DDP(student), teacher, ema)
    """,
    "a-gan-discriminator-switched-off-and-on-between-phases": """
        def train(netG, netD, loader):
            netD = DDP(netD)
            netG = DDP(netG)
            for real in loader:
                for p in netD.parameters():
                    p.requires_grad = True
                lossD = netD(netG(real).detach()).mean() - netD(real).mean()
                lossD.backward()
                for p in netD.parameters():
                    p.requires_grad = False
                lossG = -netD(netG(real)).mean()
                lossG.backward()
    """,
    "a-partly-frozen-teacher-run-without-grad-or-detached": """
        def distill(student, teacher, critic, loader):
            teacher = DDP(teacher)
            for p in teacher.module.backbone.parameters():
                p.requires_grad = False
            critic = DDP(critic)
            critic.module.head.requires_grad_(False)
            student = DDP(student)
            for x in loader:
                with torch.no_grad():
                    target = teacher(x)
                score = critic(x).detach()
                loss = (student(x) - target).pow(2).mean() * score
                loss.backward()
    """,
    "cast-and-moved-off-the-device-once-training-is-over": """
        def main(rank, loader):
            model = DDP(nn.Linear(4, 4).to(rank), device_ids=[rank])
            for x in loader:
                model(x).sum().backward()
            model.half()
            model.cpu()
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "final.pt")
    """,
    "module-requires-grad-attribute-freezes-nothing": """
        def train(net, loader):
            ddp = DDP(net)
            ddp.requires_grad = False
            for x in loader:
                ddp(x).sum().backward()
    """,
    "moved-back-onto-the-device-it-was-wrapped-on": """
        def train(rank, loader):
            model = nn.Linear(4, 4)
            model.cuda(rank)
            model = DDP(model)
            model.cuda(rank)
            for x in loader:
                model(x).sum().backward()
    """,
    "moved-and-cast-before-wrapping": """
        def setup(device, rank):
            model = nn.Linear(4, 4).to(device)
            model = model.half()
            model = DDP(model, device_ids=[rank])
    """,
    "a-second-move-to-the-same-device": """
        def setup(device, rank):
            model = nn.Linear(4, 4)
            model.to(device)
            model = DDP(model, device_ids=[rank])
            model.to(device)
    """,
    "wrapped-again-after-the-change": """
        def setup(net):
            ddp = DDP(net)
            net.half()
            ddp = DDP(net)
    """,
    "model-from-a-builder-with-device-ids": """
        def setup(build, cfg, rank):
            model = build(cfg)
            model = DDP(model, device_ids=[rank])
    """,
    "device-ids-for-a-container-of-modules-built-elsewhere": """
        def setup(trunk, head, rank):
            module = nn.Sequential(trunk, head)
            ddp = DDP(module=module, device_ids=[rank])
    """,
    "device-ids-chosen-at-run-time": """
        def setup(rank, cpu):
            model = nn.Linear(4, 4)
            model = DDP(model, device_ids=None if cpu else [rank])
    """,
    "another-branch": """
        def setup(net, sharded):
            if sharded:
                wrapped = net
                wrapped = wrapped.half()
            else:
                wrapped = DDP(net)
    """,
    "name-rebound-to-another-model": """
        def setup(net, other):
            ddp = DDP(net)
            ddp = other
            ddp.half()
    """,
    "freeze-with-unused-parameter-detection": """
        def setup(net):
            ddp = DDP(net, find_unused_parameters=True)
            net.head.requires_grad_(False)
    """,
    "eval-and-train-modes": """
        def setup(net):
            ddp = DDP(net)
            ddp.eval()
            ddp.train()
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))


def messages(body: str) -> list[tuple[int, str]]:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    text = SETUP + dedent(body)
    result = Engine([r for r in all_rules() if r.info.code == "PFL210"]).check_source("example.py", text.encode())
    return [(d.line, d.message) for d in result.diagnostics]


def test_the_message_for_a_whole_model_frozen_then_partly_unfrozen() -> None:
    assert messages(CASES["freeze-everything-then-unfreeze-a-part"]) == [
        (
            10,
            "freezes `ddp` after DistributedDataParallel wrapped it (line 9), and line 12 unfreezes only `ddp.module.head`: "
            "DDP waits for the gradients of the parameters left frozen and fails at the next iteration with \"Expected to "
            "have finished reduction in the prior iteration before starting a new one\"; freeze and unfreeze before wrapping",
        )
    ]


def test_the_messages_for_moves_and_casts_name_what_is_lost() -> None:
    lost = (
        "gives each parameter a new gradient accumulator, and DDP's all-reduce hooks stay on the old ones, so no gradient "
        "is averaged any more and the ranks drift apart without an error"
    )
    assert messages(CASES["move-off-the-device-and-back-under-a-condition"]) == [
        (
            12,
            "`ddp_model.cpu()` moves `ddp_model` off its device after DistributedDataParallel wrapped it (line 10): the move "
            "gives each parameter a new gradient accumulator, and DDP's all-reduce hooks stay on the old ones (moving back "
            "does not bring them back), so no gradient is averaged any more and the ranks drift apart without an error "
            "(pytorch/pytorch#104336); copy the weights instead (`{k: v.cpu() for k, v in model.state_dict().items()}`), or "
            "wrap the model again once it is back",
        )
    ]
    assert messages(CASES["move-onto-the-device-right-after-wrapping-a-parameter"]) == [
        (
            10,
            "`model.cuda(local_rank)` moves `model` onto its device only after DistributedDataParallel wrapped it (line 9), "
            f"and nothing here placed it before: for a model still on the CPU the move {lost}; move the model first, then "
            "wrap it (`DDP(model.to(device), device_ids=[local_rank])`)",
        )
    ]
    assert messages(CASES["move-onto-the-gpu-after-a-wrap-with-device-ids"]) == [
        (
            11,
            "`model.cuda(local_rank)` moves `model` onto its GPU only after DistributedDataParallel wrapped it with "
            "`device_ids` (line 10), and nothing here placed it before: for a model still on the CPU the wrap raises "
            "\"ValueError: DistributedDataParallel device_ids and output_device arguments only work with single-device/"
            "multiple-device GPU modules or CPU modules\"; move the model first, then wrap it "
            "(`DDP(model.to(device), device_ids=[local_rank])`)",
        )
    ]
    assert messages(CASES["move-a-model-built-on-the-cpu"]) == [
        (
            11,
            "`model.cuda()` moves `model` onto its device only after DistributedDataParallel wrapped it on the CPU (line 10): "
            f"the move {lost}; move the model first, then wrap it (`DDP(model.to(device), device_ids=[local_rank])`)",
        )
    ]
    assert messages(CASES["cast-the-wrapper"]) == [
        (10, f"`ddp.half()` casts `ddp` after DistributedDataParallel wrapped it (line 9): the cast {lost}; cast the model before wrapping it")
    ]
