"""Why a run said nothing about a finding, in one line the user can act on: where the script exited and with
what, the package it needs, the data it lacks, the rank that waited and for what."""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pitfall_lint.analysis.scopes import is_main_guard
from pitfall_lint.harness.probes.base import last_line
from pitfall_lint.harness.record import RunRecord

NEEDS_CUDA = re.compile(
    r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available|invalid device ordinal"
    r"|CUDA driver version is insufficient|no attribute '_cuda_setDevice'|ProcessGroupNCCL is only supported with GPUs"
)
# How the stop of a run that verify ended at its step budget begins (the monitor's words, read back here).
BUDGET_ENDED = "the step budget ended the run"
# How the stop of a run that made no optimizer step at the script's own large batch size begins (the monitor's words).
NO_STEP_YET = "no optimizer step had finished"
SMALL_BATCH = 8
# A device index past the virtual devices of the run (virtual_cuda's words).
_BEYOND_VIRTUAL = re.compile(r"\[pitfall-lint: (?P<count>\d+) virtual devices, asked for (?P<index>\d+)\]")
# Raised by launchers when a child failed: never the cause, always the echo of another failure.
# SignalException: torch's launcher turning the SIGTERM of a stopped run into an exception.
ECHOES = frozenset({"ChildFailedError", "ProcessExitedException", "ProcessRaisedException", "KeyboardInterrupt",
                    "SignalException"})
# Import names whose distribution is called otherwise.
_DISTRIBUTIONS = {
    "cv2": "opencv-python", "PIL": "pillow", "sklearn": "scikit-learn", "skimage": "scikit-image", "yaml": "pyyaml",
    "bs4": "beautifulsoup4", "attr": "attrs", "dateutil": "python-dateutil", "google.protobuf": "protobuf",
    "tensorboardX": "tensorboardX", "torch_geometric": "torch-geometric", "apex": "apex (NVIDIA's, built from source)",
}
_NETWORK = re.compile(
    r"Name or service not known|Temporary failure in name resolution|Network is unreachable|No route to host"
    r"|urlopen error|Max retries exceeded|offline mode is enabled|HF_HUB_OFFLINE|Failed to establish a new connection"
    r"|ConnectionError|getaddrinfo failed"
)
# A collective's wait ended by the process-group timeout, and the peers' errors that follow it.
_COLLECTIVE_WAIT_ENDED = re.compile(r"Timed out waiting|Watchdog caught collective operation timeout|Connection closed by "
                                    r"peer|Connection reset by peer")
# A rank's error that only says a peer went away: where another rank was killed by a signal, that kill is the cause.
_PEER_LOST = re.compile(r"connectFullMesh failed|Connection closed by peer|Connection reset by peer|remote worker crash")
_FILE_CHECK = re.compile(r"\b(exists|isfile|isdir)\(")
_GPU_ONLY = frozenset({"apex", "flash_attn", "xformers", "triton", "bitsandbytes", "deepspeed", "nvidia", "pynvml", "cupy"})


# How a run that verify's --timeout stopped begins its reason: it did not finish, or it was still stepping.
TIMED_OUT = ("the run did not finish within", "the run was still going after")


@dataclass(frozen=True)
class Stop:
    """Where a run stopped short of its end, and what to do about it."""

    text: str  # "the script exited at train.py:88 with 'error: ...'"
    hint: str = ""  # "pass them after `--`: pitfall-lint verify train.py -- EPOCHS SAVE_EVERY"
    error: int | None = None  # the index in RunRecord.errors of the failure that ended the run
    place: dict[str, Any] | None = None  # where the script exited by itself, when it did

    def sentence(self) -> str:
        return f"{self.text}; {self.hint}" if self.hint else self.text


def _where(place: dict[str, Any] | None) -> str:
    if not place or not place.get("file"):
        return ""
    if place.get("cell"):
        return f" at {shown_path(place['file'])}:cell {place['cell']}:{place['cell_line']}"
    return f" at {shown_path(place['file'])}:{place['line']}"


