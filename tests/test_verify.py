"""`pitfall-lint verify`: exact verdicts on every fixture and on the harness's hard cases (CPU path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from marks import REPO, expected, expected_at_runtime
from verify_outcome import assert_finished

pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")

CASES = REPO / "tests" / "verify_cases"


def verify(path: Path, *args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "verify", "--format", "json", *args, str(path)],
        cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )
    return completed.returncode, json.loads(completed.stdout), completed.stderr


def verdicts(report: dict[str, Any]) -> set[tuple[str, int, str]]:
    return {(f["code"], f["line"], f["status"]) for f in report["findings"]}


def fixture(code: str, name: str, kind: str) -> Path:
    return REPO / "fixtures" / f"{code}-{name}" / f"{kind}.py"


def previewing(code: str) -> tuple[str, ...]:
    """A preview rule (new, or below the first-run bar) runs only in preview mode, whatever selects it."""
    from pitfall_lint.rules import all_rules

    (rule,) = [r for r in all_rules() if r.info.code == code]
    return ("--preview",) if rule.info.preview else ()


def selecting(code: str) -> tuple[str, ...]:
    """verify runs the rules check would: one that is off by default must be asked for, a preview rule needs
    --preview."""
    from pitfall_lint.rules import all_rules

    (rule,) = [r for r in all_rules() if r.info.code == code]
    return previewing(code) + (() if rule.info.enabled_by_default else ("--extend-select", code))


BAD = [
    ("PFL101", "bound-method-on-module", {("PFL101", 18, "confirmed"), ("PFL101", 20, "not-run")},
     "Expected all tensors to be on the same device"),
    ("PFL102", "pad-packed-without-total-length", {("PFL102", 21, "confirmed")},
     "Gather got an input of invalid size: got [2, 2, 6], but expected [2, 6, 6]"),
    ("PFL201", "unguarded-torch-save", {("PFL201", 24, "confirmed")}, "ranks 0 and 1 each wrote"),
    ("PFL301", "missing-main-guard", {("PFL301", 16, "confirmed")},
     "An attempt has been made to start a new process before the current process has finished its bootstrapping phase"),
    ("PFL110", "batch-smaller-than-replicas", {("PFL110", 25, "confirmed")},
     "Expected more than 1 value per channel when training, got input size torch.Size([1, 8])"),
    ("PFL202", "load-without-map-location", {("PFL202", 21, "confirmed")}, "saved from cuda:0, without map_location"),
    ("PFL203", "wrapped-state-dict", {("PFL203", 22, "confirmed")}, "starts with `module.` (e.g. `module.weight`)"),
    ("PFL204", "load-without-barrier", {("PFL204", 22, "confirmed")}, "No such file or directory"),
    ("PFL103", "dp-scatter-dim-mismatch", {("PFL103", 21, "confirmed")}, "to be equal to batch_size, but got 4 (batch_size=8)"),
    ("PFL306", "hardcoded-master-port", {("PFL306", 22, "confirmed")}, "EADDRINUSE"),
    ("PFL302", "spawn-signature", {("PFL302", 20, "confirmed")}, "train() takes 2 positional arguments but 3 were given"),
    ("PFL307", "legacy-local-rank-argument", {("PFL307", 18, "confirmed")},
     # Which rank's message: the one the launcher let finish (on a loaded machine it may stop the slower rank first).
     "bad.py: error: unrecognized arguments: --local-rank="),
    ("PFL401", "missing-distributed-sampler", {("PFL401", 19, "confirmed")}, "ranks 0, 1 each iterated all 8 samples through a RandomSampler"),
    ("PFL402", "missing-set-epoch", {("PFL402", 18, "confirmed")}, "the sampler's epoch stayed 0, so every epoch repeats the first shuffle"),
    ("PFL404", "rank-seeding", {("PFL404", 20, "confirmed")}, "seeds [0, 1] gave the ranks different permutations"),
    ("PFL104", "dp-state-mutation-in-forward", {("PFL104", 19, "confirmed")},
     "after 3 DataParallel steps, `batches_seen` of the original WarmupNet is 0; the replicas had set it to 1, 1"),
    ("PFL105", "dp-scalar-or-non-tensor-output", {("PFL105", 20, "confirmed")},
     "Was asked to gather along dimension 0, but all input tensors were scalars; will instead unsqueeze and return a vector."),
    ("PFL106", "compile-with-data-parallel", {("PFL106", 24, "confirmed")}, "'Net' object has no attribute 'head'"),
    ("PFL205", "ddp-unused-parameters", {("PFL205", 19, "confirmed"), ("PFL205", 21, "confirmed")},
     "`auxiliary_head`'s parameters (auxiliary_head.bias, auxiliary_head.weight) received no gradient on rank"),
    ("PFL207", "rank-divergent-collective", {("PFL207", 16, "confirmed")},
     "rank 0 entered `all_reduce` at line 16 and waited for the others: rank 1 never entered it: at that point it was "
     "in `barrier` at line 18; it ended after the 5 s process-group timeout"),
    ("PFL208", "ddp-module-bypass", {("PFL208", 21, "confirmed")},
     "the ranks' copies of the model differ (sum of the parameters: rank 0 "),
    ("PFL210", "ddp-wrap-order", {("PFL210", 18, "confirmed")},
     "DDP kept all-reducing the parameters it registered when it was built, not the converted ones"),
    ("PFL211", "reentrant-checkpoint-with-ddp", {("PFL211", 24, "confirmed")}, "Expected to mark a variable ready only once"),
    # FSDP2 on gloo: `fully_shard` shards over CPU ranks, and FSDP2 refuses each of these with an error of its own.
    ("PFL601", "tied-weights-in-separate-shards", {("PFL601", 29, "confirmed")},
     "Parameter 'lm_head.weight' is shared with a parameter already managed by another FSDP group"),
    ("PFL602", "deepcopy-of-sharded-module", {("PFL602", 19, "confirmed")}, "FSDP does not support deepcopy"),
    ("PFL603", "unregistered-forward-method", {("PFL603", 31, "confirmed")},
     "aten.addmm.default got mixed torch.Tensor and DTensor"),
    ("PFL604", "fsdp1-api-on-fully-shard", {("PFL604", 23, "confirmed")}, "'FSDPSequential' object has no attribute 'no_sync'"),
    ("PFL605", "clip-grad-norm-mixed-dtensor", {("PFL605", 32, "confirmed")},
     # torch 2.11 writes "aten._foreach_norm.Scalar: got mixed ...", 2.13 "aten._foreach_norm.Scalar got mixed ...".
     "got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor"),
]


def skip_where_torch_predates_the_failure(code: str) -> None:
    """A probe that waits for a refusal newer than the installed torch cannot confirm its fixture there (its verdict
    says why: tests/test_verify_probe_versions.py)."""
    from pitfall_lint.harness.probes import all_probes
    from pitfall_lint.harness.torch_release import installed_torch

    since, installed = getattr(all_probes().get(code), "refused_since", None), installed_torch()
    if since is not None and installed is not None and installed < since:
        pytest.skip(f"torch {installed[0]}.{installed[1]} does not raise what {code}'s probe waits for (torch "
                    f"{since[0]}.{since[1]} does)")


@pytest.mark.parametrize(("code", "name", "expected_verdicts", "evidence"), BAD, ids=[b[0] for b in BAD])
def test_bad_fixture_is_confirmed_with_the_real_error(code: str, name: str, expected_verdicts: set, evidence: str) -> None:
    skip_where_torch_predates_the_failure(code)
    path = fixture(code, name, "bad")
    source = path.read_text()
    assert {(c, line) for c, line, _ in expected_verdicts} == expected(source) | expected_at_runtime(source)
    returncode, report, _ = verify(path, *selecting(code))
    assert returncode == 1
    assert verdicts(report) == expected_verdicts
    confirmed = [f for f in report["findings"] if f["status"] == "confirmed"]
    assert any(evidence in json.dumps(f["evidence"]) for f in confirmed)
    assert report["unexplained"] == []


FIXED = [*((b[0], b[1]) for b in BAD), ("PFL305", "rank-vs-local-rank")]


@pytest.mark.parametrize(("code", "name"), FIXED, ids=[f[0] for f in FIXED])
def test_fixed_fixture_runs_clean(code: str, name: str) -> None:
    returncode, report, stderr = verify(fixture(code, name, "fixed"), *selecting(code))
    assert (returncode, report["findings"], report["unexplained"]) == (0, [], []), stderr
    assert_finished(report)


def _cuda_devices() -> int:
    """Each node needs one device: a machine with a GPU runs the two nodes on it, with no virtual devices."""
    import torch

    return torch.cuda.device_count()


def test_pfl305_runs_two_nodes_and_shows_each_ranks_device_and_file() -> None:
    """On one node RANK == LOCAL_RANK: only two nodes show the device the second node lacks and the second writer."""
    path = fixture("PFL305", "rank-vs-local-rank", "bad")
    source = path.read_text()
    assert expected(source) == {("PFL305", 25), ("PFL305", 26)}
    returncode, report, stderr = verify(path, *selecting("PFL305"))
    assert returncode == 1, stderr
    assert report["run"] == "distributed"
    assert verdicts(report) == {("PFL305", 25, "confirmed"), ("PFL305", 26, "confirmed")}
    assert report["unexplained"] == []
    writer, device = sorted(report["findings"], key=lambda f: f["line"])
    assert writer["evidence"]["mechanism"] == (
        f"rank 0 (node 0, local rank 0) and rank 1 (node 1, local rank 0) each wrote {REPO / 'run-config.pt'}: every "
        "node has a local rank 0, so the one writer is one per node"
    )
    assert device["evidence"]["message"] == "CUDA error: invalid device ordinal"
    assert device["evidence"]["user_frame"]["line"] == 26
    virtual = "" if _cuda_devices() else " (virtual devices: one CUDA device per local process)"
    assert device["evidence"]["mechanism"] == (
        f"with RANK and LOCAL_RANK apart on two nodes{virtual}, the global rank "
        "picked a device the node does not have: rank 0 (node 0, local rank 0) picked cuda:0, its node having 1; "
        "rank 1 (node 1, local rank 0) picked cuda:1, its node having 1"
    )


BOOTSTRAPPING = ("An attempt has been made to start a new process before the current process has finished its "
                 "bootstrapping phase.")


def test_pfl301_dataloader_workers_at_import_fail_under_spawn_and_under_forkserver() -> None:
    """This machine's default, fork, runs the script: verify runs it with each default that re-imports it."""
    path = fixture("PFL301", "missing-main-guard", "bad_dataloader")
    assert expected(path.read_text()) == {("PFL301", 14)}
    returncode, report, stderr = verify(path)
    assert (returncode, verdicts(report), report["unexplained"], report["stop"]) == (
        1, {("PFL301", 14, "confirmed")}, [], None), stderr
    assert report["outcome"] == "failed (exit code 1); no process left behind"
    assert report["findings"][0]["evidence"] == {
        "mechanism": "run with spawn (macOS, Windows) and then forkserver (Linux from Python 3.14) as the default start "
        "method: children started with spawn and with forkserver re-imported the script and reached line 14 again, "
        "starting processes before the current process had finished bootstrapping",
        "error_type": "RuntimeError",
        "message": BOOTSTRAPPING,
        "user_frame": {"file": str(path), "line": 14, "function": "<module>",
                       "code": "for (batch,) in loader:  # expect: PFL301"},
    }


