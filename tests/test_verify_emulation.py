"""verify's emulation on scripts shaped like real ones (tests/verify_cases/realistic), on both torch builds: the CPU
build and the CUDA build `pip install torch` gives, run on a machine without a GPU (issue 25, points 4 and 6)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pitfall_lint.harness.torch_release import installed_torch
from pitfall_lint.harness.runner import run_guarded
from test_verify import verdicts
from test_verify_realistic import project, run_verify, snapshot

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")

VIRTUAL_DEVICES = ("the run saw 2 virtual CUDA devices: CUDA tensors computed on the CPU, each kept its device, and "
                   "torch's cross-device checks applied")
DATA_PARALLEL = "script: the script, with nn.DataParallel 2-way; 2 virtual CUDA devices on the CPU (no real GPU visible)"


# --- an LSTM tagger under nn.DataParallel: cuDNN's RNN paths on a CUDA build of torch -------------------------------


def test_an_lstm_moved_to_a_virtual_device_confirms_the_unpadded_gather(tmp_path: Path) -> None:
    """A CUDA build has cuDNN, so `Tagger().to(device)` asked it to flatten the LSTM's weights: a kernel with no CPU
    implementation, reported as the script's failure at that line."""
    folder = project(tmp_path, "tagger_dp")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["mode"], report["stop"], report["unexplained"]) == (1, DATA_PARALLEL, None, []), stderr
    assert verdicts(report) == {("PFL102", 23, "confirmed")}
    evidence = report["findings"][0]["evidence"]
    assert evidence["message"] == "Gather got an input of invalid size: got [4, 9, 12], but expected [4, 12, 12]"
    assert evidence["user_frame"]["line"] == 43
    assert report["notes"] == [VIRTUAL_DEVICES]
    assert snapshot(folder) == before


def test_the_lstm_tagger_fixed_twin_runs_clean(tmp_path: Path) -> None:
    folder = project(tmp_path, "tagger_dp")
    returncode, report, stderr = run_verify(folder / "train_fixed.py", cwd=folder)
    assert (returncode, report["mode"], report["outcome"]) == (
        0, DATA_PARALLEL, "finished without a failure; no process left behind"), stderr
    assert (report["findings"], report["unexplained"], report["stop"]) == ([], [], None)
    assert report["notes"] == [VIRTUAL_DEVICES, "1 finding in other files of the project was not reached by this run"]


# --- a data prefetcher that copies on a side stream and calls record_stream -----------------------------------------

NCCL_ON_GLOO = ("the script asked for nccl; it got gloo (no GPUs for it), which is stricter in places: gloo refuses an "
                "all_gather of tensors of unequal sizes that NCCL takes (an error here may be a later hang on GPUs), and "
                "a hang ends in gloo's recv timeout rather than NCCL's watchdog")
TWO_RANKS = "distributed: 2 ranks under torch.distributed.run; 2 virtual CUDA devices on the CPU (no real GPU visible)"


def test_record_stream_on_a_virtual_device_lets_training_reach_the_checkpoint(tmp_path: Path) -> None:
    """torch's argument parser refused the virtual stream ("unknown parameter type") before any override saw it."""
    folder = project(tmp_path, "prefetcher")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["mode"], report["outcome"], report["stop"], report["unexplained"]) == (
        1, TWO_RANKS, "finished without a failure; no process left behind", None, []), stderr
    assert verdicts(report) == {("PFL203", 66, "confirmed")}
    assert report["findings"][0]["evidence"]["mechanism"] == (
        "every key of the saved state_dict starts with `module.` (e.g. `module.0.weight`)")
    assert report["notes"] == [VIRTUAL_DEVICES, NCCL_ON_GLOO]


def test_the_prefetcher_fixed_twin_runs_clean(tmp_path: Path) -> None:
    folder = project(tmp_path, "prefetcher")
    returncode, report, stderr = run_verify(folder / "train_fixed.py", cwd=folder)
    assert (returncode, report["outcome"], report["findings"], report["unexplained"], report["stop"]) == (
        0, "finished without a failure; no process left behind", [], [], None), stderr


# --- mp.spawn DDP: rank 0 keeps only its newest checkpoint ----------------------------------------------------------


def test_a_redirected_checkpoint_the_script_removes_is_removed_in_the_scratch_folder(tmp_path: Path) -> None:
    """torch.save wrote epoch_0.pt into the scratch folder, so the script's `os.remove` of it (and its
    `shutil.copyfile` to best.pt) failed: reported as a missing data file of the script's, with advice to pass its
    location."""
    folder = project(tmp_path, "spawn_checkpoints")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["outcome"], report["stop"], report["unexplained"]) == (
        1, "finished without a failure; no process left behind", None, []), stderr
    assert verdicts(report) == {("PFL203", 41, "confirmed")}
    assert (report["written"], snapshot(folder)) == ([], before)


