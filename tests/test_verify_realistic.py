"""verify on scripts shaped like real repositories' (tests/verify_cases/realistic): `.cuda()` and nccl on a CPU
machine, torchvision data with download=True, a model in another file, honest endings, sealed writes."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from marks import REPO
from test_verify import verdicts
from verify_outcome import assert_finished

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")

REALISTIC = REPO / "tests" / "verify_cases" / "realistic"
STUB_TORCHVISION = REPO / "tests" / "verify_cases" / "stub_torchvision"
STUB_DATASETS = REPO / "tests" / "verify_cases" / "stub_datasets"


def _works(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None and __import__(package) is not None
    except Exception:  # a torchvision built for another torch fails on import
        return False


def project(tmp_path: Path, name: str) -> Path:
    """A copy of one realistic project, so that the test can tell whether anything was written into it."""
    copy = tmp_path / name
    shutil.copytree(REALISTIC / name, copy)
    return copy


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def run_verify(path: Path, *args: str, cwd: Path, env: dict[str, str] | None = None,
               timeout: int = 300) -> tuple[int, dict[str, Any], str]:
    environment = {**os.environ, **(env or {})}
    # No CPU torchvision for this torch, no `datasets` on the CI machine: minimal stand-ins of the packages
    # (tests/verify_cases/stub_*), whose datasets download as the real ones do.
    stubs = [str(s) for s, package in ((STUB_TORCHVISION, "torchvision"), (STUB_DATASETS, "datasets")) if not _works(package)]
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [*stubs, environment.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "verify", "--format", "json", str(path), *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment,
    )
    return completed.returncode, json.loads(completed.stdout) if completed.stdout else {}, completed.stderr


# --- a DDP template: argparse, LOCAL_RANK, nccl, .cuda(), CIFAR10 download=True, a log file, a checkpoint ---------


def test_ddp_template_confirms_the_unguarded_save_on_virtual_devices(tmp_path: Path) -> None:
    folder = project(tmp_path, "ddp_template")
    before = snapshot(folder)
    # PFL201 is a preview rule: --preview runs it.
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", "--", "--data", "data", "--epochs", "2",
                                            cwd=folder)
    assert returncode == 1, stderr
    assert report["run"] == "distributed"
    assert verdicts(report) == {("PFL201", 70, "confirmed")}
    assert f"ranks 0 and 1 each wrote {folder / 'results' / 'checkpoint.pt'} from line 70" in report["findings"][0]["evidence"]["mechanism"]
    assert report["notes"][:3] == [
        "the run saw 2 virtual CUDA devices: CUDA tensors computed on the CPU, each kept its device, and torch's "
        "cross-device checks applied",
        "the script asked for nccl; it got gloo (no GPUs for it), which is stricter in places: gloo refuses an "
        "all_gather of tensors of unequal sizes that NCCL takes (an error here may be a later hang on GPUs), and a "
        "hang ends in gloo's recv timeout rather than NCCL's watchdog",
        f"CIFAR10('data') at {folder / 'train.py'}:53: its files are not here and the download was blocked; verify gave "
        "torchvision's CIFAR10 synthetic files of 50000 RGB images of 32x32 in 10 classes (train split)",
    ]
    assert "downloads were blocked by the loopback-only network: --allow-network lets them through" in report["notes"]
    # The log files and the data folder were written inside the enclosure, listed, and kept out of the tree.
    assert report["written"] == [str(folder / "results" / "train_rank0.log"), str(folder / "results" / "train_rank1.log")]
    assert snapshot(folder) == before
    assert_finished(report)


def test_ddp_template_fixed_twin_runs_clean(tmp_path: Path) -> None:
    folder = project(tmp_path, "ddp_template")
    returncode, report, stderr = run_verify(folder / "train_fixed.py", "--preview", "--", "--data", "data", "--epochs", "2",
                                            cwd=folder)
    assert (returncode, report["findings"], report["unexplained"]) == (0, [], []), stderr
    assert report["stop"] is None


def test_a_missing_required_argument_is_not_a_pass(tmp_path: Path) -> None:
    folder = project(tmp_path, "ddp_template")
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder)  # PFL201 is a preview rule
    assert returncode == 2
    assert verdicts(report) == {("PFL201", 70, "not-run")}
    expected = (
        "the script exited at train.py:27 with 'error: the following arguments are required: --data'; pass them "
        f"after `--`, as train.py's docstring runs it: pitfall-lint verify {folder / 'train.py'} -- --data ./data"
    )
    assert report["stop"] == expected
    assert report["findings"][0]["evidence"]["mechanism"] == f"line 70 never ran: {expected}"
    assert report["unexplained"] == []
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'train.py'}: not run to its end: {expected}"


# --- torchvision's own dataset classes, fed synthetic files: they pickle into spawned processes and have every attribute --

needs_torchvision = pytest.mark.skipif(not _works("torchvision"), reason="needs a torchvision that loads with this torch "
                                       "(the CUDA build's venv has one: torch 2.14.1, torchvision 0.29.1)")


@needs_torchvision
def test_an_mnist_handed_to_spawned_processes_is_torchvisions_own_class(tmp_path: Path) -> None:
    folder = project(tmp_path, "spawn_mnist")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder)  # PFL201 is a preview rule
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    assert verdicts(report) == {("PFL201", 48, "confirmed")}
    assert report["findings"][0]["evidence"]["mechanism"] == (
        f"ranks 0 and 1 each wrote {folder / 'mnist_ddp.pt'} from line 48: concurrent writers of one file corrupt it "
        "(the writes went to the scratch folder)")
    assert report["notes"] == [
        f"MNIST('data') at {folder / 'train.py'}:56: its files are not here and the download was blocked; verify gave "
        "torchvision's MNIST synthetic files of 60000 L images of 28x28 in 10 classes (train split)",
        "downloads were blocked by the loopback-only network: --allow-network lets them through",
    ]
    assert (report["written"], report["outcome"]) == ([], "finished without a failure; no process left behind")
    assert snapshot(folder) == before


@needs_torchvision
def test_cifar10_read_through_its_attributes_and_loader_workers_is_torchvisions_own_class(tmp_path: Path) -> None:
    folder = project(tmp_path, "dp_cifar")
    before = snapshot(folder)
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    assert verdicts(report) == {("PFL104", 23, "confirmed")}
    assert report["notes"][1:] == [
        f"CIFAR10('./data') at {folder / 'train.py'}:30: its files are not here and the download was blocked; verify "
        "gave torchvision's CIFAR10 synthetic files of 50000 RGB images of 32x32 in 10 classes (train split)",
        f"CIFAR10('./data') at {folder / 'train.py'}:31: its files are not here and the download was blocked; verify "
        "gave torchvision's CIFAR10 synthetic files of 10000 RGB images of 32x32 in 10 classes (test split)",
        "downloads were blocked by the loopback-only network: --allow-network lets them through",
    ]
    assert (report["written"], report["outcome"]) == ([], "finished without a failure; no process left behind")
    assert snapshot(folder) == before


# --- DataParallel under `if torch.cuda.device_count() > 1`, the model in a package of the project --------------------


def test_data_parallel_wraps_and_the_finding_in_the_model_file_is_confirmed(tmp_path: Path) -> None:
    folder = project(tmp_path, "dp_project")
    returncode, report, stderr = run_verify(folder / "train.py", "--", "--epochs", "1", cwd=folder)
    assert returncode == 1, stderr
    assert verdicts(report) == {("PFL101", 14, "confirmed")}
    (finding,) = report["findings"]
    assert finding["path"] == "models/net.py"
    assert finding["evidence"]["message"] == (
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!"
    )
    assert finding["evidence"]["user_frame"]["file"] == str(folder / "models" / "blocks.py")
    assert finding["evidence"]["mechanism"] == (
        "replica 1 ran `pooled` (stored in `forward`), bound to the original Classifier, on the original's parameters"
    )
    assert report["unexplained"] == []


def test_data_parallel_fixed_twin_runs_clean(tmp_path: Path) -> None:
    folder = project(tmp_path, "dp_project")
    returncode, report, stderr = run_verify(folder / "train_fixed.py", "--", "--epochs", "1", cwd=folder)
    assert (returncode, report["findings"], report["unexplained"]) == (0, [], []), stderr


def test_a_model_file_is_built_from_the_call_in_the_training_script(tmp_path: Path) -> None:
    folder = project(tmp_path, "dp_project")
    returncode, report, stderr = run_verify(folder / "models" / "net.py", cwd=folder)
    assert returncode == 1, stderr
    assert report["run"] == "model"
    assert verdicts(report) == {("PFL101", 14, "confirmed")}
    assert ("verify built Classifier(width=32, classes=5) as called at train.py:20 and fed it inputs of shape [8, 16, 8], "
            "made for its first layer Linear(in_features=8, out_features=32, bias=True)") in report["notes"]


# --- evidence the static check could not give -----------------------------------------------------------------------


def test_two_ranks_saving_through_a_helper_confirm_the_finding_in_the_helper(tmp_path: Path) -> None:
    """The project model sees the helper of utils.py called on every rank: a static finding there, confirmed."""
    folder = project(tmp_path, "ddp_helper")
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder)  # PFL201 is a preview rule
    assert returncode == 1, stderr
    (finding,) = report["findings"]
    assert (finding["code"], finding["path"], finding["line"], finding["status"]) == ("PFL201", "utils.py", 7, "confirmed")
    assert finding["found_at_run_time"] is False
    assert finding["evidence"]["mechanism"].startswith(f"ranks 0 and 1 each wrote {folder / 'checkpoints' / 'last.pt'} from line 7")


def test_two_ranks_saving_through_a_table_of_hooks_is_a_finding_found_at_run_time(tmp_path: Path) -> None:
    """Called back through a table, the helper is out of the project model's sight: only the run sees the writers."""
    folder = project(tmp_path, "ddp_hooks")
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder)  # PFL201 is a preview rule
    assert returncode == 1, stderr
    (finding,) = report["findings"]
    assert (finding["code"], finding["path"], finding["line"], finding["status"]) == (
        "PFL201", str(folder / "utils.py"), 7, "confirmed")
    assert finding["found_at_run_time"] is True
    assert finding["evidence"]["mechanism"].startswith(f"ranks 0 and 1 each wrote {folder / 'checkpoints' / 'last.pt'} from line 7")


