"""Launch commands written outside Python: which launcher a shell script, a Makefile or the documentation starts
a script with, and so which local-rank flag the script is given (torch.distributed.launch's `--local-rank`,
DeepSpeed's `--local_rank`, or none: torchrun and accelerate set LOCAL_RANK in the environment only).

The documents are those the walk for Python files meets (files.is_launch_document). Each is read from its text
alone, line by line (a line continued by a backslash is one command): a launcher, its options, then the script
(`train.py`, a path, or `-m package.module`). A script named through a variable (`$SCRIPT`) names no file, and a
command commented out launches nothing.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

# Every launcher spells one of these: a document without them is not read further.
_LAUNCHER_WORDS = (b"torch.distributed.", b"torchrun", b"deepspeed", b"accelerate")

DASHED, UNDERSCORED, NO_FLAG = "--local-rank", "--local_rank", ""
_LAUNCHER = re.compile(
    r"-m\s+(?P<module>torch\.distributed\.(?:launch|run))(?![\w.])"
    r"|(?<![\w.-])(?P<word>torchrun|deepspeed|accelerate\s+launch)(?![\w.-])"
)
# What a launch line ends at: a shell separator, a redirection, the end of inline code, a comment.
_END = re.compile(r"[;|&<>`)]|\s#")
# A value the reader fills in: a shell substitution, or a placeholder of the documentation (`<num-of-gpus>`).
_SUBSTITUTION = re.compile(r"\$\([^()]*\)|\$\{[^}]*\}|\$\w+|\$[@*#?]|<[A-Za-z_][\w./:-]*(?: [\w./:-]+)*>")
# Launcher options that take no value (torch.distributed.launch / torchrun 2.13, DeepSpeed's runner, accelerate).
_FLAGS = frozenset(
    {
        "--standalone", "-m", "--module", "--no-python", "--no_python", "--run-path", "--run_path", "--use-env",
        "--use_env", "--virtual-local-rank", "--virtual_local_rank", "--no_local_rank", "--no_ssh_check",
        "--force_multi", "--elastic_training", "--bind_cores_to_rank", "--no_ssh", "--save_pid", "--multi_gpu",
        "--cpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--debug", "-q", "--quiet",
    }
)
_COMMENT = re.compile(r"(?:^|\s)#", re.MULTILINE)
_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class Launch:
    launcher: str  # as a reader knows it: `python -m torch.distributed.launch`, `torchrun`, `deepspeed`
    passes: str  # the flag the script is given: DASHED, UNDERSCORED or NO_FLAG
    script: str  # the script's path as written (a module's as a path: `pkg/train.py`)
    line: int


def read_launches(data: bytes) -> list[Launch]:
    """Every launch of a Python script the text writes."""
    if not any(word in data for word in _LAUNCHER_WORDS):  # the cheap look first
        return []
    text = data.decode("utf-8", errors="replace")
    # One command over continued lines, at the same offsets (so that a match still tells its line).
    joined = text.replace("\\\r\n", "   ").replace("\\\n", "  ")
    line_starts = [0, *(found.end() for found in re.finditer("\n", text))]
    launches = []
    for found in _LAUNCHER.finditer(joined):
        if _COMMENT.search(text, text.rfind("\n", 0, found.start()) + 1, found.start()):
            continue  # commented out: not how the script is launched (any more)
        end = joined.find("\n", found.end())
        tail = joined[found.end() : end if end >= 0 else len(joined)]
        launch = _launch(found.group("module") or " ".join(found.group("word").split()), tail)
        if launch is not None:
            launcher, passes, script = launch
            launches.append(Launch(launcher, passes, script, bisect.bisect_right(line_starts, found.start())))
    return launches


def _launch(launcher: str, tail: str) -> tuple[str, str, str] | None:
    """(launcher as shown, the flag it passes, the script) of the rest of a launch line, None when no script is
    named there."""
    tail = _SUBSTITUTION.sub("$V", tail)
    cut = _END.search(tail)
    tokens = [t.strip("\"',[]") for t in (tail[: cut.start()] if cut else tail).split()]
    tokens = [t for t in tokens if t]
    options: set[str] = set()
    script = None
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token == "$V":  # options in a variable (`torchrun $DISTRIBUTED_ARGS train.py`)
            index += 1
            continue
        if not token.startswith("-") or token == "-":
            script = token
            break
        name = token.partition("=")[0]
        options.add(name)
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        # An option of unknown kind takes the next word as its value, unless that word is an option or a script.
        takes_value = "=" not in token and name not in _FLAGS and following and not following.startswith("-")
        index += 2 if takes_value and not following.endswith(".py") else 1
    if script is None:
        return None
    if options & {"-m", "--module"}:
        if not _MODULE.fullmatch(script):
            return None
        script = script.replace(".", "/") + ".py"
    elif not script.endswith(".py") or options & {"--no-python", "--no_python"}:
        return None
    if launcher == "torch.distributed.launch":
        passes = NO_FLAG if options & {"--use-env", "--use_env"} else DASHED
    elif launcher == "deepspeed":
        passes = NO_FLAG if "--no_local_rank" in options else UNDERSCORED
    else:
        passes = NO_FLAG
    shown = f"python -m {launcher}" if launcher.startswith("torch.") else launcher
    return shown, passes, script
