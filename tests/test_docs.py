"""Every command the README and the docs/ pages show is run here, or named below with the reason it cannot be.

A shell block (```sh) shows commands, one a line; a console block (```console, or a block whose first line starts
with `$ `) shows commands after `$ ` and what they print, `...` standing for what is left out. Commands run with this
environment's pitfall-lint first on PATH, as a user's shell would find it, in the repository's root or in a copy of a
small training project.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from xml.etree import ElementTree

import pytest
from documentation import FENCED_BLOCK, page, pages
from marks import REPO

SHELL_LANGUAGES = {"sh", "bash", "shell"}
PROMPT = "$ "
# A script that starts its ranks at import time (PFL301, whose fix is safe) and saves on every rank (PFL201, a preview
# rule since 2026-11-25: the commands as the docs show them, with no --preview, do not report it).
TRAIN = """\
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.save({"rank": rank}, "checkpoint.pt")


mp.spawn(worker, args=(2,), nprocs=2)
"""
# Where the check reports them (what the messages say is each rule's own tests' business).
FINDINGS = ["train.py:11:1: PFL301"]
SUMMARY = [
    "Found 1 diagnostic in 1 of 1 file checked.",
    "[*] 1 fixable with `--fix`.",
]

# What cannot run here, and why. Each is a command shown as it is written.
NOT_RUN = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && pitfall-lint check fixtures/":
        "installs from the package registry; the check it ends with is the README's sample, run below",
    'python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e ".[test,verify]" '
    "&& python -m pytest -q":
        "the test command itself: .ci/run runs it (tests/test_readme.py checks that it does)",
    "pip install .": "installs from the package registry",
    'pip install ".[verify]"': "installs torch from the package registry",
    'pip install ".[server]"': "installs pygls from the package registry",
    'pip install -e ".[docs]"': "installs from the package registry; .ci/run installs the same extra",
    "mkdocs build --strict --site-dir site": ".ci/run builds the site so, into a folder of its own (see below)",
    "torchrun --nnodes 2 --nproc-per-node 8 ... -m pitfall_lint.harness.child.run_script train.py --your-args":
        "two nodes of eight GPUs; its block runs below on one node of two CPU ranks",
}


@dataclass(frozen=True)
class Shown:
    """One command of a page, and the lines a console block shows it printing (none for a shell block)."""

    page: str
    command: str
    printed: tuple[str, ...]


def _without_comment(line: str) -> str:
    return re.sub(r"\s+#\s.*$", "", line).strip()


def shown_commands() -> list[Shown]:
    shown = []
    for path, text in pages().items():
        for language, body in FENCED_BLOCK.findall(text):
            lines = body.splitlines()
            if language in SHELL_LANGUAGES:
                shown += [Shown(path, _without_comment(line), ()) for line in lines if line.strip()]
            elif language == "console" or (language == "" and body.startswith(PROMPT)):
                starts = [number for number, line in enumerate(lines) if line.startswith(PROMPT)]
                for start, end in zip(starts, [*starts[1:], len(lines)]):
                    shown.append(Shown(path, lines[start].removeprefix(PROMPT), tuple(lines[start + 1 : end])))
    return shown


def _shell(command: str, cwd: Path, stdin: str | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """The command as a user's shell runs it, this environment's commands first on PATH."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    return subprocess.run(
        ["bash", "-e", "-c", command], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PATH": path},
    )


def _project(tmp_path: Path) -> Path:
    """A small training project: a pyproject.toml and one script with two findings."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (project / "train.py").write_text(TRAIN)
    return project


def _report(lines: list[str]) -> list[str]:
    """The text format's lines, each finding cut to its place and code."""
    return [" ".join(line.split(" ", 2)[:2]) if re.match(r"\S+:\d+:\d+: PFL\d{3} ", line) else line for line in lines]


def _needs_torch() -> ModuleType:
    return pytest.importorskip("torch", reason="verify needs torch (the [verify] extra); CI installs torch==2.13.0")


# --- the commands run in a copy of the project: each check says which shown commands it runs ----------------------

CHECKS: dict[str, Callable[[Path], None]] = {}


def runs(*commands: str) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    def register(check: Callable[[Path], None]) -> Callable[[Path], None]:
        for command in commands:
            CHECKS[command] = check
        return check
    return register


@runs("pitfall-lint check [PATH ...]", "pitfall-lint [PATH ...]")
def check_paths(project: Path) -> None:
    """With no path, the current folder; with one, that path; `check` or not."""
    for command in ("pitfall-lint check", "pitfall-lint", "pitfall-lint check train.py", "pitfall-lint ."):
        result = _shell(command, project)
        reported = (result.returncode, _report(result.stdout.splitlines()), result.stderr)
        assert reported == (1, FINDINGS + SUMMARY, ""), command


@runs("pitfall-lint rules")
def rules(project: Path) -> None:
    result = _shell("pitfall-lint rules", project)
    assert result.returncode == 0, result.stderr
    codes = {line.split()[0] for line in result.stdout.splitlines()[1:]}
    assert codes == {path.name[:6] for path in (REPO / "rules").glob("PFL*.md")}