def test_a_hub_text_dataset_that_is_not_cached_gets_a_stand_in(tmp_path: Path) -> None:
    folder = project(tmp_path, "hub_text")
    returncode, report, stderr = run_verify(folder / "train.py", "--preview", cwd=folder,  # PFL201 is a preview rule
                                            env={"HF_HOME": str(tmp_path / "hf")})
    assert returncode == 1, stderr
    assert verdicts(report) == {("PFL201", 41, "confirmed")}
    assert report["notes"][-2:] == [
        f"load_dataset('imdb') at {folder / 'train.py'}:32: not cached here and the hub blocked (ConnectionError); verify "
        "used a synthetic stand-in with the columns text, label (train 25000 rows)",
        "downloads were blocked by the loopback-only network: --allow-network lets them through",
    ]


# --- honest endings ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "stop", "reason"),
    [
        ("exits_early.py", "the script exited at exits_early.py:21 with 'this job needs a node with 8 GPUs'; if it "
         "wants more GPUs, --nproc N gives it N virtual ones",
         "line 13 never ran: the script exited at exits_early.py:21 with 'this job needs a node with 8 GPUs'; if it "
         "wants more GPUs, --nproc N gives it N virtual ones"),
        ("returns_early.py", None, "the run never exercised this pitfall (nothing ran it in parallel)"),
    ],
)
def test_a_script_that_ends_before_the_flagged_line_is_never_a_pass(tmp_path: Path, name: str, stop: str | None,
                                                                     reason: str) -> None:
    folder = project(tmp_path, "endings")
    returncode, report, stderr = run_verify(folder / name, cwd=folder)
    assert returncode == 2, stderr
    assert report["stop"] == (stop.format(folder=folder) if stop else None)
    (finding,) = report["findings"]
    assert (finding["status"], finding["evidence"]["mechanism"]) == ("not-run", reason.format(folder=folder))
    assert stderr.strip().splitlines()[-1].startswith(f"error: {folder / name}: ")


