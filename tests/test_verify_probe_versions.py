"""A probe that waits for an error only newer torch raises: on an older torch a clean run proves nothing, and the
verdict says so (no run: the record is written here as the harness writes it)."""

from __future__ import annotations

import re
from importlib import metadata

import pytest

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.harness.probes.fsdp import TiedWeightsProbe
from pitfall_lint.harness.record import RunRecord
from pitfall_lint.harness.torch_release import installed_torch

_FINDING = Diagnostic("/p/train.py", 29, 5, "PFL601", "tied-weights-in-separate-shards", 29, 30, "error",
                      "`lm_head` is sharded in a group of its own, apart from `embed`, which shares its weight")
_CLEAN = RunRecord("/p/train.py", [], "", 0, False)


@pytest.mark.parametrize(("torch", "mechanism"), [
    ((2, 11), ("the script ran to the end without FSDP2 refusing it; but torch 2.11 does not check this (torch 2.12 "
               "refuses it), so the run cannot tell: there, with uneven shards, the tied weight on the last rank is "
               "never updated (pytorch/pytorch#176076)")),
    ((2, 12), "the script ran to the end without FSDP2 refusing it"),
    (None, "the script ran to the end without FSDP2 refusing it"),
])
def test_a_clean_run_of_tied_weights_says_whether_its_torch_checks_them(
        torch: tuple[int, int] | None, mechanism: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.11 shards a weight that two groups manage without a word (seen on the device machine's torch 2.11,
    whose run of the PFL601 fixture ended cleanly); 2.12 raises FSDP2's ValueError at the first forward."""
    monkeypatch.setattr("pitfall_lint.harness.probes.fsdp.installed_torch", lambda: torch)
    judgement = TiedWeightsProbe().judge(_FINDING, _CLEAN)
    assert judgement is not None and (judgement.status, judgement.evidence.mechanism) == ("not-reproduced", mechanism)


def test_the_installed_torch_is_read_from_its_metadata() -> None:
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        assert installed_torch() is None
        return
    found = re.match(r"(\d+)\.(\d+)", version)
    assert found is not None and installed_torch() == (int(found[1]), int(found[2]))