@dataclass(frozen=True)
class BeyondDevices:
    """A CUDA device index the code asked for past the virtual devices of its run: how many it had, how many the
    index needs, and where it asked."""

    count: int
    wanted: int
    where: str


def beyond_devices(errors: list[dict[str, Any]], run: RunRecord) -> BeyondDevices | None:
    """Where the run's unexplained errors ask for a device index beyond the virtual ones: the devices the highest index
    needs, or the ranks' process group where it is larger (one device a rank; which ranks fail first is a race)."""
    asked = [(int(m["count"]), int(m["index"]) + 1, _where(e.get("user_frame")))
             for e in errors if (m := _BEYOND_VIRTUAL.search(e.get("message") or ""))]
    if not asked:
        return None
    count, wanted, where = max(asked, key=lambda a: a[1])
    groups = [int(size) for e in run.of("group-joining") if str(size := e.get("world_size")).isdigit()]
    return BeyondDevices(count, max([wanted, *groups]), where)


def shown_path(path: str) -> str:
    """A path as the reports print it: relative to the working folder when inside it."""
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else path


def first_cause(run: RunRecord, ignoring: frozenset[int] | set[int] = frozenset()) -> dict[str, Any] | None:
    errors = [e for i, e in enumerate(run.errors) if i not in ignoring]
    causes = [e for e in errors if e.get("type") not in ECHOES]
    if causes or run.timed_out or run.stopped:
        return causes[0] if causes else None
    return errors[0] if errors else None


def final_statement(tree: ast.Module) -> range:
    """The lines of the program's last statement (inside a closing main guard): `sys.exit(main())` there is its end."""
    body = tree.body
    while body:
        last = body[-1]
        if isinstance(last, ast.If) and is_main_guard(last.test) and last.body:
            body = last.body
            continue
        return range(last.lineno, (last.end_lineno or last.lineno) + 1)
    return range(0)


def ended_by_verifys_collective_timeout(run: RunRecord) -> set[int]:
    """The errors (indices in run.errors) of the collective waits that verify's own short process-group timeout ended:
    it sets one for PFL207's probe, so that a hang ends in seconds, and a rank merely slower than that (an evaluation
    on rank 0 while the others wait at a barrier) is stopped by it too. Empty when verify set none."""
    if not run.of("collective-timeout"):
        return set()
    ended = {i for i, e in enumerate(run.errors) if _COLLECTIVE_WAIT_ENDED.search(e.get("message") or "")}
    timed_out = any("imed out" in (run.errors[i].get("message") or "") for i in ended)
    return ended if timed_out else set()


def _collective_timeout(run: RunRecord, error: dict[str, Any]) -> Stop:
    seconds = next(e["seconds"] for e in run.of("collective-timeout"))
    frame = error.get("user_frame") or {}
    waiter = f"rank {error['rank']}'s" if error.get("rank") is not None else "a"
    code = f" in `{frame['code'].strip()}`" if frame.get("code") else ""
    return Stop(f"verify's own {seconds:g} s process-group timeout (set to end a PFL207 hang in seconds) ended {waiter} "
                f"wait{_where(frame)}{code}: another rank took longer to get there, which is slow work, not "
                "necessarily a hang (not a failure of the code)",
                "to run it without that timeout, leave PFL207 out: --ignore PFL207")