def test_pfl301_guarded_dataloader_twin_runs_clean() -> None:
    returncode, report, stderr = verify(fixture("PFL301", "missing-main-guard", "fixed_dataloader"))
    assert (returncode, report["findings"], report["unexplained"]) == (0, [], []), stderr
    assert_finished(report)


@pytest.mark.parametrize(("kind", "status", "batches"), [("bad_dataloader", 1, 0), ("fixed_dataloader", 0, 8)])
def test_the_script_runs_once_with_spawn_and_once_with_forkserver_made_the_default(kind: str, status: int,
                                                                                    batches: int) -> None:
    """What verify asks of its child runner for such a finding: the guarded twin runs under both, the other fails
    under both."""
    path = fixture("PFL301", "missing-main-guard", kind)
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint.harness.child.run_script", str(path)], capture_output=True, text=True,
        timeout=300, env={**os.environ, "PITFALL_LINT_START_METHOD_SCRIPTS": str(path)}, check=False,
    )
    assert (completed.returncode, completed.stdout.count("batch sum")) == (status, batches), completed.stderr
    assert (" ".join(completed.stderr.split()).count(BOOTSTRAPPING[:-1]) >= 2) == (status == 1)


def test_pfl302_shows_two_processes_joining_as_one_rank() -> None:
    returncode, report, stderr = verify(CASES / "spawn_same_rank.py")
    assert returncode == 1, stderr
    assert verdicts(report) == {("PFL302", 17, "confirmed")}
    assert report["unexplained"] == []
    evidence = report["findings"][0]["evidence"]
    assert evidence["mechanism"] == (
        "2 spawned processes joined the process group as rank 0: each got the rank from args and none used its index"
    )
    assert "EADDRINUSE" in evidence["message"]  # the second rank 0 could not host rank 0's store
    assert evidence["user_frame"]["line"] == 12