def test_the_header_of_an_mp_spawn_script_says_the_script_starts_the_processes(tmp_path: Path) -> None:
    """It said "with nn.DataParallel 2-way", which is not what runs: the script's own spawned processes are the ranks."""
    folder = project(tmp_path, "spawn_checkpoints")
    returncode, report, stderr = run_verify(folder / "train_fixed.py", cwd=folder)
    assert (returncode, report["mode"]) == (0, "script: the script and the processes it starts "
                                               "(torch.multiprocessing.spawn); 2 virtual CUDA devices on the CPU (no real "
                                               "GPU visible)"), stderr
    assert report["why"] == "it has an entry point, so it runs as `python FILE` would"


def test_the_checkpoint_keeping_fixed_twin_runs_clean(tmp_path: Path) -> None:
    folder = project(tmp_path, "spawn_checkpoints")
    returncode, report, stderr = run_verify(folder / "train_fixed.py", cwd=folder)
    assert (returncode, report["outcome"], report["findings"], report["unexplained"], report["stop"]) == (
        0, "finished without a failure; no process left behind", [], [], None), stderr


# --- pytorch-cifar's shape: utils.py reads the terminal's width with `stty size` at import ------------------------


def test_the_run_has_a_terminal_of_verifys_size_where_reads_end_at_once(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A script started from a shell has a terminal on its standard input; /dev/null was none, so `stty size`
    failed. Nobody types there: `cat` ends at once, as it did on /dev/null."""
    monkeypatch.setenv("COLUMNS", "132")  # verify's own terminal, as shutil.get_terminal_size reads it
    monkeypatch.setenv("LINES", "50")
    outcome = run_guarded(["sh", "-c", "stty size; cat; echo read"], timeout=20, cwd=str(tmp_path), env=dict(os.environ))
    assert (outcome.returncode, outcome.output, outcome.timed_out) == (0, "50 132\nread\n", False)

    def no_terminals() -> tuple[int, int]:
        raise OSError(2, "No such file or directory", "/dev/ptmx")

    monkeypatch.setattr("pty.openpty", no_terminals)  # no /dev/pts: /dev/null, as before
    outcome = run_guarded(["sh", "-c", "test -t 0 || echo none; cat; echo read"], timeout=20, cwd=str(tmp_path),
                          env=dict(os.environ))
    assert (outcome.returncode, outcome.output) == (0, "none\nread\n")


def test_a_progress_bar_sized_by_stty_lets_the_run_reach_the_checkpoint(tmp_path: Path) -> None:
    """`_, term_width = os.popen("stty size").read().split()` at import failed with "not enough values to unpack"."""
    folder = project(tmp_path, "cifar_progress")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "main.py", "--", "--epochs", "2", cwd=folder)
    assert (returncode, report["mode"], report["outcome"], report["stop"], report["unexplained"]) == (
        1, DATA_PARALLEL, "finished without a failure; no process left behind", None, []), stderr
    assert verdicts(report) == {("PFL203", 86, "confirmed")}
    assert report["findings"][0]["evidence"]["mechanism"] == (
        "every key of the saved state_dict starts with `module.` (e.g. `module.features.0.weight`)")
    assert snapshot(folder) == before


# --- verify's own process-group timeout (PFL207's probe) ends a wait for a rank that is only slow -------------------


def test_verifys_own_collective_timeout_is_reported_as_verifys_with_the_next_step(tmp_path: Path) -> None:
    """Rank 0 reports its metrics for 8 s while rank 1 waits at the barrier: the 5 s timeout verify set for PFL207's
    probe ended the wait, which was reported as the script's "unexplained failure" with gloo's message."""
    folder = project(tmp_path, "slow_rank_zero")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    stop = ("verify's own 5 s process-group timeout (set to end a PFL207 hang in seconds) ended rank 1's wait at "
            "train.py:55 in `dist.barrier()`: another rank took longer to get there, which is slow work, not necessarily "
            "a hang (not a failure of the code); to run it without that timeout, leave PFL207 out: --ignore PFL207")
    assert (returncode, report["stop"], report["unexplained"]) == (2, stop, []), stderr
    assert verdicts(report) == {("PFL207", 57, "not-run")}
    assert report["findings"][0]["evidence"]["mechanism"] == f"line 57 never ran: {stop}"
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'train.py'}: not run to its end: {stop}"


# --- FSDP (FullyShardedDataParallel) over transformer blocks, bf16 mixed precision, a rank-0 full state_dict ---------


def test_fsdp_on_virtual_devices_trains_and_saves_a_full_state_dict_on_every_rank(tmp_path: Path) -> None:
    """`FSDP(model, device_id=local_rank, ...)` moved the parameters with `param.data = param.to(device)`, which gave
    them the storage-less wrapper of a virtual tensor: rank 0 was killed by SIGSEGV at the FSDP line."""
    folder = project(tmp_path, "fsdp_blocks")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "train_fixed.py", cwd=folder)
    assert (returncode, report["mode"], report["outcome"], report["stop"], report["unexplained"]) == (
        0, TWO_RANKS, "finished without a failure; no process left behind", None, []), stderr
    assert report["findings"] == []
    assert report["notes"] == [VIRTUAL_DEVICES, NCCL_ON_GLOO, "1 finding in other files of the project was not reached "
                                                              "by this run"]
    assert (report["written"], snapshot(folder)) == ([], before)


def test_a_full_fsdp_state_dict_taken_on_rank_zero_only_is_confirmed_as_a_divergent_collective(tmp_path: Path) -> None:
    """FSDP gathers the shards with `dist.all_gather_single`, which the flight recorder did not record, so rank 0's
    wait at the flagged line was taken for verify's own timeout ending a slow rank (PFL207 not-run)."""
    folder = project(tmp_path, "fsdp_blocks")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["mode"], report["stop"], report["unexplained"]) == (1, TWO_RANKS, None, []), stderr
    assert verdicts(report) == {("PFL207", 88, "confirmed")}
    evidence = report["findings"][0]["evidence"]
    # The collective FSDP gathers with: `all_gather_into_tensor` in torch 2.11, `all_gather_single` in 2.13.
    gathers = "all_gather_into_tensor" if installed_torch() and installed_torch() < (2, 13) else "all_gather_single"
    assert evidence["mechanism"] == (
        f"rank 0 entered `{gathers}` at line 88 and waited for the others: rank 1 never entered it: at that "
        "point it was in `barrier` at line 90; it ended after the 5 s process-group timeout set for this run with the "
        "error below")
    # Rank 0's own timeout, or rank 1's first (its barrier ends, it exits, and rank 0's peer is gone): which of the
    # two, and which side of gloo's pair (send or recv), varies from run to run; torch 2.11's gloo ends the closed
    # connection's message at the port.
    assert (evidence["error_type"], evidence["user_frame"]["line"]) == ("RuntimeError", 88)
    assert re.search(r"\] (Timed out waiting 5000ms for (send|recv) operation to complete|Connection closed by peer "
                     r"\[127\.0\.0\.1\]:\d+(\. |$))", evidence["message"]), evidence["message"]