@runs("pitfall-lint explain PFL101")
def explain(project: Path) -> None:
    result = _shell("pitfall-lint explain PFL101", project)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (REPO / "rules" / "PFL101-bound-method-on-module.md").read_text(encoding="utf-8")


def _lsp_messages(*messages: dict) -> str:
    """JSON-RPC messages framed as a language client writes them."""
    bodies = [json.dumps(message) for message in messages]
    return "".join(f"Content-Length: {len(body.encode())}\r\n\r\n{body}" for body in bodies)


@runs("pitfall-lint server")
def server(project: Path) -> None:
    """Started as an editor starts it, the server answers `initialize` and `shutdown`, and exits 0 on `exit`
    (tests/test_server.py drives the rest of the protocol)."""
    pytest.importorskip("pygls", reason="the server needs pygls (the [server] extra)")
    client = _lsp_messages(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": project.as_uri(),
                                                                         "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    )
    result = _shell("pitfall-lint server", project, stdin=client, timeout=60)
    assert result.returncode == 0, result.stderr
    headers = r"Content-Length: \d+\n(?:[\w-]+: [^\n]*\n)*\n"  # text mode has read each \r\n as \n
    answers = [json.loads(body) for body in re.split(headers, result.stdout) if body]
    (initialized, shut_down) = answers
    assert initialized["id"] == 1 and initialized["result"]["serverInfo"]["name"] == "pitfall-lint"
    assert {"hoverProvider", "codeActionProvider"} <= initialized["result"]["capabilities"].keys()
    assert (shut_down["id"], shut_down["result"]) == (2, None)


@runs("pitfall-lint verify train.py")
def verify(project: Path) -> None:
    _needs_torch()
    result = _shell("pitfall-lint verify train.py", project)
    assert result.returncode == 1, result.stderr
    assert "train.py:11: PFL301 confirmed" in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "1 confirmed, 0 not-reproduced, 0 not-run."


@runs(
    "pitfall-lint check --write-baseline pitfall-lint-baseline.json",
    "pitfall-lint check --baseline pitfall-lint-baseline.json",
)
def baseline(project: Path) -> None:
    written = _shell("pitfall-lint check --write-baseline pitfall-lint-baseline.json", project)
    assert (written.returncode, written.stderr) == (0, "Recorded 1 finding in pitfall-lint-baseline.json.\n")
    used = _shell("pitfall-lint check --baseline pitfall-lint-baseline.json", project)
    assert (used.returncode, used.stdout, used.stderr) == (
        0, "All checks passed! (1 file checked; 1 finding hidden by the baseline)\n", ""
    )


@runs(
    "pitfall-lint check --format gitlab -o gl-code-quality.json .",
    "pitfall-lint check --format junit -o pitfall-lint.xml .",
    "pitfall-lint check --format markdown -o pitfall-lint.md .",
)
def ci_reports(project: Path) -> None:
    for command in CI_REPORTS:
        result = _shell(command, project)
        assert (result.returncode, result.stdout, result.stderr) == (1, "", ""), command
    gitlab = json.loads((project / "gl-code-quality.json").read_text())
    assert [(issue["check_name"], issue["location"]["path"]) for issue in gitlab] == [("PFL301", "train.py")]
    junit = ElementTree.parse(project / "pitfall-lint.xml").getroot()
    assert sorted(failure.get("type") for failure in junit.iter("failure")) == ["PFL301"]
    summary = (project / "pitfall-lint.md").read_text().splitlines()
    assert summary[:3] == ["## pitfall-lint", "", SUMMARY[0]]


CI_REPORTS = [command for command, check in CHECKS.items() if check is ci_reports]


@runs("pitfall-lint check --format github .")
def github(project: Path) -> None:
    result = _shell("pitfall-lint check --format github .", project)
    assert result.returncode == 1, result.stderr
    assert [line.split(",")[:2] for line in result.stdout.splitlines()] == [["::error file=train.py", "line=11"]]


def _multi_node_block() -> list[str]:
    (block,) = [body for language, body in FENCED_BLOCK.findall(page("docs/verify.md"))
                if language == "sh" and "torchrun" in body]
    return block.strip().splitlines()


*MULTI_NODE_SET_UP, MULTI_NODE_LAUNCH = _multi_node_block()


@runs(*MULTI_NODE_SET_UP)
def multi_node_set_up_on_one_node(project: Path) -> None:
    """The block of docs/verify.md as written, but for its launch: one node of two CPU ranks instead of two nodes of
    eight GPUs. Every rank appends its saves to the trace folder; two ranks listed for one path is PFL201."""
    _needs_torch()
    assert MULTI_NODE_LAUNCH in NOT_RUN
    (project / "train.py").write_text(
        "import torch\nimport torch.distributed as dist\n\n"
        'dist.init_process_group("gloo")\ntorch.save({"step": 1}, "checkpoint.pt")\ndist.destroy_process_group()\n'
    )
    one_node = "torchrun --standalone --nnodes 1 --nproc-per-node 2 -m pitfall_lint.harness.child.run_script train.py"
    result = _shell("\n".join([*MULTI_NODE_SET_UP, one_node]), project, timeout=120)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for trace in (project / "pitfall-trace").glob("*.jsonl")
              for line in trace.read_text().splitlines()]
    saves = sorted((event["rank"], event["path"], event["line"]) for event in events if event["event"] == "save")
    assert saves == [(0, str(project / "checkpoint.pt"), 5), (1, str(project / "checkpoint.pt"), 5)]
    assert not (project / "checkpoint.pt").exists()  # each rank's save went to the scratch folder