def test_a_rule_that_is_off_by_default_is_only_verified_when_selected() -> None:
    path = fixture("PFL202", "load-without-map-location", "bad")
    assert selecting("PFL202")
    returncode, report, _ = verify(path)  # on the virtual devices the load succeeds, as on real ones
    assert (returncode, report["findings"], report["unexplained"]) == (0, [], [])
    returncode, report, _ = verify(path, "--select", "PFL2")
    assert (returncode, verdicts(report)) == (1, {("PFL202", 21, "confirmed")})


def test_verify_rejects_an_unknown_code_in_one_line() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "verify", "--select", "PFL999", str(fixture("PFL202", "load-without-map-location", "bad"))],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr == "error: --select: 'PFL999' matches no rule code\n"


def test_pfl101_mechanism_names_the_bound_method() -> None:
    _, report, _ = verify(fixture("PFL101", "bound-method-on-module", "bad"))
    (confirmed,) = [f for f in report["findings"] if f["status"] == "confirmed"]
    assert confirmed["evidence"]["mechanism"] == (
        "replica 1 ran `mix_only` (stored in `forward`), bound to the original DynamicNet, on the original's parameters"
    )
    assert confirmed["evidence"]["user_frame"]["line"] == 26


def test_model_file_without_entry_point_uses_its_example() -> None:
    returncode, report, _ = verify(CASES / "model_file_lambda.py")
    assert returncode == 1
    assert report["run"] == "example"
    assert verdicts(report) == {("PFL101", 11, "confirmed")}