def stop_point(run: RunRecord, script_path: str, project_root: str, network_closed: bool = True,
               timeout: float = 0.0, final: range = range(0)) -> Stop | None:
    """Why the run ended before its end, or None when every process ran to its end."""
    if run.stopped:
        return _budget_end(run) if run.stopped.startswith(BUDGET_ENDED) else Stop(run.stopped)
    refused = run.of("arguments-refused")
    if refused:
        return _refused_arguments(refused[0], run, script_path, project_root)
    after_the_end = crashed_after_the_end(run)
    error = first_cause(run, ignoring=set(after_the_end))
    ended = ended_by_verifys_collective_timeout(run)
    if error is not None and run.errors.index(error) in ended:
        waited = min(i for i in ended if "imed out" in (run.errors[i].get("message") or ""))  # the wait that timed out
        return replace(_collective_timeout(run, run.errors[waited]), error=waited)
    if error is not None and _PEER_LOST.search(error.get("message") or ""):
        error = next((e for i, e in enumerate(run.errors) if i not in after_the_end and _killed_rank(e)), error)
    if error is not None:
        stop = _killed(error, run) or _crash(error, project_root, network_closed, script_path)
        return replace(stop, error=run.errors.index(error))
    if run.timed_out:
        return _timeout(run, timeout)
    early = [e for e in run.of("exit") if e.get("status") == "exit" and (e.get("code") or e.get("message")
                                                                        or not _at_the_end(e.get("place"), run.script, final))]
    if early:
        exit_event = early[0]
        said = f"with {exit_event['message']!r}" if exit_event.get("message") else f"with status {exit_event.get('code')}"
        printed = last_line(run.output)
        if not exit_event.get("message") and printed:
            said += f" after printing {printed!r}"
        return Stop(f"the script exited{_where(exit_event.get('place'))} {said}",
                    "if it wants more GPUs, --nproc N gives it N virtual ones" if "gpu" in said.lower() else "",
                    place=exit_event.get("place"))
    if run.returncode not in (0, None) and not after_the_end:
        return Stop(f"the run ended with exit code {run.returncode}" + (f": {last_line(run.output)}" if run.output.strip() else ""))
    return None


# The first failure of torch's launcher's report: "rank : 0 (local_rank: 0)" then "exitcode : -11 (pid: 9)".
_KILLED_RANK = re.compile(r"rank\s*:\s*(?P<rank>\d+)[^\n]*\n\s*exitcode\s*:\s*-(?P<signal>\d+) \(pid: (?P<pid>\d+)\)")


def _killed_rank(error: dict[str, Any]) -> re.Match[str] | None:
    if error.get("type") != "ChildFailedError":
        return None
    return _KILLED_RANK.search((error.get("message") or "").rpartition("Root Cause")[2])


def _signal_name(number: str) -> str:
    try:
        return signal.Signals(int(number)).name
    except ValueError:
        return f"signal {number}"


def crashed_after_the_end(run: RunRecord) -> dict[int, str]:
    """The launcher's reports (indices in run.errors) of a rank killed by a signal after its script had ended, each
    with the sentence that says so: a crash in the interpreter's teardown (gloo's threads finding that a peer has
    already left, a native library's exit), which no line of the program ran into and no finding is about."""
    ended = {e.get("pid") for e in run.of("exit") if e.get("status") == "ok"}
    found = {}
    for index, error in enumerate(run.errors):
        killed = _killed_rank(error)
        if killed is not None and int(killed["pid"]) in ended:
            found[index] = (f"rank {killed['rank']} was killed by {_signal_name(killed['signal'])}"
                            f"{_crash_place(killed, run)} after its script had ended, in the interpreter's teardown "
                            "(native code): torch's launcher reports the run failed; no finding is about it and no line of "
                            "the program was cut short, so verify does not count it as the run's failure")
    return found


def _killed(error: dict[str, Any], run: RunRecord) -> Stop | None:
    """A rank killed by a signal (a crash in native code) leaves only the launcher's report: which rank, which
    signal, and where its Python stack stood, from the dump the crash wrote."""
    killed = _killed_rank(error)
    if killed is None:
        return None
    return Stop(f"rank {killed['rank']} was killed by {_signal_name(killed['signal'])}{_crash_place(killed, run)}: a "
                "crash in native code, with no Python error",
                "run the script once without verify: a crash there too is the code's or a compiled extension's; "
                "none there is verify's")


def _crash_place(killed: re.Match[str], run: RunRecord) -> str:
    """Where the killed process's Python stack stood in the project, from the dump the crash wrote."""
    frames = run.stacks.get(int(killed["pid"]), [])
    inner = next((f for f in frames if os.path.realpath(f["file"]) in run.lines or f["file"] == run.script), None)
    return f"{_where(inner)} in {inner['function']}" if inner else ""