@runs("pitfall-lint check --stdin-filename train.py < train.py")
def stdin(project: Path) -> None:
    result = _shell("pitfall-lint check --stdin-filename train.py < train.py", project)
    assert (result.returncode, _report(result.stdout.splitlines())) == (1, FINDINGS + SUMMARY), result.stderr


@runs("pitfall-lint check --stdin-filename train.py --fix < train.py")
def stdin_fix(project: Path) -> None:
    result = _shell("pitfall-lint check --stdin-filename train.py --fix < train.py", project)
    assert result.returncode == 0, result.stderr  # PFL301's fix made; PFL201, a preview rule, did not run
    assert result.stdout == TRAIN.replace("\nmp.spawn(", '\nif __name__ == "__main__":\n    mp.spawn(')
    assert result.stderr == "Fixed 1 finding in 1 file.\nAll checks passed! (1 file checked)\n"
    assert (project / "train.py").read_text() == TRAIN  # the buffer is fixed, not the file


def test_every_command_shown_is_run_here_or_says_why_not() -> None:
    shown = {item.command for item in shown_commands() if not item.printed}
    assert shown - CHECKS.keys() - NOT_RUN.keys() == set(), "a command no test runs"
    assert (CHECKS.keys() | NOT_RUN.keys()) - shown == set(), "a command the docs no longer show"


@pytest.mark.parametrize("check", sorted(set(CHECKS.values()), key=lambda check: check.__name__),
                         ids=lambda check: check.__name__)
def test_the_commands_shown_run_as_documented(check: Callable[[Path], None], tmp_path: Path) -> None:
    check(_project(tmp_path))


# --- console blocks: the command, run from the repository's root, prints what the block shows ----------------------

PRINTED = {  # the exit code each shown command ends with
    "pitfall-lint check fixtures/": 1,
    "pitfall-lint check --preview fixtures/projects/imported-module-base/bad fixtures/projects/guard-in-caller/bad": 1,
    "cd tests/verify_cases/realistic/dp_project && pitfall-lint verify train.py -- --epochs 1": 1,
}


def _printed_pattern(lines: tuple[str, ...]) -> re.Pattern[str]:
    """What the block shows as a pattern of whole lines: a `...` line for any lines, `...` in a line for any text,
    and a duration (`2.9 s`) for any duration, which each run measures anew."""
    parts = []
    for line in lines:
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pieces = re.split(r"(\.\.\.|\b\d+\.\d+ s\b)", line)
        parts.append("".join(
            "[^\n]*" if piece == "..." else r"\d+\.\d+ s" if re.fullmatch(r"\d+\.\d+ s", piece) else re.escape(piece)
            for piece in pieces
        ) + "\n")
    return re.compile("".join(parts))


def _console_samples() -> list[Shown]:
    return [item for item in shown_commands() if item.printed]


def test_every_console_sample_has_its_exit_code() -> None:
    assert {item.command for item in _console_samples()} == PRINTED.keys()


@pytest.mark.parametrize("command", sorted(PRINTED))
def test_the_console_samples_are_what_the_commands_print(command: str) -> None:
    """Run once from the repository's root; every sample of the command, on every page, matches what it printed."""
    if "verify" in command and _needs_torch().cuda.device_count() >= 2:
            pytest.skip("the sample shows a run on virtual CUDA devices; this machine has real ones")
    result = _shell(command, REPO)
    assert result.returncode == PRINTED[command], result.stderr
    samples = [sample for sample in _console_samples() if sample.command == command]
    mismatched = [sample.page for sample in samples if not _printed_pattern(sample.printed).fullmatch(result.stdout)]
    assert mismatched == [], result.stdout


# --- the site and the configuration blocks -------------------------------------------------------------------------


def test_ci_builds_the_site_in_strict_mode() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r'^mkdocs build --strict --site-dir "\$site"$', ci, re.MULTILINE)
    assert 'pip install --quiet -e ".[docs]"' in ci


def test_the_configuration_example_is_a_valid_configuration(tmp_path: Path) -> None:
    """The `[tool.pitfall-lint]` blocks of the docs, each as a project's pyproject.toml, are read without an error."""
    examples = [body for text in pages().values() for language, body in FENCED_BLOCK.findall(text)
                if language == "toml" and "[tool.pitfall-lint]" in body]
    assert examples
    for number, example in enumerate(examples):
        (tmp_path / str(number)).mkdir()
        project = _project(tmp_path / str(number))
        (project / "pyproject.toml").write_text(example)
        result = _shell("pitfall-lint check --show-files", project)
        assert (result.returncode, result.stdout, result.stderr) == (0, "train.py\n", ""), example
