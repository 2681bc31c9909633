"""PFL204 load-without-barrier: a rank-restricted save, then a load on every rank with no barrier between."""

from __future__ import annotations

from textwrap import dedent

import pytest

from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules

from marks import assert_marks

# Loads pass map_location so that PFL202 stays out of the way, except where a case says otherwise.
DDP_SETUP = """
import io
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
"""

CASES = {
    "guarded-save-then-load": """
        def resume(model):
            if rank == 0:
                torch.save(model.state_dict(), "ckpt.pt")
            model.load_state_dict(torch.load("ckpt.pt", map_location="cpu"))  # expect: PFL204
    """,
    "also-without-map-location": """
        def resume(model):
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "ckpt.pt")
            model.load_state_dict(torch.load("ckpt.pt"))  # expect: PFL202, PFL204
    """,
    "at-top-level": """
        if rank == 0:
            torch.save({}, "ckpt.pt")
        state = torch.load("ckpt.pt", map_location="cpu")  # expect: PFL204
    """,
    "aliased-save-and-load": """
        from torch import load as tload, save as tsave
        def resume(model):
            if rank == 0:
                tsave(model.state_dict(), "ckpt.pt")
            return tload("ckpt.pt", map_location="cpu")  # expect: PFL204
    """,
    "torch-module-alias": """
        import torch as th
        def resume(model):
            if rank == 0:
                th.save(model.state_dict(), "ckpt.pt")
            return th.load("ckpt.pt", map_location="cpu")  # expect: PFL204
    """,
    "main-process-flag-and-load-in-a-nested-block": """
        def train(model, resume):
            is_main_process = rank == 0
            for epoch in range(3):
                if is_main_process:
                    torch.save(model.state_dict(), "ckpt.pt")
                if resume:
                    model.load_state_dict(torch.load("ckpt.pt", map_location="cpu"))  # expect: PFL204
    """,
    "barrier-before-the-save-does-not-count": """
        def resume(model):
            dist.barrier()
            if rank == 0:
                torch.save(model.state_dict(), "ckpt.pt")
            return torch.load("ckpt.pt", map_location="cpu")  # expect: PFL204
    """,
    "one-report-per-save": """
        def resume(model, optimizer):
            if rank == 0:
                torch.save(model.state_dict(), "model.pt")
            model.load_state_dict(torch.load("model.pt", map_location="cpu"))  # expect: PFL204
            optimizer.load_state_dict(torch.load("optimizer.pt", map_location="cpu"))
    """,
    # A barrier between the save and the load.
    "dist-barrier": """
        def resume(model):
            if rank == 0:
                torch.save(model.state_dict(), "ckpt.pt")
            dist.barrier()
            return torch.load("ckpt.pt", map_location="cpu")
    """,
    "other-barrier-spellings": """
        from torch.distributed import barrier as sync
        def resume(model, accelerator):
            if rank == 0:
                torch.save(model.state_dict(), "a.pt")
            torch.distributed.barrier()
            a = torch.load("a.pt", map_location="cpu")
            if rank == 0:
                torch.save(model.state_dict(), "b.pt")
            dist.monitored_barrier()
            b = torch.load("b.pt", map_location="cpu")
            if accelerator.is_main_process:
                torch.save(model.state_dict(), "c.pt")
            accelerator.wait_for_everyone()
            c = torch.load("c.pt", map_location="cpu")
            if rank == 0:
                torch.save(model.state_dict(), "d.pt")
            sync()
            return a, b, c, torch.load("d.pt", map_location="cpu")
    """,
    # The load runs on one rank only.
    "load-restricted-to-one-rank": """
        def evaluate(model):
            if rank == 0:
                torch.save(model.state_dict(), "ckpt.pt")
                model.load_state_dict(torch.load("ckpt.pt", map_location="cpu"))
    """,
    "early-exit-restricts-save-and-load": """
        def export(model):
            if rank != 0:
                return
            torch.save(model.state_dict(), "ckpt.pt")
            return torch.load("ckpt.pt", map_location="cpu")
    """,
    # The save is not restricted to one rank (PFL201's business, or per-rank files).
    "every-rank-saves": """
        def resume(model):
            torch.save(model.state_dict(), "ckpt.pt")  # expect: PFL201
            return torch.load("ckpt.pt", map_location="cpu")
    """,
    "per-rank-files": """
        def resume(model):
            torch.save(model.state_dict(), f"ckpt_rank{rank}.pt")
            return torch.load(f"ckpt_rank{rank}.pt", map_location="cpu")
    """,
    # Not a save followed by a load in one function.
    "load-before-the-save": """
        def train(model):
            model.load_state_dict(torch.load("init.pt", map_location="cpu"))
            if rank == 0:
                torch.save(model.state_dict(), "ckpt.pt")
    """,
    "save-and-load-in-different-functions": """
        def save_checkpoint(model):
            if rank == 0:
                torch.save(model.state_dict(), "ckpt.pt")
        def resume(model):
            model.load_state_dict(torch.load("ckpt.pt", map_location="cpu"))
    """,
    "save-in-a-nested-function": """
        def train(model):
            def save_checkpoint():
                if rank == 0:
                    torch.save(model.state_dict(), "ckpt.pt")
            save_checkpoint()
            return torch.load("ckpt.pt", map_location="cpu")
    """,
    "local-functions-named-save-and-load": """
        def save(obj, path):
            pass
        def load(path, map_location=None):
            pass
        def resume(model):
            if rank == 0:
                save(model.state_dict(), "ckpt.pt")
            return load("ckpt.pt", map_location="cpu")
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(DDP_SETUP + dedent(CASES[name]))


def test_load_in_the_else_branch_of_the_save_guard_is_flagged() -> None:
    assert_marks(DDP_SETUP + dedent("""
        def share(state):
            if rank == 0:
                torch.save(state, "ckpt.pt")
            else:
                state = torch.load("ckpt.pt", map_location="cpu")  # expect: PFL204
            return state
    """))


def test_a_lightning_trainer_on_several_devices_is_a_distributed_run() -> None:
    """The script runs in every process Lightning starts; no other word of a distributed set-up is needed."""
    assert_marks(dedent("""
        import torch
        import lightning as L
        trainer = L.Trainer(devices=2)
        def resume(model):
            if trainer.is_global_zero:
                torch.save(model.state_dict(), "ckpt.pt")
            model.load_state_dict(torch.load("ckpt.pt", map_location="cpu"))  # expect: PFL204
    """))


def test_in_memory_buffers_are_not_flagged() -> None:
    assert_marks(DDP_SETUP + dedent("""
        def broadcast(obj):
            payload = [None]
            if rank == 0:
                buffer = io.BytesIO()
                torch.save(obj, buffer)
                payload = [buffer.getvalue()]
            dist.broadcast_object_list(payload, src=0)
            return torch.load(io.BytesIO(payload[0]), map_location="cpu")
    """))


def test_single_process_script_is_not_flagged() -> None:
    assert_marks(
        "import torch\nrank = 0\nif rank == 0:\n    torch.save({}, 'c.pt')\nstate = torch.load('c.pt', map_location='cpu')\n"
    )


_FRAMEWORK_SETUPS = {
    "dist.barrier()": "import torch.distributed as dist\ndist.init_process_group('gloo')",
    "trainer.strategy.barrier()": "import lightning as L\ntrainer = L.Trainer(devices=2)",
    "fabric.barrier()": "import lightning as L\nfabric = L.Fabric(devices=2)",
    "accelerator.wait_for_everyone()": "from accelerate import Accelerator\naccelerator = Accelerator()",
    "hvd.barrier()": "import horovod.torch as hvd\nhvd.init()",
}
_SAVE_THEN_LOAD = """
def resume(model, is_main_process):
    if is_main_process:
        torch.save(model.state_dict(), "ckpt.pt"){barrier}
    model.load_state_dict(torch.load("ckpt.pt", map_location="cpu"))
"""


@pytest.mark.parametrize("barrier", _FRAMEWORK_SETUPS)
def test_the_advice_names_the_barrier_of_what_starts_the_processes(barrier: str) -> None:
    """A Lightning, Accelerate or Horovod script is told its framework's barrier; Horovod's processes have no
    torch.distributed group for `dist.barrier()`. Calling it silences the finding."""
    source = f"import torch\n{_FRAMEWORK_SETUPS[barrier]}\n{_SAVE_THEN_LOAD.format(barrier='')}"
    result = Engine(all_rules()).check_source("train.py", source.encode())
    assert [(d.code, d.line) for d in result.diagnostics] == [("PFL204", 8)]
    assert result.diagnostics[0].message.endswith(f"call `{barrier}` after the save")
    fixed = f"import torch\n{_FRAMEWORK_SETUPS[barrier]}\n{_SAVE_THEN_LOAD.format(barrier=chr(10) + '    ' + barrier)}"
    assert Engine(all_rules()).check_source("train.py", fixed.encode()).diagnostics == ()


_LOAD = "    state = torch.load('ckpt.pt', map_location='cpu')\n"
_GUARDED_SAVE = "    if rank == 0:\n        torch.save(state, 'ckpt.pt')\n"


@pytest.mark.parametrize(
    "functions",
    [f"def resume(state):\n{_LOAD}{_GUARDED_SAVE}", f"def resume():\n{_LOAD}\ndef keep(state):\n{_GUARDED_SAVE}"],
    ids=["load-then-save", "in-two-functions"],
)
def test_a_file_with_no_save_before_a_load_is_not_searched_for_its_set_ups(functions: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a load after a guarded save in the same function can race: where no function saves and then loads, the
    walk for the file's set-ups (4 % of a check of Lightning) is not made for it."""
    from pitfall_lint.rules import load_without_barrier

    searched: list[str] = []
    monkeypatch.setattr(load_without_barrier, "sets_up_distributed", lambda ctx: searched.append(ctx.path) or True)
    source = DDP_SETUP + functions
    assert Engine(all_rules()).check_source("train.py", source.encode()).diagnostics == ()
    assert searched == []
    source = DDP_SETUP + "def resume(state):\n    if rank == 0:\n        torch.save(state, 'c.pt')\n    return torch.load('c.pt', map_location='cpu')\n"
    assert [d.code for d in Engine(all_rules()).check_source("train.py", source.encode()).diagnostics] == ["PFL204"]
    assert searched == ["train.py"]