def _at_the_end(place: dict[str, Any] | None, script: str, final: range) -> bool:
    if not place or not place.get("file"):
        return True  # no line of the project stopped it: the interpreter's own exit
    return os.path.realpath(place["file"]) == script and place.get("line") in final


def _refused_arguments(event: dict[str, Any], run: RunRecord, script_path: str, project_root: str) -> Stop:
    exit_event = next((e for e in run.of("exit") if e.get("status") == "exit" and e.get("place")), None)
    place = exit_event.get("place") if exit_event else None
    text = f"the script exited{_where(place)} with 'error: {event['message']}'"
    required = event.get("required") or []
    if not required:
        return Stop(text, f"pass the script's arguments after `--` ({event.get('usage', '')})", place=place)
    documented = _documented_command(run.script, project_root, required)
    if documented is not None:
        source, arguments = documented
        return Stop(text, f"pass them after `--`, as {source} runs it: pitfall-lint verify {script_path} -- "
                          f"{shlex.join(arguments)}", place=place)
    made_up = event.get("made_up") or [n.lstrip("-").upper() if not n.startswith("-") else f"{n} VALUE" for n in required]
    return Stop(text, f"pass them after `--`: pitfall-lint verify {script_path} -- {shlex.join(made_up)} (made-up "
                      "values of the right kind: give your own where they matter)", place=place)


_SHELL_ENDS = frozenset({"|", "||", "&&", ";", ">", ">>", "2>&1", "&", "\\"})


_LAUNCHERS = frozenset({"torchrun", "torch.distributed.run", "torch.distributed.launch"})


def _documented_command(script: str, project_root: str, required: list[str],
                        under_launcher: bool = False) -> tuple[str, list[str]] | None:
    """The arguments of a command line that runs the script (under torchrun, when asked), from its docstring or a
    README between its folder and the project root, when they give every required option; with where they come from."""
    name = os.path.basename(script)
    for source, text in _usage_texts(script, project_root):
        for line in text.splitlines():
            try:
                tokens = shlex.split(line.strip().removeprefix("$ "), comments=True)
            except ValueError:
                continue
            at = next((i for i, token in enumerate(tokens) if os.path.basename(token) == name), None)
            if at is None or (under_launcher and not _LAUNCHERS.intersection(tokens[:at])):
                continue
            arguments = tokens[at + 1:]
            end = next((i for i, token in enumerate(arguments) if token in _SHELL_ENDS), len(arguments))
            arguments = arguments[:end]
            options = [n.split("/") for n in required if n.startswith("-")]
            if arguments and all(any(spelling in arguments or any(a.startswith(f"{spelling}=") for a in arguments)
                                     for spelling in option) for option in options):
                return source, arguments
    return None


def _usage_texts(script: str, project_root: str) -> list[tuple[str, str]]:
    texts = []
    try:
        with open(script, encoding="utf-8") as handle:
            docstring = ast.get_docstring(ast.parse(handle.read()))
    except (OSError, SyntaxError, ValueError):
        docstring = None
    if docstring:
        texts.append((f"{os.path.basename(script)}'s docstring", docstring))
    folder, root = Path(script).parent, Path(os.path.realpath(project_root))
    while True:
        for readme in sorted(folder.glob("README*")):
            try:
                texts.append((shown_path(str(readme)), readme.read_text(encoding="utf-8", errors="replace")))
            except OSError:
                continue
        if folder == root or folder.parent == folder or not folder.is_relative_to(root):
            return texts
        folder = folder.parent


def said(error: dict[str, Any]) -> tuple[str | None, str]:
    """The error's type and message as the code raised it: a replica's or a spawned process's error arrives wrapped,
    carried as "RuntimeError: ..." in the last line of its message."""
    kind, message = error.get("type"), last_line(error.get("message"))
    inner, _, rest = message.partition(": ")
    if rest and inner.isidentifier():
        return inner, rest
    return kind, message