# --- FSDP2 as PyTorch's example writes it: meta-device model, fully_shard per block, to_empty(device=...) ------------

DTENSOR_ON_THE_CPU = ("FSDP2's sharded parameters (DTensor) kept their shards on the CPU, standing for their CUDA device: "
                      "their `.device` says cpu, and torch's cross-device checks did not apply to them")


def test_fsdp2_blocks_sharded_without_the_root_confirm_the_mixed_gradient_norm(tmp_path: Path) -> None:
    """`model.to_empty(device=device)` made DTensors on a virtual device, which verify stopped as its own limit
    ("DTensor (FSDP2, tensor parallelism) is not emulated on the virtual devices"), so nothing was confirmed."""
    folder = project(tmp_path, "fsdp2_meta")
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder)
    assert (returncode, report["mode"], report["stop"], report["unexplained"]) == (1, TWO_RANKS, None, []), stderr
    assert verdicts(report) == {("PFL605", 74, "confirmed")}
    evidence = report["findings"][0]["evidence"]
    assert evidence["mechanism"] == ("the gradient norm met DTensor gradients of the sharded parts beside plain ones of "
                                     "the rest (on ranks 0, 1)")
    # The plain gradients are on the virtual device and the DTensors' on the CPU, so the norm is taken per device and
    # the mix meets at the scaling (on GPUs: at `_foreach_norm`).
    assert evidence["message"] == ("aten.mul_.Tensor got mixed torch.Tensor and DTensor, need to convert all "
                                   "torch.Tensor to DTensor before calling distributed operators!")
    assert report["notes"][:2] == [VIRTUAL_DEVICES, DTENSOR_ON_THE_CPU]


def test_the_fsdp2_example_with_its_root_sharded_runs_to_its_end_in_bf16(tmp_path: Path) -> None:
    folder = project(tmp_path, "fsdp2_meta")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "train_fixed.py", "--preview", "--", "--mixed-precision", cwd=folder)
    assert (returncode, report["outcome"], report["stop"], report["unexplained"]) == (
        0, "finished without a failure; no process left behind", None, []), stderr
    # PFL603 takes `reset_parameters` after fully_shard for a method that reads sharded parameters; on DTensors it
    # runs, as PyTorch's example relies on.
    assert verdicts(report) == {("PFL603", 68, "not-reproduced")}
    assert report["notes"] == [VIRTUAL_DEVICES, DTENSOR_ON_THE_CPU, NCCL_ON_GLOO,
                               "1 finding in other files of the project was not reached by this run"]
    assert (report["written"], snapshot(folder)) == ([], before)
