"""verify on scripts whose launch is their own (tests/verify_cases/realistic): a confirmation that ends the run
leaves the other findings their run."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from test_verify import verdicts
from test_verify_realistic import project, run_verify, snapshot
from verify_outcome import assert_finished

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")


def test_a_confirmed_port_leaves_the_other_findings_a_run_with_the_port_free(tmp_path: Path) -> None:
    folder = project(tmp_path, "port_and_more")
    before = snapshot(folder)
    # PFL306 is a preview rule: --preview runs it.
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    assert verdicts(report) == {("PFL306", 16, "confirmed"), ("PFL401", 24, "confirmed"), ("PFL208", 31, "confirmed")}
    port, loader, bypass = report["findings"]
    assert (port["evidence"]["error_type"], port["evidence"]["message"]) == (
        "DistNetworkError", "The server socket has failed to listen on any local network address. port: 29512, "
        "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    assert port["mode"] == report["mode"]
    again = ("run again with port 29512 free: the script and the processes it starts (torch.multiprocessing.spawn); "
             "2 virtual CUDA devices on the CPU (no real GPU visible)")
    assert (loader["code"], loader["mode"], loader["evidence"]["mechanism"]) == (
        "PFL401", again, "ranks 0, 1 each iterated all 64 samples through a RandomSampler: every rank trains on the "
        "whole dataset, so an epoch is N times the data")
    assert (bypass["code"], bypass["mode"]) == ("PFL208", again)
    assert bypass["evidence"]["mechanism"].startswith("after step 3 the ranks' copies of the model differ")
    (note,) = [n for n in report["notes"] if "confirmation ended the run" in n]
    assert note.startswith("the PFL306 confirmation ended the run: verify ran the script again with port 29512 free (")
    assert note.endswith(" s) for the other findings")
    assert report["outcome"] == ("failed (exit code 1); no process left behind; run again, finished without a failure; "
                                 "no process left behind")
    assert snapshot(folder) == before


def test_a_local_rank_declared_in_an_imported_options_module_is_passed_to_each_rank(tmp_path: Path) -> None:
    """The parser is in options.py: each rank gets its --local_rank, and the script runs distributed rather than
    failing at DDP(...) with no process group."""
    folder = project(tmp_path, "options_module")
    returncode, report, stderr = run_verify(folder / "train.py", "--ignore", "PFL307", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    assert verdicts(report) == {("PFL401", 21, "confirmed")}
    assert report["notes"][0] == (
        "the script reads --local_rank: each rank got --local_rank=N, as torch.distributed.launch passes it "
        "(torchrun sets only LOCAL_RANK)"
    )


def test_a_launcher_finding_in_an_imported_options_module_chooses_the_launch(tmp_path: Path) -> None:
    """options.py's PFL307 is the script's launch contract: verify launches it as torch.distributed.launch does, which
    confirms it, then runs it again under torchrun for the loader's finding."""
    folder = project(tmp_path, "options_module")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    assert [(f["code"], f["path"], f["line"], f["status"]) for f in report["findings"]] == [
        ("PFL307", "options.py", 11, "confirmed"), ("PFL401", "train.py", 21, "confirmed")]
    launcher, loader = report["findings"]
    assert (launcher["evidence"]["error_type"], launcher["evidence"]["message"]) == (
        "SystemExit", "train.py: error: unrecognized arguments: --local-rank=0")
    assert loader["mode"] == ("run again under torch.distributed.run: 2 ranks under torch.distributed.run; 2 virtual "
                              "CUDA devices on the CPU (no real GPU visible)")
    assert loader["evidence"]["mechanism"] == ("ranks 0, 1 each iterated all 32 samples through a RandomSampler: every "
                                               "rank trains on the whole dataset, so an epoch is N times the data")


def test_a_script_written_for_four_gpus_runs_on_four_virtual_ones(tmp_path: Path) -> None:
    """`WORLD_SIZE = 4` handed to mp.spawn: with verify's two devices rank 2 failed at set_device and was told to find a
    GPU machine."""
    folder = project(tmp_path, "four_gpus")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    assert verdicts(report) == {("PFL203", 27, "confirmed")}
    assert report["mode"] == ("script: the script and the processes it starts (torch.multiprocessing.spawn); 4 virtual "
                              "CUDA devices on the CPU (no real GPU visible)")
    assert report["notes"][0] == "the script is written for 4 CUDA devices (train.py:32): verify gave it 4 (--nproc 4)"


def test_data_parallel_over_four_listed_devices_runs_on_four_virtual_ones(tmp_path: Path) -> None:
    folder = project(tmp_path, "four_gpus")
    returncode, report, stderr = run_verify(folder / "data_parallel.py", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (0, [], None), stderr
    assert report["notes"][0] == ("the script is written for 4 CUDA devices (data_parallel.py:17): verify gave it 4 "
                                  "(--nproc 4)")


def test_a_device_count_that_is_no_constant_is_given_by_a_run_again_with_the_devices_asked_for(tmp_path: Path) -> None:
    """aurotripathy's mnist-distributed.py shape: `mp.spawn(..., nprocs=args.gpus)`, its default the GPUs of the machine
    it was written for. Ranks 2 and 3 asked for devices the first run lacked; verify stopped with "--nproc N gives it
    N" where the index it was asked for says N."""
    folder = project(tmp_path, "four_gpus")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "train_args.py", cwd=folder)
    assert (returncode, verdicts(report), report["unexplained"], report["stop"]) == (
        1, {("PFL203", 25, "confirmed")}, [], None), stderr
    assert report["mode"] == ("script: the script and the processes it starts (torch.multiprocessing.spawn); 4 virtual "
                              "CUDA devices on the CPU (no real GPU visible)")
    first, _, again = re.fullmatch(r"(.*) \((\d+\.\d) s\)(.*)", report["notes"][0]).groups()
    assert (first, again) == ("the code asked for a CUDA device at train_args.py:17 beyond the 2 virtual ones of the "
                              "run before", ": verify ran it again with 4 (--nproc 4)")
    assert report["outcome"] == ("failed (exit code 1); no process left behind; run again with 4 virtual devices, "
                                 "finished without a failure; no process left behind")
    assert snapshot(folder) == before


