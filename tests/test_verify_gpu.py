"""The GPU path of verify: every probe on real devices, the realistic scripts as written for GPUs, and the virtual
devices out of the way (they stand in only where there are fewer GPUs than replicas or ranks).

Skipped, with the reason, where the CUDA devices a test needs are missing (CI has none): most need two, and one GPU
runs the probes beside it and the two-node run; run them on a GPU machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_verify import BAD, fixture, selecting, skip_where_torch_predates_the_failure, verdicts, verify
from test_verify_realistic import project, run_verify

torch = pytest.importorskip("torch")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
pytestmark = pytest.mark.real_gpus  # the other tests hide the real devices (tests/conftest.py)

# The fixtures build their modules and inputs on the CPU; on real devices DataParallel wants them on cuda:0.
_ON_GPU = {"nn.DataParallel(model)(*inputs)": "nn.DataParallel(model.cuda())(*(i.cuda() for i in inputs))"}


def _on_real_devices(report: dict) -> None:
    assert "real CUDA devices" in report["mode"]
    assert not any("virtual CUDA devices" in note for note in report["notes"])
    assert not any("CPU standing for device 0" in note for note in report["notes"])


def _bad_fixture_on_gpu(folder: Path, code: str, name: str) -> Path:
    """The probe's bad fixture, its modules and inputs moved to cuda:0, with what it reads beside it."""
    skip_where_torch_predates_the_failure(code)
    source = fixture(code, name, "bad").read_text()
    for cpu, gpu in _ON_GPU.items():
        source = source.replace(cpu, gpu)
    (folder / "bad.py").write_text(source)
    for extra in fixture(code, name, "bad").parent.glob("*.pt"):  # PFL202's checkpoint saved from a GPU
        (folder / extra.name).write_bytes(extra.read_bytes())
    return folder / "bad.py"


@needs_two_gpus
@pytest.mark.parametrize(("code", "name", "expected_verdicts", "evidence"), BAD, ids=[b[0] for b in BAD])
def test_every_probe_confirms_on_real_devices(tmp_path: Path, code: str, name: str, expected_verdicts: set,
                                              evidence: str) -> None:
    path = _bad_fixture_on_gpu(tmp_path, code, name)
    returncode, report, stderr = verify(path, "--device", "cuda", *selecting(code), cwd=tmp_path)
    assert returncode == 1, stderr
    _on_real_devices(report)
    assert {(c, status) for c, _, status in verdicts(report)} == {(c, status) for c, _, status in expected_verdicts}


@needs_cuda
@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="2 GPUs run the probes themselves (the test above)")
@pytest.mark.parametrize(("code", "name", "expected_verdicts", "evidence"), BAD, ids=[b[0] for b in BAD])
def test_every_probe_confirms_beside_one_real_gpu(tmp_path: Path, code: str, name: str, expected_verdicts: set,
                                                  evidence: str) -> None:
    """One GPU for two replicas or ranks: the virtual devices stand in for both, the real one hidden from the run,
    with the fixture's tensors on CUDA (on an H100 with torch 2.11, all 28 probes gave these verdicts, PFL601's
    not-reproduced aside, which that torch cannot raise)."""
    path = _bad_fixture_on_gpu(tmp_path, code, name)
    returncode, report, stderr = verify(path, *selecting(code), cwd=tmp_path)
    assert returncode == 1, stderr
    assert report["mode"].endswith("; 2 virtual CUDA devices on the CPU (1 real GPU visible, fewer than 2)")
    assert verdicts(report) == expected_verdicts


@needs_cuda
def test_emulation_runs_on_cuda_tensors_with_more_replicas_than_gpus(tmp_path: Path) -> None:
    source = fixture("PFL101", "bound-method-on-module", "bad").read_text()
    (tmp_path / "bad.py").write_text(source.replace(*next(iter(_ON_GPU.items()))))
    returncode, report, _ = verify(tmp_path / "bad.py", "--nproc", str(torch.cuda.device_count() + 1))
    assert returncode == 1
    assert "virtual CUDA devices on the CPU" in report["mode"]
    assert ("PFL101", 18, "confirmed") in verdicts(report)


@needs_two_gpus
def test_ddp_on_two_gpus_with_nccl(tmp_path: Path) -> None:
    source = fixture("PFL201", "unguarded-torch-save", "bad").read_text()
    (tmp_path / "bad.py").write_text(source.replace('init_process_group("gloo")', 'init_process_group("nccl")'))
    returncode, report, _ = verify(tmp_path / "bad.py", "--device", "cuda", "--preview", cwd=tmp_path)  # PFL201: preview
    assert returncode == 1
    _on_real_devices(report)
    assert not any("it got gloo" in note for note in report["notes"])
    assert verdicts(report) == {("PFL201", 24, "confirmed")}


@needs_cuda
def test_two_nodes_on_one_gpu_show_the_real_invalid_ordinal() -> None:
    """One visible GPU per node: rank 1 runs as local rank 0 of node 1 and asks for cuda:1, which CUDA refuses."""
    path = fixture("PFL305", "rank-vs-local-rank", "bad")
    returncode, report, stderr = verify(path, *selecting("PFL305"), env={"CUDA_VISIBLE_DEVICES": "0"})
    assert returncode == 1, stderr
    assert report["mode"].endswith("; 1 real CUDA device per node")  # enough for each node: no virtual devices
    assert verdicts(report) == {("PFL305", 25, "confirmed"), ("PFL305", 26, "confirmed")}
    device = next(f for f in report["findings"] if f["line"] == 26)
    assert device["evidence"]["message"] == "CUDA error: invalid device ordinal"
    assert "emulated" not in device["evidence"]["mechanism"]


@needs_two_gpus
def test_realistic_ddp_template_on_real_devices(tmp_path: Path) -> None:
    folder = project(tmp_path, "ddp_template")
    returncode, report, stderr = run_verify(folder / "train.py", "--device", "cuda", "--preview", "--", "--data", "data",
                                            "--epochs", "2", cwd=folder)  # PFL201 is a preview rule
    assert returncode == 1, stderr
    _on_real_devices(report)
    assert verdicts(report) == {("PFL201", 70, "confirmed")}


@needs_two_gpus
def test_realistic_data_parallel_project_on_real_devices(tmp_path: Path) -> None:
    folder = project(tmp_path, "dp_project")
    returncode, report, stderr = run_verify(folder / "train.py", "--device", "cuda", "--", "--epochs", "1", cwd=folder)
    assert returncode == 1, stderr
    _on_real_devices(report)
    assert verdicts(report) == {("PFL101", 14, "confirmed")}
    assert "Expected all tensors to be on the same device" in report["findings"][0]["evidence"]["message"]
    returncode, report, stderr = run_verify(folder / "train_fixed.py", "--device", "cuda", "--", "--epochs", "1",
                                            cwd=folder)
    assert (returncode, report["findings"], report["unexplained"]) == (0, [], []), stderr