def test_data_that_does_not_trigger_the_gather_failure_is_not_reproduced() -> None:
    returncode, report, _ = verify(CASES / "equal_lengths.py")
    assert returncode == 0
    assert verdicts(report) == {("PFL102", 15, "not-reproduced")}
    assert "longest sequences were equal" in report["findings"][0]["evidence"]["mechanism"]


def test_nccl_script_gets_gloo_and_says_so(tmp_path: Path) -> None:
    returncode, report, _ = verify(CASES / "ddp_nccl_epochs.py", "--preview", cwd=tmp_path)  # PFL201 is a preview rule
    assert returncode == 1
    assert verdicts(report) == {("PFL201", 26, "confirmed")}
    assert (
        "the script asked for nccl; it got gloo (no GPUs for it), which is stricter in places: gloo refuses an "
        "all_gather of tensors of unequal sizes that NCCL takes (an error here may be a later hang on GPUs), and a "
        "hang ends in gloo's recv timeout rather than NCCL's watchdog"
    ) in report["notes"]
    assert report["run"] == "distributed"


def test_checkpoints_never_land_in_the_users_tree(tmp_path: Path) -> None:
    shutil.copy(fixture("PFL201", "unguarded-torch-save", "bad"), tmp_path / "train.py")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    returncode, report, _ = verify(tmp_path / "train.py", "--preview", cwd=tmp_path)  # PFL201 is a preview rule
    assert returncode == 1
    assert str(tmp_path / "checkpoint.pt") in report["findings"][0]["evidence"]["mechanism"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_script_that_fails_on_import() -> None:
    returncode, report, stderr = verify(CASES / "fails_on_import.py", "--preview")  # PFL201 is a preview rule
    assert returncode == 2
    assert verdicts(report) == {("PFL201", 10, "not-run")}
    assert report["unexplained"][0]["type"] == "ModuleNotFoundError"
    assert stderr.strip().splitlines()[-1] == (
        f"error: {CASES / 'fails_on_import.py'}: the script needs the module 'a_module_that_is_not_installed' at "
        "tests/verify_cases/fails_on_import.py:5; pip install a_module_that_is_not_installed"
    )


def test_code_written_for_cuda_runs_on_virtual_devices() -> None:
    import torch

    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has real CUDA devices (tests/test_verify_gpu.py)")
    returncode, report, stderr = verify(CASES / "needs_cuda.py")
    assert returncode == 1, stderr
    assert "2 virtual CUDA devices on the CPU" in report["mode"]
    assert verdicts(report) == {("PFL101", 11, "confirmed")}
    # addmm's bias (the original's, on cuda:0) is checked first, then replica 1's input: torch's own order.
    assert report["findings"][0]["evidence"]["message"] == (
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!"
    )
    assert report["notes"][0].startswith("the run saw 2 virtual CUDA devices")


def test_hanging_script_is_stopped_and_leaves_no_process(tmp_path: Path) -> None:
    returncode, report, stderr = verify(CASES / "hangs.py", "--timeout", "15", env={"HANG_PID_DIR": str(tmp_path)})
    assert returncode == 2
    assert report["outcome"] == "stopped after 15 s (timeout); no process left behind"
    # Where the stopped process stood, from the stack it wrote when terminated.
    assert stderr.strip().splitlines()[-1] == (
        f"error: {CASES / 'hangs.py'}: the run did not finish within 15 s (a process was at tests/verify_cases/hangs.py:22 "
        "in <module>); raise --timeout or lower --steps; its processes were killed"
    )
    started = sorted(p.read_text() for p in tmp_path.glob("*.pid"))
    assert started == ["escaped", "main"]  # both really started, one outside the group
    # Their pids are the PID namespace's: `ps` finds them by the script they run.
    listing = subprocess.run(["ps", "-ww", "-eo", "stat,args"], capture_output=True, text=True, check=True).stdout
    assert [line for line in listing.splitlines() if str(CASES / "hangs.py") in line and not line.startswith("Z")] == []


def test_model_file_whose_forward_takes_several_inputs_needs_its_example(tmp_path: Path) -> None:
    source = fixture("PFL102", "pad-packed-without-total-length", "bad").read_text()
    (tmp_path / "model.py").write_text(source.split("def pitfall_lint_example")[0])
    returncode, report, stderr = verify(tmp_path / "model.py")
    assert (returncode, report["run"], report["unexplained"]) == (2, "model", [])  # verify's limit, not the file's failure
    assert verdicts(report) == {("PFL102", 21, "not-run")}
    limit = ("verify's own limit (not a failure of the code): Tagger.forward takes 2 inputs (padded, lengths): verify "
             "can shape only one; add pitfall_lint_example() returning (model, args)")
    assert report["findings"][0]["evidence"]["mechanism"] == f"line 21 never ran: {limit}"
    assert stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'model.py'}: not run to its end: {limit}"


