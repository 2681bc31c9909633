"""PFL103 dp-scatter-dim-mismatch: what counts as running under DataParallel, time-major packing, list lengths."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

ENCODER = """
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 6)

    def forward(self, padded, lengths):
        packed = pack_padded_sequence(padded, lengths)  # expect: PFL103
        return pad_packed_sequence(self.rnn(packed)[0], total_length=padded.size(0))[0]
"""

BATCH_FIRST = """
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 6, batch_first=True)

    def forward(self, padded, lengths):
        packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=padded.size(1))[0]
"""

# Ways of wrapping Encoder in DataParallel (each makes its time-major pack run under it).
WRAPS = {
    "direct-constructor": "nn.DataParallel(Encoder())",
    "moved-constructor": "model = nn.DataParallel(Encoder().to('cpu'))",
    "variable": "model = Encoder()\nmodel = nn.DataParallel(model)",
    "variable-moved-later": "model = Encoder()\nmodel = model.cuda()\nmodel = nn.DataParallel(model, device_ids=[0, 1])",
    "in-a-function": "def main():\n    model = Encoder()\n    return nn.DataParallel(model)",
    "parameter-set-elsewhere-in-the-file": "def wrap(model):\n    return nn.DataParallel(model)\nwrap(model=None)\nmodel = Encoder()",
    "factory-function": "def build():\n    return Encoder()\nmodel = nn.DataParallel(build())",
    "tuple-from-example-function": (
        "def pitfall_lint_example():\n    return Encoder(), (torch.randn(10, 8, 4), torch.tensor([8] * 8))\n"
        "if __name__ == '__main__':\n    model, inputs = pitfall_lint_example()\n    nn.DataParallel(model)(*inputs)"
    ),
    "attribute": "class Trainer:\n    def __init__(self):\n        self.model = Encoder()\n        self.model = nn.DataParallel(self.model)",
    "from-import-alias": "from torch.nn import DataParallel as DP\nDP(Encoder())",
    "parallel-module-path": "import torch.nn.parallel\ntorch.nn.parallel.DataParallel(Encoder())",
    "explicit-dim-zero": "nn.DataParallel(Encoder(), dim=0)",
    "positional-dim-zero": "nn.DataParallel(Encoder(), None, None, 0)",
    "functional-data-parallel": "from torch.nn.parallel import data_parallel\nout = data_parallel(Encoder(), (x, lengths))",
}

CASES = {
    # (a) time-major packing in a module under DataParallel.
    "batch-first-false-literal": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths, batch_first=False)  # expect: PFL103
        nn.DataParallel(M())
    """,
    "batch-first-positional-false": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths, False, True)  # expect: PFL103
        nn.DataParallel(M())
    """,
    "rnn-utils-module-alias": """
        import torch.nn as nn
        import torch.nn.utils.rnn as rnn_utils
        class M(nn.Module):
            def forward(self, x, lengths):
                return rnn_utils.pack_padded_sequence(x, lengths.cpu())  # expect: PFL103
        nn.DataParallel(M())
    """,
    "submodule-of-the-wrapped-model": """
        class Encoder(nn.Module):
            def forward(self, src, lengths):
                return pack_padded_sequence(src, lengths)  # expect: PFL103
        class Seq2Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = Encoder()
            def forward(self, src, lengths):
                return self.encoder(src, lengths)
        model = nn.DataParallel(Seq2Seq())
    """,
    "inherited-method": """
        class Base(nn.Module):
            def encode(self, x, lengths):
                return pack_padded_sequence(x, lengths)  # expect: PFL103
        class M(Base):
            def forward(self, x, lengths):
                return self.encode(x, lengths)
        nn.DataParallel(M())
    """,
    "embedded-input": """
        class M(nn.Module):
            def forward(self, tokens, lengths):
                embedded = self.embedding(tokens)
                return pack_padded_sequence(embedded, lengths)  # expect: PFL103
        nn.DataParallel(M())
    """,
    # (b) lengths handed over as a Python list.
    "tolist-at-the-call-site": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths, batch_first=True)
        model = nn.DataParallel(M())
        def step(x, lengths):
            pass
        out = model(x, lengths.tolist())  # expect: PFL103
    """,
    "list-literal-and-keyword": """
        class M(nn.Module):
            def forward(self, x, seq_lens):
                return pack_padded_sequence(x, seq_lens, batch_first=True)
        model = nn.DataParallel(M())
        model(x, [10, 9, 8, 8])  # expect: PFL103
        model(x, seq_lens=[10, 9, 8, 8])  # expect: PFL103
    """,
    "list-variable-in-a-function": """
        class M(nn.Module):
            def forward(self, x, sizes):
                return pack_padded_sequence(x, torch.as_tensor(sizes), batch_first=True)
        def train(batch):
            model = M()
            model = nn.DataParallel(model)
            sizes = [len(s) for s in batch]
            return model(batch, sizes)  # expect: PFL103
    """,
    "list-variable-at-module-level": """
        class M(nn.Module):
            def forward(self, x, sizes):
                return pack_padded_sequence(x, torch.as_tensor(sizes), batch_first=True)
        model = nn.DataParallel(M())
        model = model.cuda()
        sizes = [len(s) for s in batch]
        out = model(batch, sizes)  # expect: PFL103
    """,
    "list-variable-for-a-chained-wrap": """
        class M(nn.Module):
            def forward(self, x, sizes):
                return pack_padded_sequence(x, torch.as_tensor(sizes), batch_first=True)
        def train(batch):
            model = nn.DataParallel(M()).cuda().train()
            sizes = [len(s) for s in batch]
            return model(batch, sizes)  # expect: PFL103
        model = nn.DataParallel(M()).to("cuda")
        lengths = lengths.tolist()
        model(batch, lengths)  # expect: PFL103
    """,
    "direct-call-of-the-wrap": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths, batch_first=True)
        nn.DataParallel(M())(x, list(lengths))  # expect: PFL103
    """,
    "attribute-wrap-called-in-another-method": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths, batch_first=True)
        class Trainer:
            def __init__(self):
                self.model = nn.DataParallel(M())
            def step(self, x, lengths):
                return self.model(x, lengths.tolist())  # expect: PFL103
    """,
    "unknown-model-keyword-lengths": """
        def train(model, x, lengths):
            model = nn.DataParallel(model)
            return model(x, lengths=lengths.tolist())  # expect: PFL103
    """,
    "lengths-list-with-dim-one": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths)
        model = nn.DataParallel(M(), dim=1)
        model(x, lengths.tolist())  # expect: PFL103
    """,
    # Fine.
    "batch-first-true": BATCH_FIRST + "\nnn.DataParallel(Tagger())\n",
    "not-under-data-parallel": ENCODER.replace("  # expect: PFL103", "") + "\nmodel = Encoder()\n",
    "other-class-wrapped": ENCODER.replace("  # expect: PFL103", "") + BATCH_FIRST.split("\n", 4)[4] + "\nnn.DataParallel(Tagger())\n",
    "ddp-is-not-data-parallel": ENCODER.replace("  # expect: PFL103", "")
    + "\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nDDP(Encoder())\n",
    "wrap-with-dim-one": ENCODER.replace("  # expect: PFL103", "") + "\nmodel = nn.DataParallel(Encoder(), dim=1)\nmodel(x, lengths.view(1, -1))\n",
    "wrap-with-positional-dim-one": ENCODER.replace("  # expect: PFL103", "") + "\nnn.DataParallel(Encoder(), [0, 1], 0, 1)\n",
    "wrap-with-unknown-dim": ENCODER.replace("  # expect: PFL103", "") + "\nnn.DataParallel(Encoder(), dim=args.dim)\nnn.DataParallel(Encoder(), **opts)\n",
    "batch-first-not-a-literal": """
        class M(nn.Module):
            def __init__(self, batch_first):
                super().__init__()
                self.batch_first = batch_first
            def forward(self, x, lengths, **options):
                pack_padded_sequence(x, lengths, batch_first=self.batch_first)
                return pack_padded_sequence(x, lengths, **options)
        nn.DataParallel(M(True))
    """,
    "transposed-in-forward": """
        class M(nn.Module):
            def forward(self, x, lengths):
                x = x.transpose(0, 1)
                emb = self.embedding(x)
                pack_padded_sequence(x.permute(1, 0, 2), lengths)
                return pack_padded_sequence(emb, lengths)
        nn.DataParallel(M())
    """,
    "transposed-by-the-caller-method": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return self.encode(x.t(), lengths)
            def encode(self, x, lengths):
                return pack_padded_sequence(x, lengths)
        nn.DataParallel(M())
    """,
    "inherited-helper-fed-a-transposed-tensor": """
        class Base(nn.Module):
            def encode(self, x, lengths):
                return pack_padded_sequence(x, lengths)
        class M(Base):
            def forward(self, x, lengths):
                return self.encode(x.transpose(0, 1), lengths)
        nn.DataParallel(M())
    """,
    "transposed-by-the-outer-module": """
        class Encoder(nn.Module):
            def forward(self, src, lengths):
                return pack_padded_sequence(src, lengths)
        class Seq2Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = Encoder()
            def forward(self, src, lengths):
                return self.encoder(src.transpose(0, 1), lengths)
        nn.DataParallel(Seq2Seq())
    """,
    "method-run-outside-the-replicas": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return self.encode(x, lengths)
            def encode(self, x, lengths):
                return pack_padded_sequence(x, lengths, batch_first=True)
            def greedy_decode(self, src, lengths):
                return pack_padded_sequence(src, lengths)
        model = nn.DataParallel(M())
        model.module.greedy_decode(src, lengths)
    """,
    "tolist-inside-forward-after-the-split": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths.tolist(), batch_first=True)
        model = nn.DataParallel(M())
        model(x, lengths)
    """,
    "tensor-lengths-at-the-call-site": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths, batch_first=True)
        model = nn.DataParallel(M())
        model(x, lengths)
        model(x, torch.tensor([10, 9, 8, 8]))
        model([x1, x2], lengths)
    """,
    "list-not-for-lengths": """
        class M(nn.Module):
            def forward(self, x, lengths, layers):
                return pack_padded_sequence(x, lengths, batch_first=True)
        model = nn.DataParallel(M())
        model(x, lengths, [1, 2, 3])
        model(x, lengths, layers=ids.tolist())
    """,
    "same-attribute-name-in-another-class": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths, batch_first=True)
        class Trainer:
            def __init__(self):
                self.model = nn.DataParallel(M())
        class Evaluator:
            def step(self, x, lengths):
                return self.model(x, lengths.tolist())
    """,
    "name-wrapped-again-belongs-to-the-latest-wrap": """
        class M(nn.Module):
            def forward(self, x, sizes):
                return pack_padded_sequence(x, torch.as_tensor(sizes), batch_first=True)
        class Plain(nn.Module):
            def forward(self, x, sizes):
                return x
        model = nn.DataParallel(M())
        model(x, [3, 2])  # expect: PFL103
        model = nn.DataParallel(Plain())
        model(x, [3, 2])
    """,
    "tensor-lengths-at-module-level-and-for-a-chained-wrap": """
        class M(nn.Module):
            def forward(self, x, sizes):
                return pack_padded_sequence(x, sizes, batch_first=True)
        def train(batch):
            model = nn.DataParallel(M()).cuda().train()
            sizes = torch.tensor([len(s) for s in batch])
            return model(batch, sizes)
        model = nn.DataParallel(M())
        model = model.cuda()
        sizes = torch.tensor([len(s) for s in batch])
        out = model(batch, sizes)
    """,
    "list-before-the-wrap": """
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths, batch_first=True)
        def main():
            model = M()
            model(x, lengths.tolist())
            model = nn.DataParallel(model)
    """,
    "model-built-elsewhere": """
        from models import Encoder
        class Local(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths)
        model = nn.DataParallel(Encoder())
        other = nn.DataParallel(build_model())
    """,
    "name-reused-for-two-classes": """
        class A(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths)
        class B(nn.Module):
            def forward(self, x):
                return x
        def one():
            model = A()
        def two():
            model = B()
        def wrap(model):
            return nn.DataParallel(model)
    """,
    "local-function-named-pack": """
        def pack_padded_sequence(x, lengths):
            return x
        class M(nn.Module):
            def forward(self, x, lengths):
                return pack_padded_sequence(x, lengths)
        nn.DataParallel(M())
    """,
}


@pytest.mark.parametrize("wrap", WRAPS)
def test_wrap_forms(wrap: str) -> None:
    assert_marks(ENCODER + "\n" + WRAPS[wrap] + "\n")


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    header = "import torch\nimport torch.nn as nn\nfrom torch.nn.utils.rnn import pack_padded_sequence\n"
    source = dedent(CASES[name])
    assert_marks(source if source.lstrip().startswith("import") else header + source)