def test_required_positional_and_option_arguments_are_named(tmp_path: Path) -> None:
    folder = project(tmp_path, "endings")
    returncode, report, _ = run_verify(folder / "needs_arguments.py", cwd=folder)
    assert returncode == 2
    assert report["stop"] == (
        "the script exited at needs_arguments.py:23 with 'error: the following arguments are required: "
        f"epochs, --data'; pass them after `--`: pitfall-lint verify {folder / 'needs_arguments.py'} -- 2 --data data "
        "(made-up values of the right kind: give your own where they matter)"
    )
    returncode, report, _ = run_verify(folder / "needs_arguments.py", "--", "3", "--data", "x", cwd=folder)
    assert (returncode, verdicts(report)) == (1, {("PFL101", 13, "confirmed")})


# --- advice that can be followed: the command line a script needs, the path its own package needs ---------------------


def _advised_arguments(stop: str) -> list[str]:
    """The arguments of the `pitfall-lint verify SCRIPT -- ARGS` line a stop advises."""
    line = stop.split(" -- ", 1)[1].split(" (made-up values")[0]
    return shlex.split(line)


def test_a_script_needing_arguments_is_given_the_command_line_of_its_readme(tmp_path: Path) -> None:
    folder = project(tmp_path, "readme_args")
    returncode, report, _ = run_verify(folder / "pretrain.py", cwd=folder)
    assert (returncode, verdicts(report)) == (2, {("PFL104", 19, "not-run")})
    assert report["stop"] == (
        "the script exited at pretrain.py:43 with 'error: the following arguments are required: --output-dir, --model'; "
        f"pass them after `--`, as README.md runs it: pitfall-lint verify {folder / 'pretrain.py'} -- --output-dir "
        "runs/baseline --model small --epochs 2"
    )
    returncode, report, stderr = run_verify(folder / "pretrain.py", "--", *_advised_arguments(report["stop"]), cwd=folder)
    assert (returncode, report["stop"], report["unexplained"]) == (1, None, []), stderr
    assert verdicts(report) == {("PFL104", 19, "confirmed")}