def test_local_rank_used_as_the_rank_is_stopped_as_a_collision_not_a_timeout(tmp_path: Path) -> None:
    """On two nodes both processes ask to join as rank 0: the group can never form, and the run is stopped with that
    reason instead of waiting out --timeout and blaming the rendezvous settings."""
    folder = project(tmp_path, "local_rank_as_rank")
    # PFL305 is a preview rule: --preview runs it (and its two-node launch).
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder)
    stop = ("ranks collided: the processes of nodes 0 and 1 each asked at train.py:15 to join as rank 0 (their local "
            "rank), so the process group of 2 could never form and the run was stopped without waiting; the script "
            "passes LOCAL_RANK where the global rank belongs (RANK, or no rank= at all: the launcher's environment "
            "gives it)")
    assert (returncode, report["stop"], report["unexplained"]) == (2, stop, []), stderr
    assert report["outcome"] == "stopped early; no process left behind"
    assert report["mode"].startswith("distributed: 2 nodes x 1 rank under torch.distributed.run (two agents on loopback)")
    assert verdicts(report) == {("PFL305", 24, "not-run")}
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'train.py'}: {stop}; its processes were killed"


def test_a_script_whose_imported_helper_sets_up_the_group_runs_as_ranks(tmp_path: Path) -> None:
    """train.py calls utils/distributed.py's init_distributed(), which reads LOCAL_RANK: run as `python train.py` it
    failed with KeyError: 'LOCAL_RANK', blamed on the script."""
    folder = project(tmp_path, "dist_helpers")
    # PFL201 is a preview rule: --preview runs it.
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (1, "distributed", [], None), stderr
    assert report["why"] == ("it imports utils/distributed.py, which sets up distributed training, so it runs as N ranks "
                             "under torch.distributed.run")
    assert [(f["code"], f["line"], f["status"], f["found_at_run_time"]) for f in report["findings"]] == [
        ("PFL201", 22, "confirmed", True)]
    assert report["findings"][0]["evidence"]["mechanism"] == (
        f"ranks 0 and 1 each wrote {folder / 'classifier.pt'} from line 22: concurrent writers of one file corrupt it "
        "(the writes went to the scratch folder)")


def test_a_script_started_one_process_per_rank_by_hand_gets_each_rank_its_own_rank(tmp_path: Path) -> None:
    """narumiruna/PyTorch-Distributed-Example's shape: the README starts each rank with its own --rank; given the one
    command line, both ranks joined as rank 0 and the second failed with EADDRINUSE on the script's own address."""
    folder = project(tmp_path, "rank_by_hand")
    before = snapshot(folder)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    returncode, report, stderr = run_verify(folder / "main.py", "--", "--init-method", f"tcp://127.0.0.1:{port}",
                                            "--rank", "0", "--world-size", "2", cwd=folder)
    assert (returncode, report["run"], report["unexplained"], report["stop"]) == (1, "distributed", [], None), stderr
    assert verdicts(report) == {("PFL402", 24, "confirmed")}
    assert report["findings"][0]["evidence"]["mechanism"].endswith(
        "the sampler's epoch stayed 0, so every epoch repeats the first shuffle")
    assert report["notes"][0] == (
        "the script passes its --rank and --world-size to init_process_group: each process got --rank=N and "
        "--world-size=2 after the script's arguments, as one process per rank started by hand would")
    assert_finished(report)
    assert snapshot(folder) == before


def test_data_parallel_over_a_gpu_list_handed_to_the_worker_runs_on_that_many_virtual_ones(tmp_path: Path) -> None:
    """tczhangzhi's dataparallel.py shape: `gpus = [0, 1, 2, 3]` in main(), `main_worker(gpus=gpus, ...)`,
    `nn.DataParallel(model, device_ids=gpus)`; with two virtual devices the forward asked for device 2 and verify told
    the user to pass --nproc N."""
    folder = project(tmp_path, "gpu_list")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "dataparallel.py", cwd=folder)
    assert (returncode, verdicts(report), report["unexplained"], report["stop"]) == (
        1, {("PFL203", 41, "confirmed")}, [], None), stderr
    assert report["mode"] == ("script: the script, with nn.DataParallel 4-way; 4 virtual CUDA devices on the CPU (no "
                              "real GPU visible)")
    assert report["notes"][0] == ("the script is written for 4 CUDA devices (dataparallel.py:31): verify gave it 4 "
                                  "(--nproc 4)")
    assert_finished(report)
    assert snapshot(folder) == before