def _crash(error: dict[str, Any], project_root: str, network_closed: bool, script_path: str) -> Stop:
    where = _where(error.get("user_frame"))
    kind, message = said(error)
    if error.get("limit"):
        return Stop(f"verify's own limit{where} (not a failure of the code): {message}")
    code = ((error.get("user_frame") or {}).get("code") or "").strip()
    if kind == "ModuleNotFoundError" and error.get("module"):
        return Stop(f"the script needs the module {error['module']!r}{where}",
                    _install_hint(error["module"], project_root, script_path, _imported_name(code, error["module"])))
    beyond = _BEYOND_VIRTUAL.search(error.get("message") or "")
    if beyond:  # more devices than the run gave, not a missing GPU: more virtual ones will do
        return Stop(f"the code asked for a CUDA device{where} beyond the {beyond['count']} virtual ones of this run",
                    "--nproc N gives it N: pass the number of GPUs it was written for")
    if NEEDS_CUDA.search(error.get("message") or ""):
        return Stop(f"the code needs CUDA, which this run lacks{where} ({kind}: {message})", "run verify on a GPU machine")
    if network_closed and (_NETWORK.search(error.get("message") or "") or _NETWORK.search(kind or "")):
        return Stop(f"the run failed{where} reaching the network, which verify closes: {kind}: {message}",
                    "--allow-network lets it through (downloads land in the enclosure and are discarded), or give the "
                    "script local files")
    if "doesn't have MPI built in" in message:
        return Stop(f"the run failed{where}: the script asks for the mpi backend, which this torch was built without",
                    "use a torch built with MPI, or the gloo backend")
    unset = _unset_variables(kind, message, code)
    if unset:
        text = (f"the run failed{where}: {kind}: {message}: the script reads {' and '.join(unset)} from the environment, "
                f"which {_setter(unset)} sets and this run does not")
        documented = _documented_command(os.path.realpath(script_path), project_root, [], under_launcher=True)
        if documented is not None:
            source, arguments = documented
            return Stop(text, f"run it as {source} runs it under torchrun: pitfall-lint verify {script_path} -- "
                              f"{shlex.join(arguments)}")
        return Stop(text, f"set {'them' if len(unset) > 1 else 'it'} before the command "
                          f"({' '.join(f'{n}=VALUE' for n in unset)} pitfall-lint verify {script_path}), or pass the "
                          "script's own option that starts it under torchrun after `--`")
    if not message and code:
        message = f"`{code}`"  # a bare assert: its line says what failed
    if kind in ("FileNotFoundError", "IsADirectoryError", "NotADirectoryError") or _FILE_CHECK.search(code):
        return Stop(f"the run failed{where}: {kind}: {message}", f"{_DATA_MISSING}; {_GIVE_LOCATION}")
    missing = _missing_path(message)
    if missing is not None:
        return Stop(f"the run failed{where}: {kind}: {message}", f"{_DATA_MISSING}: {missing}; {_GIVE_LOCATION}")
    return Stop(f"the run failed{where}: {kind}: {message}")


_DATA_MISSING = "the data or file it reads is missing here"
_GIVE_LOCATION = "give its location with the script's own options after `--`"
# A message that says something was not found; the path it names must then be absent for the data to be missing.
_NOT_FOUND = re.compile(r"(?i)not found|\bno such\b|\bno\b[\w ]*\bfound\b|found no\b|does(?: not|n't) exist|missing"
                        r"|(?:cannot|can't|could not|couldn't|unable to) (?:find|open|locate|read)")
_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")


def _missing_path(message: str) -> str | None:
    """The path a message says was not found (`No bin files found in data/TinyStories_all_data`), when it names one,
    relative to the run's working folder or absolute, that is absent here: the user's data, not the code, is what is
    missing. A path is a quoted string or a word with a slash in it, and it must be absent on disk: the message's
    words alone never say that data is missing."""
    if not _NOT_FOUND.search(message):
        return None
    quoted = [a or b for a, b in _QUOTED.findall(message)]
    words = [w.strip("'\"`.,;:()[]{}<>") for w in message.split()]
    for candidate in quoted + words:
        if "/" in candidate and "://" not in candidate and not os.path.exists(os.path.expanduser(candidate)):
            return candidate
    return None