def test_a_script_needing_arguments_no_readme_gives_gets_values_made_from_its_parser(tmp_path: Path) -> None:
    folder = project(tmp_path, "readme_args")
    returncode, report, _ = run_verify(folder / "finetune.py", cwd=folder)
    assert (returncode, verdicts(report)) == (2, {("PFL104", 18, "not-run")})
    assert report["stop"] == (
        "the script exited at finetune.py:44 with 'error: the following arguments are required: STEPS, --model, --lr, "
        f"--gpu, --run-name'; pass them after `--`: pitfall-lint verify {folder / 'finetune.py'} -- 2 --model tiny --lr "
        "0.01 --gpu 0 --run-name run_name (made-up values of the right kind: give your own where they matter)"
    )
    returncode, report, stderr = run_verify(folder / "finetune.py", "--", *_advised_arguments(report["stop"]), cwd=folder)
    assert (returncode, report["stop"], report["unexplained"]) == (1, None, []), stderr
    assert verdicts(report) == {("PFL104", 18, "confirmed")}


def test_a_package_of_the_repository_off_the_scripts_path_gets_the_pythonpath_that_finds_it(tmp_path: Path) -> None:
    folder = project(tmp_path, "monorepo")
    script = folder / "deeplearning" / "ssl" / "train_moco.py"
    returncode, report, stderr = run_verify(script, cwd=folder)
    assert (returncode, verdicts(report)) == (2, {("PFL104", 20, "not-run"), ("PFL105", 22, "not-run")})
    expected = (
        "the script needs the module 'deeplearning' at deeplearning/ssl/train_moco.py:10; deeplearning is the "
        f"repository's own package ({folder / 'deeplearning'}); Python looks for it in the script's folder, not in "
        f"{folder}: PYTHONPATH={folder} pitfall-lint verify {script}"
    )
    assert report["stop"] == expected
    assert stderr.strip().splitlines()[-1] == f"error: {script}: {expected}"
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    returncode, report, stderr = run_verify(script, cwd=folder, env={"PYTHONPATH": path})
    assert (returncode, report["stop"], report["unexplained"]) == (1, None, []), stderr
    assert verdicts(report) == {("PFL104", 20, "confirmed"), ("PFL105", 22, "confirmed")}


def test_an_import_path_of_another_repository_layout_names_where_the_project_has_the_module(tmp_path: Path) -> None:
    """`import research.ssl.moco.builder` in a repository that keeps it as moco/builder.py (moco's main_moco.py
    imports `deeplearning.cross_image_ssl.moco.builder`): the advice is that layout, not `pip install research`."""
    folder = project(tmp_path, "ssl_layout")
    returncode, report, stderr = run_verify(folder / "main.py", cwd=folder)
    expected = ("the script needs the module 'research' at main.py:6; the project has it as moco/builder, under another "
                "package: the script expects the layout of the repository it came from (set PYTHONPATH or restore that "
                "layout)")
    assert (returncode, report["stop"], report["findings"]) == (2, expected, []), stderr


