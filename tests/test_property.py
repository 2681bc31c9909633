"""Generated Python never makes the engine raise: it reports diagnostics or PFL000, nothing else."""

from __future__ import annotations

import warnings

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules

ENGINE = Engine(all_rules())
# Every rule's trigger words, so that generated code is parsed and walked by all rules.
HEADER = (
    "import torch\nimport torch.nn as nn\nimport torch.multiprocessing as mp\n"
    "from torch.nn.utils.rnn import pad_packed_sequence\nimport torch.distributed as dist\n"
)
FRAGMENTS = [
    "class M(nn.Module):\n    def __init__(self):\n        self.forward = self.f\n    def f(self, x):\n        return x\n",
    "class N(M):\n    def g(self):\n        setattr(self, 'h', lambda: self)\n",
    "def run(rank):\n    if rank == 0:\n        torch.save({}, 'x')\n",
    "torch.save({}, f'{dist.get_rank()}')\n",
    "mp.spawn(run, nprocs=2)\n",
    "if __name__ == '__main__':\n    mp.spawn(run, nprocs=2)\n",
    "class A(B):\n    pass\nclass B(A):\n    pass\n",
    "def pad(self, p):\n    return pad_packed_sequence(p, **self)\n",
    "dist.init_process_group('gloo')\n",
    "x = (",
    "\t\tdef broken(:\n",
]


def check(source: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ENGINE.check_source("generated.py", source.encode("utf-8", "surrogatepass"))
    assert caught == [], "the engine must not print the compiler's warnings about user code"
    assert result.internal_error is None, result.internal_error
    for diagnostic in result.diagnostics:
        assert diagnostic.line >= 1 and diagnostic.column >= 1


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles its candidates itself
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar())
def test_grammar_generated_modules(source: str) -> None:
    check(HEADER + source)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8), st.text(max_size=40))
def test_fragments_of_the_rules_in_any_order(parts: list[str], noise: str) -> None:
    check(HEADER + "".join(parts) + noise)