_IMPORT = re.compile(r"^\s*(?:from\s+(?P<source>[\w.]+)\s+import\b|import\s+(?P<names>[\w., ]+))")
# `os.environ["X"]`, `os.environ.get("X")`, `os.getenv("X")`: a variable the script expects its launcher to set.
_ENVIRONMENT_READ = re.compile(r"""(?:environ\.get|getenv)\(\s*['"](?P<got>\w+)['"]|environ\[\s*['"](?P<indexed>\w+)['"]\s*\]""")


def _imported_name(code: str, missing: str) -> str:
    """The dotted name the failing import statement asks for (`deeplearning.ssl.moco.builder`), when it begins with the
    module Python could not find; else that module."""
    statement = _IMPORT.match(code)
    if statement is None:
        return missing
    names = [statement["source"]] if statement["source"] else [n.split(" as ")[0].strip() for n in statement["names"].split(",")]
    return next((n for n in names if n == missing or n.startswith(f"{missing}.")), missing)


def _unset_variables(kind: str | None, message: str, code: str) -> list[str]:
    """The environment variables the failing line read and found unset: `int(os.environ.get("SLURM_LOCALID"))` raising
    TypeError on None, `os.environ["SLURM_PROCID"]` raising KeyError."""
    reads = list(_ENVIRONMENT_READ.finditer(code))
    if kind == "KeyError":
        return [m["indexed"] for m in reads if m["indexed"] and message.strip("'\"") == m["indexed"]][:1]
    if kind == "TypeError" and "NoneType" in message:  # verify passes its own environment on: what it has was not None
        return list(dict.fromkeys(m["got"] for m in reads if m["got"] and m["got"] not in os.environ))
    return []


def _setter(names: list[str]) -> str:
    if all(n.startswith("SLURM_") for n in names):
        return "SLURM"
    return "the launcher the script was written for"


def _install_hint(module: str, project_root: str, script_path: str, imported: str) -> str:
    """`module` is the one Python could not find; `imported` the dotted name the failing statement asked for."""
    parts = module.split(".")
    home = _package_home(module, script_path) if len(parts) == 1 else None  # a dotted name: its package was found
    if home is not None:
        return (f"{parts[0]} is the repository's own package ({os.path.join(home, parts[0])}); Python looks for it in "
                f"the script's folder, not in {home}: PYTHONPATH={home} pitfall-lint verify {script_path}")
    asked = imported.split(".")
    for start in range(1, len(asked)):  # `deeplearning.ssl.moco.builder` for the project's moco/builder.py
        tail = os.path.join(project_root, *asked[start:])
        if os.path.exists(tail + ".py") or os.path.exists(os.path.join(tail, "__init__.py")):
            return (f"the project has it as {os.path.relpath(tail, project_root)}, under another package: the script "
                    "expects the layout of the repository it came from (set PYTHONPATH or restore that layout)")
    top = parts[0]
    in_project = os.path.exists(os.path.join(project_root, top)) or os.path.exists(os.path.join(project_root, f"{top}.py"))
    if in_project:
        return (f"{top} is part of the project ({os.path.join(project_root, top)}) but not importable from the script's "
                "folder: run verify from the folder the script expects to start in, or set PYTHONPATH")
    if top in _GPU_ONLY:
        return f"pip install {_DISTRIBUTIONS.get(top, top)} (it may need a GPU machine)"
    return f"pip install {_DISTRIBUTIONS.get(module, _DISTRIBUTIONS.get(top, top))}"