def test_confirmed_verdicts_come_first_so_that_the_failure_confirmed_above_is_above(tmp_path: Path) -> None:
    source = fixture("PFL101", "bound-method-on-module", "bad").read_text()
    (tmp_path / "bad.py").write_text(source.replace("DynamicNet(mix=True)", "DynamicNet(mix=False)"))
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "verify", "bad.py"], cwd=tmp_path, capture_output=True, text=True,
        check=False, timeout=300,
    )
    assert completed.returncode == 1, completed.stderr
    lines = completed.stdout.splitlines()
    assert [line for line in lines if line.startswith("bad.py:")] == ["bad.py:20: PFL101 confirmed", "bad.py:18: PFL101 not-run"]
    assert lines[-2:] == [
        "    line 18 never ran: the run ended with the failure confirmed above (RuntimeError)",
        "1 confirmed, 0 not-reproduced, 1 not-run.",
    ]


def test_file_with_no_entry_point_and_no_module(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("import torch\n\n\ndef save(obj, path):\n    torch.save(obj, path)\n")
    returncode, report, stderr = verify(tmp_path / "helpers.py", "--preview")  # the torch.save's rule, PFL201, is preview
    assert (returncode, report["findings"]) == (2, [])
    # pitfall_lint_example() is advice for a file that defines a model, not for a helper.
    assert stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'helpers.py'}: no entry point ran this module, and no file of the project calls it: verify "
        "the script that uses it (pitfall-lint verify SCRIPT)"
    )