def test_a_script_reading_its_clusters_variables_is_told_the_documented_torchrun_command(tmp_path: Path) -> None:
    """A SLURM script (`int(os.environ.get("SLURM_LOCALID"))`) with a `--torchrun` switch its docstring documents."""
    folder = project(tmp_path, "cluster_launch")
    returncode, report, stderr = run_verify(folder / "train.py", cwd=folder)
    expected = ("the run failed at train.py:23: TypeError: int() argument must be a string, a bytes-like object or a real "
                "number, not 'NoneType': the script reads SLURM_LOCALID from the environment, which SLURM sets and this "
                "run does not; run it as train.py's docstring runs it under torchrun: pitfall-lint verify "
                f"{folder / 'train.py'} -- --torchrun")
    assert (returncode, report["stop"], report["findings"]) == (2, expected, []), stderr
    returncode, report, stderr = run_verify(folder / "train.py", "--", "--torchrun", cwd=folder)
    assert (returncode, report["stop"], report["unexplained"]) == (0, None, []), stderr
    assert_finished(report)


# --- launches that are not N plain ranks -----------------------------------------------------------------------------


def test_ranks_waiting_for_a_world_that_never_comes_are_told_apart_from_a_slow_run(tmp_path: Path) -> None:
    folder = project(tmp_path, "launch")
    returncode, report, stderr = run_verify(folder / "waits_for_ranks.py", "--timeout", "25", cwd=folder)
    assert returncode == 2
    assert report["outcome"] == "stopped after 25 s (timeout); no process left behind"
    assert report["stop"].startswith("ranks 0, 1 waited at ")
    assert "to join the process group (world size 4, env://) for ranks that never came" in report["stop"]
    assert "a longer --timeout would not help" in report["stop"]
    assert "raise --timeout" not in stderr


def test_verifys_own_timeout_is_reported_as_such_never_as_the_launchers_signal(tmp_path: Path) -> None:
    """torch's launcher turns verify's SIGTERM into a SignalException: verify's stop, not a failure of the script."""
    folder = project(tmp_path, "launch")
    (tmp_path / "pids").mkdir()
    returncode, report, stderr = run_verify(folder / "hangs_in_ddp.py", "--timeout", "20", cwd=folder,
                                            env={"HANG_PID_DIR": str(tmp_path / "pids")})
    stop = ("the run did not finish within 20 s (rank 0 was at hangs_in_ddp.py:12 in <module>; rank 1 was at "
            "hangs_in_ddp.py:12 in <module>); raise --timeout or lower --steps")
    assert (returncode, report["outcome"], report["stop"], report["unexplained"]) == (
        2, "stopped after 20 s (timeout); no process left behind", stop, [])
    assert stderr.strip().splitlines()[-1] == f"error: {folder / 'hangs_in_ddp.py'}: {stop}; its processes were killed"


def test_a_script_with_its_own_worker_processes_runs_once(tmp_path: Path) -> None:
    folder = project(tmp_path, "launch")
    returncode, report, stderr = run_verify(folder / "own_workers.py", cwd=folder)
    assert (returncode, report["run"], report["unexplained"]) == (0, "script", []), stderr
    assert report["why"] == ("it starts its own worker processes (Process), so it runs once as `python FILE` and its "
                             "workers are the ranks")


def test_local_rank_option_is_passed_to_each_rank(tmp_path: Path) -> None:
    """Under torchrun, which passes no flag; with PFL307 selected (the default) verify starts the script under
    torch.distributed.launch instead, and its dashed `--local-rank=<n>` leaves the required `--local_rank` unset."""
    folder = project(tmp_path, "launch")
    returncode, report, stderr = run_verify(folder / "local_rank.py", "--ignore", "PFL307", cwd=folder)
    assert (returncode, report["run"], report["unexplained"]) == (0, "distributed", []), stderr
    assert report["notes"][0] == (
        "the script reads --local_rank: each rank got --local_rank=N, as torch.distributed.launch passes it "
        "(torchrun sets only LOCAL_RANK)"
    )
    returncode, report, stderr = run_verify(folder / "local_rank.py", cwd=folder)
    assert (returncode, verdicts(report), report["unexplained"], report["stop"]) == (
        1, {("PFL307", 11, "confirmed")}, [], None), stderr
    assert report["findings"][0]["evidence"]["message"] == "local_rank.py: error: the following arguments are required: --local_rank"
    assert not any("each rank got --local_rank=N" in note for note in report["notes"])


