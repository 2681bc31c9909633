"""PFL207 rank-divergent-collective: collectives (and framework calls that run one) that only some ranks reach, and
the guards, pairs and subgroups that are not that."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from marks import assert_marks

SETUP = """
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(1)
"""

CASES = {
    "all-reduce-on-rank-zero": """
        if rank == 0:
            dist.all_reduce(t)  # expect: PFL207
    """,
    "barrier-in-a-rank-zero-block": """
        def save(model):
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "m.pt")
                dist.barrier()  # expect: PFL207
    """,
    "else-branch": """
        if rank == 0:
            print("writer")
        else:
            dist.broadcast(t, src=0)  # expect: PFL207
    """,
    "early-return": """
        def report(t):
            if dist.get_rank() != 0:
                return
            dist.all_gather_object([None, None], t)  # expect: PFL207
    """,
    "early-continue-in-a-loop": """
        for step in range(3):
            if not rank == 0:
                continue
            dist.reduce(t, dst=0)  # expect: PFL207
    """,
    "rank-zero-only-decorator": """
        from lightning.pytorch.utilities import rank_zero_only
        @rank_zero_only
        def log_metric(t):
            dist.all_reduce(t)  # expect: PFL207
    """,
    "imported-function-and-aliases": """
        from torch.distributed import all_reduce as allreduce
        import torch.distributed as td
        if rank == 0:
            allreduce(t)  # expect: PFL207
            td.barrier()  # expect: PFL207
            torch.distributed.monitored_barrier()  # expect: PFL207
    """,
    "main-process-predicate-and-local-rank": """
        import os
        local_rank = int(os.environ["LOCAL_RANK"])
        def is_main_process():
            return rank == 0
        if is_main_process():
            dist.all_reduce(t)  # expect: PFL207
        if local_rank in [-1, 0]:
            dist.new_group([0])  # expect: PFL207
    """,
    "group-none-is-the-default-group": """
        if rank == 0:
            dist.all_reduce(t, group=None)  # expect: PFL207
    """,
    "rank-and-distributed": """
        import os
        distributed = "WORLD_SIZE" in os.environ
        if distributed and rank == 0:
            dist.barrier()  # expect: PFL207
    """,
    "else-branch-that-only-logs": """
        if rank == 0:
            dist.barrier()  # expect: PFL207
        else:
            print("waiting for rank 0")
    """,
    # Every rank reaches the call, or the ranks pair up.
    "the-others-hold-their-half-in-a-call": """
        def serve(engine):
            if rank == 0:
                engine.deploy()
                dist.broadcast(t, src=0)
            else:
                engine.serve_other_ranks()
    """,
    "the-others-wait-before-leaving": """
        def publish(engine):
            if rank != 0:
                engine.wait_for_the_signal()
                return
            dist.broadcast(t, src=0)
    """,
    "unguarded": """
        dist.all_reduce(t)
        if rank == 0:
            print(t)
        dist.barrier()
    """,
    "distributed-or-not-tests": """
        import os
        local_rank = int(os.environ.get("LOCAL_RANK", -1))
        if local_rank != -1:
            dist.barrier()
        if rank is not None:
            dist.all_reduce(t)
        if rank >= 0:
            dist.barrier()
        if "RANK" in os.environ:
            dist.barrier()
    """,
    "gather-to-rank-zero-on-both-branches": """
        if rank == 0:
            gathered = [torch.zeros(1), torch.zeros(1)]
            dist.gather(t, gathered, dst=0)
        else:
            dist.gather(t, dst=0)
    """,
    "main-process-first": """
        import os
        def zero_first(local_rank):
            if local_rank not in [-1, 0]:
                dist.barrier()
            yield
            if local_rank == 0:
                dist.barrier()
    """,
    "a-subgroup": """
        group = dist.new_group([0])
        if rank == 0:
            dist.all_reduce(t, group=group)
    """,
    "list-of-ranks-and-flags-named-after-ranks": """
        def cached_group(ranks, cache, load_on_all_ranks):
            if tuple(ranks) not in cache:
                cache[tuple(ranks)] = dist.new_group(ranks)
            if load_on_all_ranks:
                dist.barrier()
    """,
    "a-value-the-ranks-agreed-on": """
        def shared(strategy, path):
            if not strategy.reduce_boolean_decision(path == "x", all=True):
                return
            dist.barrier()
    """,
    "raise-on-a-bad-rank": """
        def check(world_size):
            if rank >= world_size:
                raise ValueError("bad rank")
            dist.barrier()
    """,
    # The exit's condition cannot hold where the collective stands: with FSDP evaluation every rank goes on.
    "an-early-exit-that-the-collective's-branch-rules-out": """
        def evaluate(args):
            use_fsdp_eval = args.fsdp and args.distributed
            is_rank0 = rank == 0
            if not use_fsdp_eval and not is_rank0:
                return {}
            if use_fsdp_eval:
                dist.broadcast(t, src=0)
    """,
    "an-early-exit-ruled-out-by-an-assert": """
        def evaluate(sharded):
            if not sharded and rank != 0:
                return
            assert sharded
            dist.all_reduce(t)
    """,
    "an-early-exit-that-another-branch-does-not-rule-out": """
        def evaluate(use_fsdp_eval, args):
            if not use_fsdp_eval and rank != 0:
                return
            if args.verbose:
                dist.broadcast(t, src=0)  # expect: PFL207
            if not use_fsdp_eval:
                dist.barrier()  # expect: PFL207
    """,
    "a-local-function-named-like-a-collective": """
        def barrier():
            pass
        if rank == 0:
            barrier()
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))


