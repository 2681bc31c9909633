"""PFL102 pad-packed-without-total-length: every import spelling, and the calls that are fine."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks, reported

CASES = {
    "aliased-function": """
        import torch.nn as nn
        from torch.nn.utils.rnn import pad_packed_sequence as unpack
        class M(nn.Module):
            def forward(self, packed):
                out, _ = unpack(packed, batch_first=True)  # expect: PFL102
                return out
    """,
    "module-alias": """
        import torch
        import torch.nn.utils.rnn as rnn_utils
        class M(torch.nn.Module):
            def forward(self, packed):
                return rnn_utils.pad_packed_sequence(packed)[0]  # expect: PFL102
    """,
    "full-path-through-nn-alias": """
        import torch.nn as nn
        class M(nn.Module):
            def forward(self, packed):
                return nn.utils.rnn.pad_packed_sequence(packed)[0]  # expect: PFL102
    """,
    "full-path-through-torch": """
        import torch
        class M(torch.nn.Module):
            def forward(self, packed):
                return torch.nn.utils.rnn.pad_packed_sequence(packed, True)[0]  # expect: PFL102
    """,
    "function-local-import": """
        import torch.nn as nn
        class M(nn.Module):
            def forward(self, packed):
                from torch.nn.utils import rnn
                return rnn.pad_packed_sequence(packed)[0]  # expect: PFL102
    """,
    # Fine.
    "keyword-total-length": """
        import torch.nn as nn
        from torch.nn.utils.rnn import pad_packed_sequence
        class M(nn.Module):
            def forward(self, x, packed):
                return pad_packed_sequence(packed, batch_first=True, total_length=x.size(1))[0]
    """,
    "positional-total-length": """
        import torch.nn as nn
        from torch.nn.utils.rnn import pad_packed_sequence
        class M(nn.Module):
            def forward(self, x, packed):
                return pad_packed_sequence(packed, True, 0.0, x.size(1))[0]
    """,
    "double-star-kwargs": """
        import torch.nn as nn
        from torch.nn.utils.rnn import pad_packed_sequence
        class M(nn.Module):
            def forward(self, packed, **options):
                return pad_packed_sequence(packed, **options)[0]
    """,
    "outside-a-module": """
        from torch.nn.utils.rnn import pad_packed_sequence
        def collate(packed):
            return pad_packed_sequence(packed)[0]
    """,
    "local-function-sharing-the-name": """
        import torch.nn as nn
        def pad_packed_sequence(packed):
            return packed, None
        class M(nn.Module):
            def forward(self, packed):
                return pad_packed_sequence(packed)[0]
    """,
    "parameter-shadowing-the-module-alias": """
        import torch.nn as nn
        import torch.nn.utils.rnn as rnn
        class M(nn.Module):
            def forward(self, packed, rnn):
                return rnn.pad_packed_sequence(packed)[0]
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(CASES[name]))


ENCODER = """
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
class Encoder(nn.Module):
    def forward(self, padded, lengths, mask):
        packed = pack_padded_sequence(padded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
"""
# What is done with the padded output `unpacked` decides: it must leave the module padded to the replica's length.
OUTPUT_USES = {
    "returned": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)  # expect: PFL102", "return unpacked"),
    "through-a-layer": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)  # expect: PFL102", "return self.fc(F.relu(unpacked))"),
    "in-a-tuple": ("unpacked = pad_packed_sequence(out, batch_first=True)[0]  # expect: PFL102", "return unpacked, lengths"),
    "stored": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)  # expect: PFL102", "self.last = unpacked.detach()"),
    "renamed-then-returned": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)  # expect: PFL102", "x = unpacked * mask[..., None]\n        return x.contiguous()"),
    "re-packed": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)", "again = pack_padded_sequence(unpacked, lengths.cpu(), batch_first=True, enforce_sorted=False)\n        return self.rnn2(again)[1]"),
    "mean-over-time": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)", "return unpacked.mean(dim=1)"),
    "max-over-time-with-torch": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)", "return torch.max(unpacked, 1)[0]"),
    "attention-pooling": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)", "weights = torch.softmax(self.att(unpacked), dim=1)\n        return (weights * unpacked).sum(1)"),
    "last-step": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)", "return self.fc(unpacked[:, -1])"),
    "padded-back-with-pad": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)", "unpacked = F.pad(unpacked, (0, 0, 0, mask.size(1) - unpacked.size(1)))\n        return unpacked"),
    "padded-back-with-cat": ("unpacked, _ = pad_packed_sequence(out, batch_first=True)", "filler = unpacked.new_zeros(unpacked.size(0), mask.size(1) - unpacked.size(1), unpacked.size(2))\n        return torch.cat([unpacked, filler], dim=1)"),
}


@pytest.mark.parametrize("name", OUTPUT_USES)
def test_the_padded_output_must_leave_the_module(name: str) -> None:
    unpack, rest = OUTPUT_USES[name]
    assert_marks(ENCODER + f"        {unpack}\n        {rest}\n")


@pytest.mark.parametrize(
    ("call", "hint"),
    [
        ("pad_packed_sequence(p, batch_first=True)", "total_length=<padded input>.size(1)"),
        ("pad_packed_sequence(p)", "total_length=<padded input>.size(0)"),
        ("pad_packed_sequence(p, False)", "total_length=<padded input>.size(0)"),
        ("pad_packed_sequence(p, batch_first=flag)", ".size(1)` (batch-first) or `.size(0)"),
    ],
)
def test_message_names_the_fix(call: str, hint: str) -> None:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    source = dedent(f"""
        import torch.nn as nn
        from torch.nn.utils.rnn import pad_packed_sequence
        class M(nn.Module):
            def forward(self, p, flag):
                return {call}
    """)
    (diagnostic,) = Engine(all_rules()).check_source("m.py", source.encode()).diagnostics
    assert hint in diagnostic.message
    assert reported(source) == {("PFL102", 6)}