def test_missing_path_is_a_one_line_error() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "verify", "nowhere.py"], capture_output=True, text=True, check=False
    )
    assert (completed.returncode, completed.stderr) == (2, "error: nowhere.py: no such file or directory\n")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (("--timeout", "0"), "--timeout must be more than 0: the seconds the run is given before it is stopped"),
        (("--timeout", "-5"), "--timeout must be more than 0: the seconds the run is given before it is stopped"),
        (("--steps", "-1"), "--steps must be 0 or more: the optimizer steps per rank before data loading winds down "
                            "(0: no limit)"),
    ],
)
def test_a_timeout_or_step_count_no_run_can_use_is_a_usage_error(option: tuple[str, str], message: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "verify", *option, str(fixture("PFL101", "bound-method-on-module", "bad"))],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert (completed.returncode, completed.stdout, completed.stderr) == (2, "", f"error: {message}\n")


def test_every_verifiable_rule_has_a_probe_and_back() -> None:
    from pitfall_lint.harness.probes import all_probes
    from pitfall_lint.rules import all_rules

    assert set(all_probes()) == {r.info.code for r in all_rules() if r.info.verifiable}


@pytest.mark.parametrize("code", ["PFL102", "PFL201", "PFL202", "PFL301", "PFL402"])
def test_verify_no_longer_confirms_what_fix_rewrote(tmp_path: Path, code: str) -> None:
    (folder,) = (REPO / "fixtures").glob(f"{code}-*")
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    fixing = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "check", "--no-cache", "--fix", "--unsafe-fixes", *previewing(code),
         "--select", code, "bad.py"],
        cwd=copy, capture_output=True, text=True, timeout=120,
    )
    assert (fixing.returncode, fixing.stderr) == (0, "Fixed 1 finding in 1 file.\n")
    returncode, report, stderr = verify(copy / "bad.py", *selecting(code), cwd=copy)
    assert (returncode, report["findings"], report["unexplained"]) == (0, [], []), stderr
    assert_finished(report)


def confirmed_evidence(report: dict[str, Any], line: int) -> dict[str, Any]:
    (finding,) = [f for f in report["findings"] if f["line"] == line]
    assert finding["status"] == "confirmed", finding
    return finding["evidence"]


def test_pfl104_shows_the_values_the_replicas_lost() -> None:
    _, report, _ = verify(fixture("PFL104", "dp-state-mutation-in-forward", "bad"))
    assert confirmed_evidence(report, 19) == {
        "mechanism": "after 3 DataParallel steps, `batches_seen` of the original WarmupNet is 0; the replicas had set it "
        "to 1, 1, and were thrown away",
        "error_type": None, "message": None, "user_frame": None,
    }


def test_pfl105_gather_of_a_scalar_explains_the_failed_backward() -> None:
    returncode, report, _ = verify(fixture("PFL105", "dp-scalar-or-non-tensor-output", "bad"))
    assert (returncode, report["unexplained"]) == (1, [])
    assert confirmed_evidence(report, 20)["mechanism"] == (
        "each of the 2 replicas returned a 0-dim tensor; the gather made a vector of 2 of them, and `.backward()` on it "
        "failed: grad can be implicitly created only for scalar outputs"
    )


def test_pfl105_a_python_number_fails_the_gather() -> None:
    returncode, report, _ = verify(CASES / "dp_number_output.py")
    assert (returncode, verdicts(report), report["unexplained"]) == (1, {("PFL105", 15, "confirmed")}, [])
    evidence = confirmed_evidence(report, 15)
    assert (evidence["error_type"], evidence["message"]) == ("TypeError", "'float' object is not iterable")
    assert evidence["mechanism"] == "each of the 2 replicas returned a Python float as output[1], which the gather cannot take apart"
    assert evidence["user_frame"]["line"] == 19