FRAMEWORKS = {
    # Its barrier came in Lightning 2.1: a file checked alone pins no version (see test_lightning_versions_pinned).
    "lightning-save-checkpoint-of-an-unknown-version": """
        import lightning.pytorch as pl
        def end(trainer):
            if trainer.is_global_zero:
                trainer.save_checkpoint("last.ckpt")
    """,
    "lightning-log-sync-dist-in-a-rank-zero-hook": """
        import lightning.pytorch as pl
        from lightning.pytorch.utilities import rank_zero_only
        class Model(pl.LightningModule):
            @rank_zero_only
            def on_validation_epoch_end(self):
                self.log("val/acc", 0.5, sync_dist=True)  # expect: PFL207
                self.log("val/loss", 0.5)
    """,
    "lightning-log-rank-zero-only-is-fine": """
        import lightning.pytorch as pl
        class Model(pl.LightningModule):
            def on_validation_epoch_end(self):
                if self.global_rank == 0:
                    self.log("val/acc", 0.5, rank_zero_only=True)
    """,
    "accelerate-gather-and-wait": """
        from accelerate import Accelerator
        accelerator = Accelerator()
        def evaluate(predictions):
            if accelerator.is_main_process:
                everything = accelerator.gather_for_metrics(predictions)  # expect: PFL207
                accelerator.wait_for_everyone()  # expect: PFL207
    """,
    "accelerate-save-state-with-deepspeed": """
        from accelerate import Accelerator, DistributedType
        accelerator = Accelerator()
        uses_deepspeed = accelerator.distributed_type == DistributedType.DEEPSPEED
        if accelerator.is_main_process:
            accelerator.save_state("ckpt")  # expect: PFL207
        if accelerator.is_main_process or accelerator.distributed_type == DistributedType.DEEPSPEED:
            accelerator.save_state("ckpt")
    """,
    "accelerate-save-state-without-sharding-is-no-collective": """
        from accelerate import Accelerator
        accelerator = Accelerator()
        if accelerator.is_main_process:
            accelerator.save_state("ckpt")
    """,
    "fsdp-state-dict": """
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.checkpoint.state_dict import get_model_state_dict
        def save(net):
            model = FSDP(net)
            if rank == 0:
                state = model.state_dict()  # expect: PFL207
                state = get_model_state_dict(model)  # expect: PFL207
    """,
    "state-read-on-rank-zero-before-the-model-is-sharded": """
        from torch.distributed._composable.fsdp import fully_shard
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
        def prepare(model):
            full_state = {}
            if rank == 0:
                full_state = get_model_state_dict(model)
                set_model_state_dict(model, full_state)  # expect: PFL207
            fully_shard(model)
            return full_state
    """,
    "deepspeed-save-checkpoint": """
        import deepspeed
        def save(model_engine):
            if rank == 0:
                model_engine.save_checkpoint("ckpt")  # expect: PFL207
    """,
    "ddp-training-step-on-one-rank": """
        from torch.nn.parallel import DistributedDataParallel as DDP
        def train(net, x):
            model = DDP(net)
            if rank == 0:
                loss = model(x).sum()  # expect: PFL207
                loss.backward()
            with torch.no_grad():
                if rank == 0:
                    model(x)
    """,
    "one-device-test": """
        import lightning.pytorch as pl
        def test_save(tmp_path, model):
            trainer = pl.Trainer(devices=1)
            trainer.fit(model)
            if trainer.is_global_zero:
                trainer.save_checkpoint(tmp_path / "last.ckpt")
    """,
    "a-project-method-named-like-a-framework-one": """
        class Trainer:
            def save_checkpoint(self, path):
                pass
        trainer = Trainer()
        if rank == 0:
            trainer.save_checkpoint("last.ckpt")
    """,
}


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_framework_call(name: str) -> None:
    assert_marks(SETUP + dedent(FRAMEWORKS[name]))


