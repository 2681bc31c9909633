"""Run the published pre-commit hook end to end with the real `pre-commit` tool.

pre-commit installs the hook from a git commit into its own virtualenv, exactly as it
would for a user, so this catches a broken `.pre-commit-hooks.yaml`, console script or
packaging mistake that in-process tests cannot see.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# A rule on by default (PFL301: mp.spawn at module level): the hook runs with the user's defaults, no --preview.
FIXTURE_DIR = REPO_ROOT / "fixtures" / "PFL301-missing-main-guard"
HOOK_ID = "pitfall-lint"
TIMEOUT_S = 300


def _clean_env(**extra: str) -> dict[str, str]:
    """Environment for git and pre-commit, minus what would make them lie.

    GIT_* variables are set when pytest itself runs from a git hook and would point git
    at the outer repository; SKIP is pre-commit's opt-out and would skip our hook.
    """
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "SKIP"
    }
    env.update(extra)
    return env


def _git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, (
        f"git {' '.join(args)} in {cwd}:\n{proc.stdout}\n{proc.stderr}"
    )
    return proc.stdout


def _init_repo(path: Path) -> None:
    """A repo that can commit whatever the user's global git config says."""
    _git(path, "init", "-q")
    _git(path, "config", "user.email", "tests@pitfall-lint.invalid")
    _git(path, "config", "user.name", "pitfall-lint tests")
    _git(path, "config", "commit.gpgsign", "false")


def _snapshot_working_tree(dest: Path) -> str:
    """Commit the checkout's current files to a new repo at `dest`; return the sha.

    pre-commit installs hooks from a commit. `try-repo` does snapshot a dirty tree, but
    its snapshot leaves out untracked files and needs HEAD to exist, so new modules or
    a repository without commits would be tested wrongly or not at all.
    """
    listed = _git(
        REPO_ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"
    )
    for rel in filter(None, listed.split("\0")):
        src = REPO_ROOT / rel
        # Skips files still in the index but deleted from the working tree.
        if src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    _init_repo(dest)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "--no-verify", "-m", "snapshot")
    return _git(dest, "rev-parse", "HEAD").strip()


@dataclass(frozen=True)
class HookSetup:
    config: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def hook_setup(tmp_path_factory: pytest.TempPathFactory) -> HookSetup:
    """One hook repo and one PRE_COMMIT_HOME per module, so the hook env is built once.

    This is the config `pre-commit try-repo` would write, but `try-repo` keeps its
    store in a throwaway directory and ignores PRE_COMMIT_HOME, so it would rebuild
    the env on every call.
    """
    if importlib.util.find_spec("pre_commit") is None:
        pytest.fail(
            "pre-commit is a test dependency and is not installed: "
            "pip install -e '.[test]'",
            pytrace=False,
        )
    hook_repo = tmp_path_factory.mktemp("hook-repo")
    rev = _snapshot_working_tree(hook_repo)
    config = tmp_path_factory.mktemp("config") / ".pre-commit-config.yaml"
    repos = [{"repo": str(hook_repo), "rev": rev, "hooks": [{"id": HOOK_ID}]}]
    # JSON is valid YAML.
    config.write_text(json.dumps({"repos": repos}), encoding="utf-8")
    home = tmp_path_factory.mktemp("pre-commit-home")
    return HookSetup(config=config, env=_clean_env(PRE_COMMIT_HOME=str(home)))


