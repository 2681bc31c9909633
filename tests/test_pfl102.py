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
