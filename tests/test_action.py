"""The GitHub composite action and the workflow snippets of docs/ci.md and the README: the inputs the docs document,
and the check step and the by-hand steps run as written, in a workspace that keeps a copy of this repository."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from documentation import code_blocks, page, section
from marks import REPO

# A default rule's pitfall (PFL301: mp.spawn at module level), what the action reports with no options.
BAD_SPAWN = "import torch.multiprocessing as mp\ndef work(rank):\n    pass\nmp.spawn(work, nprocs=2)\n"
# PFL201's pitfall: a preview rule, which the action with its defaults does not run.
PREVIEW_SAVE = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\ntorch.save({}, 'c.pt')\n"


def _action() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text())


ACTIONS_SECTION = "## GitHub Actions with code scanning"


def _workflow_blocks(path: str) -> list[str]:
    """The YAML blocks of the page's GitHub Actions section."""
    return code_blocks(section(page(path), ACTIONS_SECTION), "yaml")


def _workflow_snippets() -> list[list[dict]]:
    """The YAML blocks of the GitHub Actions section of docs/ci.md, each as its list of steps."""
    blocks = [yaml.safe_load(block) for block in _workflow_blocks("docs/ci.md")]
    return [block["steps"] if isinstance(block, dict) else block for block in blocks]


def _vendored_path() -> str:
    """Where the docs say the copy of this repository lives: the path its `uses:` step names."""
    (with_action, _) = _workflow_snippets()
    (local,) = [step["uses"] for step in with_action if step["uses"].startswith("./")]
    return local.removeprefix("./")


def _workspace(tmp_path: Path) -> Path:
    """A checked-out repository with one bad file, one that only a preview rule would report and, at the documented
    path, a copy of this one."""
    workspace = tmp_path / "workspace"
    vendored = workspace / _vendored_path()
    shutil.copytree(REPO / "fixtures", vendored / "fixtures")  # bad on purpose: must never be reported
    shutil.copy(REPO / "action.yml", vendored / "action.yml")
    (workspace / "train.py").write_text(BAD_SPAWN)
    (workspace / "checkpoint.py").write_text(PREVIEW_SAVE)
    return workspace


def _environment(tmp_path: Path) -> dict[str, str]:
    """This environment's pitfall-lint first on PATH, standing in for the install step."""
    output, summary = tmp_path / "github-output", tmp_path / "step-summary"
    output.write_text("")
    summary.write_text("")
    bin_dir = os.path.dirname(sys.executable)
    path = bin_dir + os.pathsep + os.environ["PATH"]
    return {**os.environ, "PATH": path, "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}


def _sarif_paths(path: Path) -> list[str]:
    results = json.loads(path.read_text())["runs"][0]["results"]
    return [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]


def test_action_is_a_composite_with_the_documented_inputs() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {"paths", "args", "sarif-file", "upload", "fail-on-findings"}
    documented = section(page("docs/ci.md"), ACTIONS_SECTION)
    for name in action["inputs"]:
        assert f"`{name}`" in documented, f"docs/ci.md does not document the action input {name}"
    steps = action["runs"]["steps"]
    assert any(step.get("uses", "").startswith("github/codeql-action/upload-sarif@") for step in steps)
    assert all("shell" in step for step in steps if "run" in step)  # composite run steps need a shell
    assert "--format sarif" in next(step["run"] for step in steps if step.get("id") == "check")
    install = next(step["run"] for step in steps if step.get("name") == "Install pitfall-lint")
    assert '"${{ github.action_path }}"' in install  # installs the copy it runs from, not a registry's


def test_docs_use_the_action_by_a_path_that_needs_no_tag() -> None:
    (with_action, _) = _workflow_snippets()
    assert [step["uses"] for step in with_action] == ["actions/checkout@v4", "./tools/pitfall-lint"]


def test_the_readme_shows_the_workflow_of_the_docs() -> None:
    """The front page's snippet is the first one of docs/ci.md, which the tests here run."""
    assert _workflow_blocks("README.md") == _workflow_blocks("docs/ci.md")[:1]


def _run_check_step(tmp_path: Path) -> tuple[Path, dict[str, str], subprocess.CompletedProcess[str]]:
    """The action's check step with its inputs' defaults, run as GitHub runs it, in a workspace with one bad file."""
    action = _action()
    workspace = _workspace(tmp_path)
    script = next(step["run"] for step in action["runs"]["steps"] if step.get("id") == "check")
    values = {f"inputs.{name}": str(spec["default"]) for name, spec in action["inputs"].items()}
    values["github.action_path"] = str(workspace / _vendored_path())
    script = re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", lambda m: values[m[1]], script)
    env = _environment(tmp_path)
    return workspace, env, subprocess.run(["bash", "-c", script], cwd=workspace, env=env, capture_output=True, text=True, timeout=120)


def test_check_step_reports_the_workspace_and_never_the_vendored_copy(tmp_path: Path) -> None:
    workspace, env, result = _run_check_step(tmp_path)
    assert result.returncode == 0, result.stderr  # findings are exit 1: the later step decides to fail the job
    assert Path(env["GITHUB_OUTPUT"]).read_text() == "exit-code=1\n"
    assert _sarif_paths(workspace / "pitfall-lint.sarif") == ["train.py"]  # not checkpoint.py: PFL201 is a preview rule
    assert [line.split(",")[0] for line in result.stdout.splitlines()] == ["::error file=train.py"]


def test_check_step_writes_a_markdown_summary_for_the_job_page(tmp_path: Path) -> None:
    _, env, result = _run_check_step(tmp_path)
    assert result.returncode == 0, result.stderr
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().splitlines() == [
        "## pitfall-lint",
        "",
        "Found 1 diagnostic in 1 of 2 files checked.",  # checkpoint.py is checked; PFL201 is a preview rule
        "",
        "[*] 1 fixable with `--fix`.",
        "",
        "| Code | Rule | Findings | Fixable with `--fix` |",
        "| --- | --- | ---: | ---: |",
        "| PFL301 | missing-main-guard | 1 | 1 |",
        "",
        "| Place | Code | Message |",
        "| --- | --- | --- |",
        (
            "| `train.py:4:1` | PFL301 | `torch.multiprocessing.spawn` starts processes at import time with the spawn "
            "start method, on every platform: each child re-imports the module, reaches it again and fails while "
            'bootstrapping; move it under `if __name__ == "__main__":` |'
        ),
    ]


def test_docs_steps_without_the_action_run_as_written(tmp_path: Path) -> None:
    (_, by_hand) = _workflow_snippets()
    runs = [step["run"] for step in by_hand if "run" in step]
    install, *checks = runs
    assert install == f"pip install ./{_vendored_path()}"  # stood in for by this environment's pitfall-lint
    assert by_hand[-1]["uses"].startswith("github/codeql-action/upload-sarif@")
    sarif = by_hand[-1]["with"]["sarif_file"]
    workspace = _workspace(tmp_path)
    env = _environment(tmp_path)
    for command in checks:  # GitHub runs `run:` steps with `bash -e`
        result = subprocess.run(["bash", "-e", "-c", command], cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
    assert _sarif_paths(workspace / sarif) == ["train.py"]
    # An error (exit 2) must fail the step, not be swallowed like the findings.
    (workspace / "pyproject.toml").write_text("[tool.pitfall-lint]\nselect = [\n")
    result = subprocess.run(["bash", "-e", "-c", checks[0]], cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"error: {workspace / 'pyproject.toml'}: invalid TOML: "), result.stderr
