"""verify on a model file (modules, no training loop): the module built and fed inputs made for its first layer."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from test_verify import verdicts
from test_verify_realistic import run_verify

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")


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