def test_a_pool_started_at_import_is_stopped_early_and_confirmed(tmp_path: Path) -> None:
    folder = project(tmp_path, "launch")
    returncode, report, _ = run_verify(folder / "pool_at_import.py", cwd=folder)
    assert returncode == 1
    assert verdicts(report) == {("PFL301", 12, "confirmed")}
    assert report["outcome"] == "stopped early; no process left behind"
    assert report["seconds"] < 120


def test_the_step_budget_leaves_every_iterator_a_batch(tmp_path: Path) -> None:
    folder = project(tmp_path, "launch")
    returncode, report, stderr = run_verify(folder / "tutorial_epochs.py", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (0, [], None), stderr


def test_a_real_cross_device_mistake_raises_torchs_own_error(tmp_path: Path) -> None:
    folder = project(tmp_path, "launch")
    returncode, report, stderr = run_verify(folder / "crosses_devices.py", cwd=folder)
    assert returncode == 2
    (failure,) = report["unexplained"]
    assert failure["message"] == "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!"
    assert failure["user_frame"]["line"] == 8


# --- notebooks -------------------------------------------------------------------------------------------------------


def test_a_notebook_runs_cell_by_cell_and_its_finding_is_confirmed(tmp_path: Path) -> None:
    folder = project(tmp_path, "notebook")
    returncode, report, stderr = run_verify(folder / "data_parallel.ipynb", cwd=folder)
    assert returncode == 1, stderr
    assert report["run"] == "notebook"
    (finding,) = report["findings"]
    assert (finding["code"], finding["cell"], finding["line"], finding["status"]) == ("PFL101", 3, 5, "confirmed")


def test_a_notebook_line_that_never_ran_is_named_by_its_cell(tmp_path: Path) -> None:
    folder = project(tmp_path, "notebook")
    returncode, report, stderr = run_verify(folder / "exits_early.ipynb", cwd=folder)
    stop = ("the script exited at exits_early.ipynb:cell 4:2 with 'this notebook needs 8 GPUs'; if it wants more GPUs, "
            "--nproc N gives it N virtual ones")
    assert (returncode, report["stop"]) == (2, stop), stderr
    (finding,) = report["findings"]
    assert (finding["code"], finding["cell"], finding["line"], finding["status"], finding["evidence"]["mechanism"]) == (
        "PFL101", 3, 5, "not-run", f"cell 3, line 5 never ran: {stop}")


def test_a_finding_only_the_run_makes_in_a_notebook_is_placed_in_its_cell(tmp_path: Path) -> None:
    folder = project(tmp_path, "notebook")
    returncode, report, stderr = run_verify(folder / "small_batch.ipynb", cwd=folder)
    assert returncode == 1, stderr
    (finding,) = report["findings"]
    assert (finding["code"], finding["cell"], finding["line"], finding["status"]) == ("PFL110", 3, 3, "confirmed")
    assert finding["evidence"]["user_frame"]["cell"] == 2


def test_a_worker_defined_in_a_notebook_fails_as_pfl308_predicts_and_confirms_it(tmp_path: Path) -> None:
    folder = project(tmp_path, "notebook")
    returncode, report, stderr = run_verify(folder / "spawns_worker.ipynb", cwd=folder)
    assert (returncode, report["unexplained"], report["stop"]) == (1, [], None), stderr
    (finding,) = report["findings"]
    assert (finding["code"], finding["cell"], finding["line"], finding["status"]) == ("PFL308", 3, 1, "confirmed")
    evidence = finding["evidence"]
    # Python 3.12 names __main__'s loader where 3.11 says "(built-in)".
    assert (evidence["error_type"], evidence["message"].split(" (")[0]) == (
        "AttributeError", "Can't get attribute 'worker' on <module '__main__'")
    assert evidence["mechanism"] == ("2 spawned processes failed on start: each is a new interpreter, which cannot import "
                                     "the notebook's __main__ to find the function")
    assert not any("may explain" in note for note in report["notes"])
