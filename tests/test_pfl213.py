"""PFL213 compiled-state-dict-prefix: the state_dict of the module `torch.compile` returned, saved."""

from __future__ import annotations

import pytest
from fsdp_cases import findings, marked, places


def test_the_message_names_the_prefix_and_the_fix() -> None:
    (finding,) = findings("PFL213", """
        import torch
        def train(model):
            model = torch.compile(model)
            torch.save(model.state_dict(), "model.pt")
    """, path="scripts/train.py")
    assert (finding.code, finding.path, finding.line, finding.column) == ("PFL213", "scripts/train.py", 5, 5)
    assert finding.message == (
        "saves `model.state_dict()` of the module `torch.compile` returned: every key gains an `_orig_mod.` prefix, "
        "so loading it into an uncompiled model fails on the keys, or with `strict=False` loads nothing and leaves "
        "the model as initialised; save `model._orig_mod.state_dict()`, or the state_dict of the model before compiling"
    )


FLAGGED = {
    "in-a-checkpoint-dict": """
        import torch
        def train(model, step):
            model = torch.compile(model, mode="max-autotune")
            torch.save({"model": model.state_dict(), "step": step}, "ckpt.pt")  # expect: PFL213
    """,
    "aliases": """
        from torch import compile as jit, save
        def train(net):
            compiled = jit(net)
            save(compiled.state_dict(), "net.pt")  # expect: PFL213
    """,
    "through-a-method-chain": """
        import torch
        def train(net):
            net = torch.compile(net).train()
            torch.save(net.state_dict(), "net.pt")  # expect: PFL213
    """,
    "compiled-on-a-switch": """
        import torch
        def train(model, compile):
            if compile:
                model = torch.compile(model)
            torch.save(model.state_dict(), "model.pt")  # expect: PFL213
    """,
    "a-docstring-names-the-prefix": '''
        """Saves the model (keys carry _orig_mod.)."""
        import torch
        def train(net):
            net = torch.compile(net)
            torch.save(net.state_dict(), "net.pt")  # expect: PFL213
    ''',
}


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged(name: str) -> None:
    assert places("PFL213", FLAGGED[name]) == marked("PFL213", FLAGGED[name]) != []


CLEAN = {
    "the-original-saved": """
        import torch
        def train(model):
            compiled = torch.compile(model)
            torch.save(model.state_dict(), "model.pt")
    """,
    "module-compile-in-place": """
        import torch
        def train(model):
            model.compile()
            torch.save(model.state_dict(), "model.pt")
    """,
    "the-file-strips-the-prefix": """
        import torch
        def train(model):
            model = torch.compile(model)
            torch.save(model.state_dict(), "model.pt")
        def load(model):
            state = {k.removeprefix("_orig_mod."): v for k, v in torch.load("model.pt").items()}
            model.load_state_dict(state)
    """,
    "the-file-saves-the-original-elsewhere": """
        import torch
        def train(model):
            model = torch.compile(model)
            torch.save(model.state_dict(), "model.pt")
            torch.save(model._orig_mod.state_dict(), "plain.pt")
    """,
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL213", CLEAN[name]) == []


def test_a_resume_into_the_compiled_model_is_left_alone() -> None:
    """distributed-training-guide's train_llm.py: the checkpoint is read back into the compiled model, which loads
    the prefixed keys."""
    assert places("PFL213", """
        import torch
        def train(model, exp_dir, resume):
            model = torch.compile(model)
            if resume:
                model.load_state_dict(torch.load(exp_dir / "model.pt", map_location="cpu"))
            torch.save(model.state_dict(), exp_dir / "model.pt")
    """) == []