def _package_home(top: str, script_path: str) -> str | None:
    """The folder above the script from which `top` is importable as a package or module of the repository (for
    `deeplearning/ssl/train.py` importing `deeplearning.ssl.moco`: the folder holding `deeplearning`)."""
    script = os.path.realpath(script_path)
    for folder in list(Path(script).parents)[1:]:
        package = folder / top
        if (package / "__init__.py").is_file() or package.with_suffix(".py").is_file() or (
                package.is_dir() and Path(script).is_relative_to(package)):
            return str(folder)
    return None


def batch_to_lower(bounds: list[dict[str, Any]], given: tuple[str, ...]) -> dict[str, Any] | None:
    """The script's batch-size option, when its value is large and the user did not give it (spelt in full, with
    `=`, or abbreviated as argparse allows): the one a run that made no step can be given again smaller."""
    for bound in bounds:
        spellings = bound.get("spellings") or [bound["option"]]
        if "batch" not in bound["option"].lower() or not isinstance(bound["value"], int) or bound["value"] <= SMALL_BATCH:
            continue
        words = [arg.partition("=")[0] for arg in given if arg.startswith("-")]
        if not any(word == s or (word.startswith("--") and s.startswith(word)) for word in words for s in spellings):
            return bound
    return None


def _budget_end(run: RunRecord) -> Stop:
    """The run verify ended at its step budget: what would take it past there, for the lines it did not reach."""
    bounds = [b for e in run.of("arguments") for b in e.get("bounds", []) if "batch" not in b["option"].lower()]
    options = ", ".join(f"{b['option']} (now {b['value']})" for b in bounds[:3])
    further = "--steps 0 and a longer --timeout"
    hint = f"lower the script's own options after `--`: {options}; or {further}" if options else further
    return Stop(run.stopped or BUDGET_ENDED, f"to go further, {hint}")


def _timeout(run: RunRecord, timeout: float) -> Stop:
    joining = {e["pid"]: e for e in run.of("group-joining")}
    joined = {e["pid"] for e in run.of("group-joined")}
    waiting = [e for pid, e in joining.items() if pid not in joined]
    if waiting:
        ranks = sorted({str(e.get("rank")) for e in waiting})
        first = waiting[0]
        return Stop(
            f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(ranks)} waited{_where(first)} to join the process group (world size "
            f"{first.get('world_size')}, {first.get('init_method')}) for ranks that never came",
            "the script's own rendezvous settings (MASTER_ADDR, world size, init_method) disagree with a launch of "
            "N local ranks; a longer --timeout would not help",
        )
    steps = {e.get("rank"): e["step"] for e in run.of("step")}
    places = []
    for pid, frames in sorted(run.stacks.items()):
        inner = next((f for f in frames if os.path.realpath(f["file"]) in run.lines or f["file"] == run.script), None)
        if inner is not None:
            rank = run.rank_of(pid)
            places.append(f"{'rank ' + str(rank) if rank is not None else 'a process'} was{_where(inner)} in {inner['function']}")
    where = f" ({'; '.join(places[:4])})" if places else ""
    bounds = [b for e in run.of("arguments") for b in e.get("bounds", [])]
    if steps:
        options = ", ".join(f"{b['option']} (now {b['value']})" for b in bounds[:4])
        hint = f"lower the work with the script's own options after `--`: {options}" if options else "raise --timeout or lower the script's epochs"
        return Stop(f"{TIMED_OUT[1]} {max(steps.values())} optimizer steps when stopped at {timeout:g} s{where}", hint)
    # No step finished: --steps cannot shorten the first one; the script's batch size can (ImageNet's -b 256 on a CPU).
    batches = [b for b in bounds if "batch" in b["option"].lower() and isinstance(b["value"], int)]
    if batches:
        options = ", ".join(f"{b['option']} (now {b['value']})" for b in batches[:2])
        return Stop(f"{TIMED_OUT[0]} {timeout:g} s, and no optimizer step did{where}",
                    f"lower the work per step with the script's own options after `--`: {options}; or raise --timeout")
    return Stop(f"{TIMED_OUT[0]} {timeout:g} s{where}", "raise --timeout or lower --steps")