def test_pfl105_a_string_silently_becomes_a_map_object() -> None:
    returncode, report, _ = verify(CASES / "dp_string_output.py")
    assert (returncode, verdicts(report)) == (1, {("PFL105", 13, "confirmed")})
    assert_finished(report)
    mechanism = confirmed_evidence(report, 13)["mechanism"]
    assert mechanism.startswith(
        "each of the 2 replicas returned a string as output['tag']; the gather returned the text '<map object at 0x"
    ) and mechanism.endswith("' as output['tag'] instead")


def test_pfl106_shows_the_original_model_losing_its_layers() -> None:
    _, report, _ = verify(fixture("PFL106", "compile-with-data-parallel", "bad"))
    evidence = confirmed_evidence(report, 24)
    assert evidence["mechanism"] == (
        "replicating the compiled module rewrote the original Net's submodules from ['encoder', 'head'] to ['_orig_mod']: "
        "the replicas' tables were written onto the model inside the OptimizedModule"
    )
    assert (evidence["error_type"], evidence["user_frame"]["line"]) == ("AttributeError", 19)


def test_pfl106_module_compile_runs_the_original_on_every_replica() -> None:
    returncode, report, _ = verify(CASES / "dp_module_compile.py")
    assert (returncode, verdicts(report), report["unexplained"]) == (1, {("PFL106", 19, "confirmed")}, [])
    evidence = confirmed_evidence(report, 19)
    assert "[pitfall-lint DataParallel emulation: replica 1 called linear() on 'lin.weight'" in evidence["message"]
    assert evidence["mechanism"] == (
        "`Net.compile()` stored a compiled forward bound to the original Net; the replicas copied it and ran on the "
        "original's parameters"
    )


def test_pfl212_attribute_error_and_the_attribute_the_module_never_saw() -> None:
    path = fixture("PFL212", "wrapper-attribute-without-module", "bad")
    assert expected(path.read_text()) == {("PFL212", 27), ("PFL212", 29)}
    returncode, report, _ = verify(path)
    assert (returncode, verdicts(report), report["unexplained"]) == (1, {("PFL212", 27, "confirmed"), ("PFL212", 29, "confirmed")}, [])
    assert confirmed_evidence(report, 27)["mechanism"] == (
        "line 27 set `temperature` = 2.0 on the DataParallel wrapper; when forward ran, the wrapped Net's own "
        "`temperature` was still 1.0"
    )
    evidence = confirmed_evidence(report, 29)
    assert (evidence["error_type"], evidence["message"]) == ("AttributeError", "'DataParallel' object has no attribute 'freeze_trunk'")
    assert evidence["user_frame"]["line"] == 29
    returncode, report, stderr = verify(fixture("PFL212", "wrapper-attribute-without-module", "fixed"))
    assert (returncode, report["findings"], report["unexplained"]) == (0, [], []), stderr


def test_pfl212_under_ddp_every_rank_fails() -> None:
    returncode, report, _ = verify(CASES / "ddp_wrapper_method.py")
    assert (returncode, report["run"], verdicts(report), report["unexplained"]) == (
        1, "distributed", {("PFL212", 26, "confirmed")}, []
    )
    evidence = confirmed_evidence(report, 26)
    assert evidence["message"] == "'DistributedDataParallel' object has no attribute 'freeze_trunk'"


def test_progress_is_live_on_a_terminal_and_quiet_when_redirected() -> None:
    import pty

    path = fixture("PFL101", "bound-method-on-module", "bad")
    controller, terminal = pty.openpty()
    completed = subprocess.run(
        [sys.executable, "-m", "pitfall_lint", "verify", str(path)], cwd=REPO, stdout=subprocess.PIPE,
        stderr=terminal, timeout=300,
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert completed.returncode == 1
    statuses = [line for line in shown.decode().split("\r\x1b[K") if line.startswith("verify: ")]
    assert statuses[0] == f"verify: checking the project {path.parent}"  # each fixture is a project of its own
    assert any(status.startswith("verify: running | ") and status.endswith(" s") for status in statuses), statuses
    _, _, stderr = verify(path)
    assert stderr == ""  # redirected: no status lines (and no error, since a finding was confirmed)