SAVES_ON_RANK_ZERO = """
import {module} as pl
def end(trainer):
    if trainer.is_global_zero:
        trainer.save_checkpoint("last.ckpt"){mark}
"""
IN_DEEPSPEED_RUN = '\ndef fit(model):\n    pl.Trainer(strategy="deepspeed_stage_2").fit(model)\n'
MARK = "  # expect: PFL207"
# (dependency files, the module the script imports, whether its Lightning has the barrier, extra source)
LIGHTNING_PINS = {
    "requirements-pin-of-2.2": ({"requirements.txt": "torch>=2.0\nlightning==2.2.1\n"}, "lightning.pytorch", True, ""),
    "pep-621-lower-bound-of-2.1": (
        {"pyproject.toml": '[project]\nname = "demo"\ndependencies = ["lightning[extra] >=2.1, <3"]\n'}, "lightning.pytorch", True, "",
    ),
    "poetry-caret": ({"pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.10"\nlightning = "^2.3"\n'}, "lightning", True, ""),
    "requirements-folder": ({"requirements/base.txt": "pytorch_lightning ~= 2.4.0\n"}, "pytorch_lightning", True, ""),
    "requirements-pin-of-1.5": ({"requirements.txt": "pytorch-lightning==1.5.10\n"}, "pytorch_lightning", False, ""),
    "conda-environment-of-1.6": (
        {"environment.yml": "dependencies:\n  - python=3.9\n  - pytorch-lightning=1.6.5\n"}, "pytorch_lightning", False, "",
    ),
    "setup-py-range-from-1.4": ({"setup.py": 'setup(install_requires=["pytorch_lightning>=1.4,<1.7"])\n'}, "pytorch_lightning", False, ""),
    "setup-cfg-lower-bound-of-2.0": ({"setup.cfg": "[options]\ninstall_requires =\n    lightning>=2.0\n"}, "lightning.pytorch", False, ""),
    "wildcard-major": ({"requirements.txt": "lightning==2.*\n"}, "lightning.pytorch", False, ""),
    "only-an-upper-bound": ({"requirements.txt": "lightning<3\n"}, "lightning.pytorch", False, ""),
    "unpinned": ({"requirements.txt": "# lightning==2.2 once\nlightning\n"}, "lightning.pytorch", False, ""),
    "other-distributions-of-the-family": (
        {"requirements.txt": "lightning-fabric==2.2\nlightning-utilities>=0.10\n"}, "lightning.pytorch", False, "",
    ),
    "files-that-disagree": ({"requirements.txt": "lightning==2.2\n", "setup.py": 'install_requires=["lightning>=1.9"]\n'}, "lightning", False, ""),
    # DeepSpeed's strategy saves its shards on every rank there, in every version.
    "deepspeed-strategy-of-1.5": ({"requirements.txt": "pytorch-lightning==1.5.10\n"}, "pytorch_lightning", True, IN_DEEPSPEED_RUN),
}


def test_lightning_versions_pinned(tmp_path: Path) -> None:
    """A Lightning `save_checkpoint` on rank 0 alone is reported where the project pins Lightning 2.1 or later (the
    release that added its barrier), in any of its dependency files and their syntaxes; not where it pins an
    older one, admits one, or pins none."""
    from test_project_model import assert_project

    for name, (manifests, module, barrier, extra) in LIGHTNING_PINS.items():
        script = SAVES_ON_RANK_ZERO.format(module=module, mark=MARK if barrier else "") + extra
        assert_project(tmp_path / name, {**manifests, "train.py": script})


def test_the_message_names_the_guard_and_its_line() -> None:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    source = SETUP + "if rank == 0:\n    dist.all_reduce(t)\n"
    (diagnostic,) = Engine(all_rules()).check_source("example.py", source.encode()).diagnostics
    assert (diagnostic.code, diagnostic.line) == ("PFL207", 8)
    assert diagnostic.message.startswith("`dist.all_reduce` runs only where `rank == 0` holds (line 7): the other ranks never enter it")


def test_lightning_log_dir_is_read_on_rank_zero_only() -> None:
    assert_marks(SETUP + dedent("""
        import lightning.pytorch as pl
        from lightning.pytorch.utilities import rank_zero_only
        class Images(pl.Callback):
            @rank_zero_only
            def on_fit_start(self, trainer, pl_module):
                folder = trainer.log_dir  # expect: PFL207
            def on_fit_end(self, trainer, pl_module):
                folder = trainer.log_dir
    """))


def test_a_collective_in_a_conditional_expression_under_a_rank_guard() -> None:
    """A branch of `a if c else b` holds no statements: reading the early exits before it must not fail."""
    from marks import assert_marks

    assert_marks(SETUP + "if rank == 0:\n    value = dist.all_reduce(t) if t.numel() else None  # expect: PFL207\n")


def test_every_name_of_a_rank_spells_a_rank_word() -> None:
    """The rule parses only files that spell one of the rank words (`may_apply`): each kind of name the rank tests,
    rank variables and one-process decorators recognise must spell one, in any case."""
    from pitfall_lint.analysis.ranks import _MAIN_PREDICATE, _ONE_PROCESS_DECORATOR, _RANK_VALUE, _RANK_VARIABLES, may_name_a_rank

    names = [
        "rank", "Local_Rank", "GLOBAL_RANK", "dp_rank", "tensor_model_parallel_rank", "rank_idx", "gpu", "local_gpu_id",
        "process_index", "local_process_index", "procid", "proc_id", "ordinal", "get_local_ordinal", "is_main_process",
        "MasterNode", "am_primary", "is_chief", "leader", "global_zero", "is_local_zero", "rank0", "RANK_ZERO",
        "is_root_process",
    ]
    decorators = ["rank_zero_only", "on_main_process", "master_only", "on_local_main_process"]
    assert all(_RANK_VALUE.fullmatch(n) or _MAIN_PREDICATE.fullmatch(n) for n in names)
    assert all(_ONE_PROCESS_DECORATOR.search(d) for d in decorators)
    assert [n for n in [*names, *decorators, *_RANK_VARIABLES] if not may_name_a_rank(n.encode())] == []
    assert not may_name_a_rank(b"if step == 0:\n    dist.all_reduce(t)\n")
    assert may_name_a_rank("if étape == 0:\n    dist.all_reduce(t)\n".encode())  # not ASCII: not judged


def test_a_file_that_names_no_rank_is_not_parsed_for_it_and_one_in_any_case_is() -> None:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    applicable = Engine(all_rules())._applicable
    no_rank = "import torch.distributed as dist\nif step == 0:\n    dist.all_reduce(t)\n"
    assert "PFL207" not in [rule.info.code for rule in applicable("a.py", no_rank.encode())]
    assert_marks("""
import torch
import torch.distributed as dist
Global_Rank = dist.get_rank()
t = torch.ones(1)
if Global_Rank == 0:
    dist.all_reduce(t)  # expect: PFL207
""")


def test_the_rule_is_handed_attributes_only_in_a_file_that_spells_a_collective_property(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a property (`trainer.log_dir`) is an attribute this rule reports: in a file that spells none, every other
    attribute was handed to it for nothing (55k of them in Lightning)."""
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules
    from pitfall_lint.rules.rank_divergent_collective import RankDivergentCollective

    handed: list[str] = []
    visit = RankDivergentCollective.visit

    def counting(rule: RankDivergentCollective, node: object) -> None:
        handed.append(type(node).__name__)
        visit(rule, node)

    monkeypatch.setattr(RankDivergentCollective, "visit", counting)
    source = SETUP + "if rank == 0:\n    dist.all_reduce(t.data)\n"
    result = Engine(all_rules()).check_source("train.py", source.encode())
    assert [(d.code, d.line) for d in result.diagnostics] == [("PFL207", 8)]
    assert sorted(set(handed)) == ["Call"]
    handed.clear()
    source = SETUP + "import lightning.pytorch as pl\ntrainer = pl.Trainer()\nif rank == 0:\n    folder = trainer.log_dir\n"
    result = Engine(all_rules()).check_source("train.py", source.encode())
    assert [(d.code, d.line) for d in result.diagnostics] == [("PFL207", 10)]
    assert sorted(set(handed)) == ["Attribute", "Call"]
