"""The GPU path of verify: real devices when there are enough, the emulation on CUDA tensors otherwise.

Skipped, with the reason, on machines without CUDA (CI has none); run them on a GPU machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_verify import fixture, verdicts, verify

torch = pytest.importorskip("torch")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")


@needs_two_gpus
@pytest.mark.parametrize(
    ("code", "name", "line", "error"),
    [
        ("PFL101", "bound-method-on-module", 18, "Expected all tensors to be on the same device"),
        ("PFL102", "pad-packed-without-total-length", 21, "Gather got an input of invalid size"),
    ],
)
def test_real_data_parallel_confirms_on_two_gpus(tmp_path: Path, code: str, name: str, line: int, error: str) -> None:
    source = fixture(code, name, "bad").read_text()
    # The fixtures build on the CPU; on real devices DataParallel wants the module on cuda:0.
    (tmp_path / "bad.py").write_text(source.replace("nn.DataParallel(model)(*inputs)", "nn.DataParallel(model.cuda())(*(i.cuda() for i in inputs))"))
    returncode, report, _ = verify(tmp_path / "bad.py", "--device", "cuda")
    assert returncode == 1
    assert "real CUDA devices" in report["mode"]
    assert (code, line, "confirmed") in verdicts(report)
    assert error in str(report["findings"])


@needs_cuda
def test_emulation_runs_on_cuda_tensors(tmp_path: Path) -> None:
    source = fixture("PFL101", "bound-method-on-module", "bad").read_text()
    (tmp_path / "bad.py").write_text(source.replace("nn.DataParallel(model)(*inputs)", "nn.DataParallel(model.cuda())(*(i.cuda() for i in inputs))"))
    returncode, report, _ = verify(tmp_path / "bad.py", "--nproc", str(torch.cuda.device_count() + 1))
    assert returncode == 1
    assert "CPU reproduction" in report["mode"]
    assert ("PFL101", 18, "confirmed") in verdicts(report)


@needs_two_gpus
def test_ddp_on_two_gpus_with_nccl(tmp_path: Path) -> None:
    source = fixture("PFL201", "unguarded-torch-save", "bad").read_text()
    (tmp_path / "bad.py").write_text(source.replace('init_process_group("gloo")', 'init_process_group("nccl")'))
    returncode, report, _ = verify(tmp_path / "bad.py", "--device", "cuda", cwd=tmp_path)
    assert returncode == 1
    assert report["notes"] == []
    assert verdicts(report) == {("PFL201", 24, "confirmed")}


@needs_cuda
def test_two_nodes_on_one_gpu_show_the_real_invalid_ordinal() -> None:
    """One visible GPU per node: rank 1 runs as local rank 0 of node 1 and asks for cuda:1, which CUDA refuses."""
    path = fixture("PFL305", "rank-vs-local-rank", "bad")
    returncode, report, stderr = verify(path, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert returncode == 1, stderr
    assert verdicts(report) == {("PFL305", 25, "confirmed"), ("PFL305", 26, "confirmed")}
    device = next(f for f in report["findings"] if f["line"] == 26)
    assert device["evidence"]["message"] == "CUDA error: invalid device ordinal"
    assert "emulated" not in device["evidence"]["mechanism"]
