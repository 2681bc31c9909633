"""The committed table of wrapper attributes is what the installed torch gives (PFL212 never imports torch)."""

from __future__ import annotations

import pytest

from marks import REPO

pytest.importorskip("torch", reason="the table is introspected from torch; CI installs torch==2.13.0")


def test_the_committed_table_is_what_torch_gives() -> None:
    from wrapper_api_table import table

    committed = (REPO / "pitfall_lint" / "analysis" / "wrapper_api.py").read_text()
    assert committed == table(), "regenerate: python tests/wrapper_api_table.py > pitfall_lint/analysis/wrapper_api.py"


def test_the_table_knows_what_each_wrapper_adds() -> None:
    from pitfall_lint.analysis.wrapper_api import DATA_PARALLEL, DISTRIBUTED_DATA_PARALLEL, MODULE

    assert {"train", "eval", "parameters", "state_dict", "to", "zero_grad", "register_buffer", "training"} <= MODULE
    assert {"module", "device_ids", "output_device", "dim", "src_device_obj"} <= DATA_PARALLEL
    assert {"module", "no_sync", "join", "device_ids", "process_group", "register_comm_hook"} <= DISTRIBUTED_DATA_PARALLEL
    assert "freeze_trunk" not in MODULE | DATA_PARALLEL | DISTRIBUTED_DATA_PARALLEL