def _run_hook(
    setup: HookSetup, workdir: Path, fixture: Path
) -> subprocess.CompletedProcess[str]:
    """Run the hook on `fixture`, copied and staged into a new git repo at `workdir`."""
    _init_repo(workdir)
    shutil.copyfile(fixture, workdir / fixture.name)
    _git(workdir, "add", fixture.name)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pre_commit",
            "run",
            "--config",
            str(setup.config),
            "--color",
            "never",
            "--files",
            fixture.name,
        ],
        cwd=workdir,
        env=setup.env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def _describe(proc: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit code {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )


def _stage(workdir: Path, files: dict[str, bytes]) -> None:
    _init_repo(workdir)
    for name, data in files.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_bytes(data)
    _git(workdir, "add", "-A")


def _run_on_staged(workdir: Path, env: dict[str, str], config: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`pre-commit run` as the commit would: on the staged files."""
    options = ["--config", str(config)] if config else []
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", *options, "--color", "never"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )


BAD_SPAWN = (FIXTURE_DIR / "bad.py").read_bytes()
# PFL201's pitfall: a preview rule since 2026-11-25, so the hook, as a user installs it, does not report it.
BAD_SAVE = (REPO_ROOT / "fixtures" / "PFL201-unguarded-torch-save" / "bad.py").read_bytes()
NOTEBOOKS = REPO_ROOT / "fixtures" / "PFL308-spawn-from-notebook"
EXCLUDE_THIRD_PARTY = b'[tool.pitfall-lint]\nexclude = ["third_party"]\n'
# What is staged, and the diagnostic the hook must print (None: the hook must pass, having been given files).
STAGED = {
    "bad-python": ({"train.py": BAD_SPAWN}, "train.py:16:1: PFL301 "),
    "preview-rule-python": ({"train.py": BAD_SAVE}, None),
    "fixed-python": ({"train.py": (FIXTURE_DIR / "fixed.py").read_bytes()}, None),
    "bad-notebook": ({"nb.ipynb": (NOTEBOOKS / "bad.ipynb").read_bytes()}, "nb.ipynb:cell 4:1:1: PFL308 "),
    "fixed-notebook": ({"nb.ipynb": (NOTEBOOKS / "fixed.ipynb").read_bytes()}, None),
    "excluded-folder": ({"pyproject.toml": EXCLUDE_THIRD_PARTY, "third_party/train.py": BAD_SPAWN, "a/third_party/b/train.py": BAD_SPAWN}, None),
}


def _assert_outcome(proc: subprocess.CompletedProcess[str], expected: str | None) -> None:
    if expected is None:
        assert proc.returncode == 0, _describe(proc)
        # "Passed", not "Skipped": the hook must actually have been given the files.
        assert re.search(rf"^{HOOK_ID}\.+Passed$", proc.stdout, re.MULTILINE), _describe(proc)
    else:
        assert proc.returncode == 1, _describe(proc)
        assert [line for line in proc.stdout.splitlines() if line.startswith(expected)], _describe(proc)


def _readme_hook_config() -> str:
    """The pre-commit configuration exactly as the README shows it."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    return block


@pytest.mark.parametrize("case", STAGED)
def test_readme_snippet_as_documented(case: str, tmp_path: Path) -> None:
    """The README's `.pre-commit-config.yaml`, with pitfall-lint installed where git commits from (this test's
    environment, first on PATH), on a repository with the case's files staged."""
    files, expected = STAGED[case]
    workdir = tmp_path / "repo"
    workdir.mkdir()
    _stage(workdir, {".pre-commit-config.yaml": _readme_hook_config().encode(), **files})
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    env = _clean_env(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), PATH=path)
    _assert_outcome(_run_on_staged(workdir, env), expected)


@pytest.mark.parametrize("case", ["bad-notebook", "excluded-folder"])
def test_hook_repository_on_staged_files(case: str, hook_setup: HookSetup, tmp_path: Path) -> None:
    """The hook of `.pre-commit-hooks.yaml` sees notebooks, and honours a folder exclusion of the configuration."""
    files, expected = STAGED[case]
    _stage(tmp_path, files)
    _assert_outcome(_run_on_staged(tmp_path, hook_setup.env, hook_setup.config), expected)


def test_hook_reports_missing_main_guard(
    hook_setup: HookSetup, tmp_path: Path
) -> None:
    proc = _run_hook(hook_setup, tmp_path, FIXTURE_DIR / "bad.py")
    assert proc.returncode != 0, _describe(proc)
    assert "PFL301" in proc.stdout + proc.stderr, _describe(proc)


def test_hook_passes_fixed_file(hook_setup: HookSetup, tmp_path: Path) -> None:
    proc = _run_hook(hook_setup, tmp_path, FIXTURE_DIR / "fixed.py")
    assert proc.returncode == 0, _describe(proc)
    # "Passed", not "Skipped": the hook must actually have been given the file.
    status = re.compile(rf"^{HOOK_ID}\.+Passed$", re.MULTILINE)
    assert status.search(proc.stdout), _describe(proc)


LAUNCHER = b"#!/usr/bin/env python\n" + BAD_SPAWN
CLEAN_MODULES = {f"pkg/module_{index}.py": f"VALUE = {index}\n".encode() for index in range(8)}
SUMMARY = re.compile(r"^(Found \d+ diagnostics? in \d+ of |All checks passed! \()(?P<files>\d+) files? checked")


@pytest.mark.parametrize("config", ["hook-repository", "readme-snippet"])
def test_one_report_over_every_staged_file(config: str, hook_setup: HookSetup, tmp_path: Path) -> None:
    """Eight modules, a notebook and an extensionless executable script with a python shebang (pre-commit tags it
    `python`): the hook runs once over all ten (`require_serial: true`), so one report, one summary, and the
    script's finding is shown."""
    workdir = tmp_path / "repo"
    workdir.mkdir()
    files = {**CLEAN_MODULES, "nb.ipynb": (NOTEBOOKS / "bad.ipynb").read_bytes(), "launch": LAUNCHER}
    env = hook_setup.env
    if config == "readme-snippet":
        files[".pre-commit-config.yaml"] = _readme_hook_config().encode()
        path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
        env = _clean_env(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), PATH=path)
    _stage(workdir, files)
    (workdir / "launch").chmod(0o755)
    _git(workdir, "add", "-A")
    proc = _run_on_staged(workdir, env, hook_setup.config if config == "hook-repository" else None)
    assert proc.returncode == 1, _describe(proc)
    summaries = [match for line in proc.stdout.splitlines() if (match := SUMMARY.match(line))]
    assert [int(match["files"]) for match in summaries] == [10], _describe(proc)
    findings = [line.split(" ", 2)[:2] for line in proc.stdout.splitlines() if ": PFL" in line]
    assert findings == [["launch:17:1:", "PFL301"], ["nb.ipynb:cell", "4:1:1:"]], _describe(proc)
