"""The run's enclosure: nothing it writes reaches the user's folders, nothing it starts outlives verify.

The parent describes it (`Enclosure`); a small launcher, `python -S -m pitfall_lint.harness.sandbox SPEC --
COMMAND...`, builds it before running the command: it dies with verify (PR_SET_PDEATHSIG), takes a mount
namespace with a copy-on-write overlay on every folder a program may write to (`seal_set`: the project, the
working folder, the home folder, their parents, any absolute path) and a private /dev/shm, a network namespace with loopback only, and a PID namespace whose first
process reaps everything and takes every other process with it when it ends. Where the folders cannot be
sealed in place the run works in a scratch copy of the project and the working folder, with an empty home
folder (`Enclosure.copy`), and its processes still die with their parents.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pitfall_lint.files import DEFAULT_EXCLUDED_DIRECTORIES
from pitfall_lint.harness import isolation

SEAL_UNAVAILABLE = 213  # the launcher's exit status when it could not seal the folders: run in a copy instead
UNSEALED_NO_NAMESPACES = "namespaces are not permitted here"
_COPY_LIMIT_BYTES = 512 * 1024**2
_IGNORED_WRITES = ("__pycache__",)
_RUNTIME_FOLDERS = ("/proc", "/sys", "/dev", "/run")  # the system's: kernel views, devices, sockets and locks
_SHARED_TEMPORARY = ("/tmp", "/var/tmp")  # every program's temporary files and sockets, not the user's tree


@dataclass
class Enclosure:
    scratch: Path
    sealed: list[str]  # the run's folders and the home folder, outermost only (as the report names them)
    layers: list[str]  # every folder made copy-on-write: these and all others a program may write to (`seal_set`)
    copied: list[str]  # where they cannot be: the run's folders copied, outermost only (the home one is replaced)
    loopback_only: bool = True
    copy_root: Path | None = None  # where the run's folders were copied when they could not be sealed in place
    unsealed: str = ""  # why they could not be
    status: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def around(cls, scratch: Path, folders: list[str], home: str, loopback_only: bool) -> Enclosure:
        """Seals the run's folders (the project, the working folder), the home folder, and every other folder a
        program may write to."""
        sealed = _outermost([*folders, home], scratch)
        return cls(scratch, sealed, seal_set(scratch, sealed), _outermost(folders, scratch), loopback_only)

    def spec(self, cwd: str) -> Path:
        layers = []
        for index, folder in enumerate([] if self.copy_root else self.layers):
            upper, work = self.scratch / "layers" / str(index) / "upper", self.scratch / "layers" / str(index) / "work"
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            layers.append({"folder": folder, "upper": str(upper), "work": str(work)})
        spec = {
            "parent": os.getpid(), "layers": layers, "loopback_only": self.loopback_only, "cwd": cwd,
            "status": str(self.scratch / "enclosure.json"), "scratch": str(self.scratch),
        }
        path = self.scratch / "enclosure-spec.json"
        path.write_text(json.dumps(spec))
        return path

    def command(self, command: list[str], cwd: str) -> list[str]:
        return [sys.executable, "-S", "-m", "pitfall_lint.harness.sandbox", str(self.spec(cwd)), "--", *command]

    def read_status(self) -> None:
        try:
            self.status = json.loads((self.scratch / "enclosure.json").read_text())
        except (OSError, ValueError):
            self.status = {}

    # --- where the folders cannot be sealed in place: a copy ---

    def copy(self, reason: str) -> None:
        """Copies the run's folders into the scratch folder (the caller runs the program there, with an empty home
        folder), since they cannot be sealed in place for `reason`."""
        self.copy_root, self.unsealed = self.scratch / "tree", reason
        total = 0
        for folder in self.copied:
            for directory, subdirectories, files in os.walk(folder):
                subdirectories[:] = [d for d in subdirectories if d not in DEFAULT_EXCLUDED_DIRECTORIES]
                target = self.inside(directory)
                os.makedirs(target, exist_ok=True)
                for name in files:
                    source = os.path.join(directory, name)
                    if os.path.islink(source) or not os.path.isfile(source):
                        continue
                    total += os.path.getsize(source)
                    if total > _COPY_LIMIT_BYTES:
                        raise OSError(
                            f"namespaces are not permitted here and {folder} holds more than "
                            f"{_COPY_LIMIT_BYTES // 1024**2} MiB to copy; run verify where user namespaces are allowed"
                        )
                    shutil.copy2(source, os.path.join(target, name))

    def inside(self, path: str) -> str:
        """Where a path of the user's tree lies in the copy (unchanged when there is no copy)."""
        if self.copy_root is None:
            return path
        real = os.path.realpath(path)
        if any(_inside(real, f) for f in self.copied):
            return str(self.copy_root) + real
        return path

    def outside(self, path: str) -> str:
        """The user's path for a path of the copy."""
        if self.copy_root is not None and path.startswith(str(self.copy_root) + "/"):
            return path[len(str(self.copy_root)):]
        return path

    def written(self) -> list[str]:
        """What the run wrote (or deleted) in the sealed folders, as paths of the user's tree."""
        found = []
        if self.copy_root is not None:
            for folder in self.copied:
                copied = self.inside(folder)
                for directory, subdirectories, files in os.walk(copied):
                    subdirectories[:] = [d for d in subdirectories if d not in _IGNORED_WRITES]
                    for name in files:
                        mine = os.path.join(directory, name)
                        theirs = self.outside(mine)
                        if not os.path.exists(theirs) or _changed(mine, theirs):
                            found.append(theirs)
            return sorted(found)
        for index, folder in enumerate(self.layers):
            upper = self.scratch / "layers" / str(index) / "upper"
            for directory, subdirectories, files in os.walk(upper):
                subdirectories[:] = [d for d in subdirectories if d not in _IGNORED_WRITES]
                for name in files:
                    path = os.path.join(directory, name)
                    mode = os.lstat(path).st_mode
                    relative = os.path.relpath(path, upper)
                    deleted = stat.S_ISCHR(mode)  # an overlay whiteout
                    found.append(os.path.join(folder, relative) + (" (deleted)" if deleted else ""))
        return sorted(found)


def remove_scratch(folder: str | Path) -> None:
    """Deletes the scratch folder whole, whatever modes were left in it: an overlay's work folder of mode 000, a
    read-only tree the script unpacked. Root removes them as they are; their owner first gives itself the rights."""
    shutil.rmtree(folder, ignore_errors=True)
    if not os.path.lexists(folder):
        return
    with contextlib.suppress(OSError):
        os.chmod(folder, stat.S_IRWXU)
    for directory, subdirectories, _ in os.walk(folder):  # top-down: each folder opened after its mode is set
        for name in subdirectories:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, stat.S_IRWXU)
    shutil.rmtree(folder, ignore_errors=True)


def seal_set(scratch: Path, run_folders: list[str]) -> list[str]:
    """Every folder a program may write to, in as few overlays as cover them: not only the run's own folders, since a
    script writes wherever its paths lead ('../result/log.txt' from a flat src/, an absolute path, the home folder).
    A folder is sealed whole unless it holds the scratch folder or a mount point (an overlay cannot hold its own
    upper layer, and would hide the mount): then each of its sub-folders is, in turn. Left as they are: the system's
    runtime folders, read-only mounts (a write there fails as it would), and, in the shared temporary folders (the
    one that holds the scratch, /tmp, /var/tmp), what does not hold the run's folders."""
    mounts = _mount_points()
    scratch_real = os.path.realpath(scratch)
    held = {os.path.dirname(scratch_real)} | {os.path.dirname(m) for m, _ in mounts}
    split = {ancestor for folder in held for ancestor in _ancestors(folder)}
    readonly = {m for m, options in mounts if "ro" in options.split(",")}
    shared = {os.path.dirname(scratch_real), *_SHARED_TEMPORARY}
    chosen: list[str] = []

    def visit(folder: str) -> None:
        try:
            entries = sorted(e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False))
        except OSError:
            return  # a folder this user cannot list: nothing in it can be written by the run either
        for path in entries:
            if path in _RUNTIME_FOLDERS or path in readonly or path == scratch_real:
                continue
            if folder in shared and not any(_inside(path, f) or _inside(f, path) for f in run_folders):
                continue
            if path in split or any(c in path for c in ",:\\"):  # an overlay cannot name such a path
                visit(path)
            elif os.access(path, os.X_OK):
                chosen.append(path)

    visit("/")
    return chosen


def _mount_points() -> list[tuple[str, str]]:
    """Each mount point of this mount namespace with its options (/proc/self/mountinfo, octal escapes decoded)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    unescape = (lambda field: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field))
    return [(unescape(fields[4]), fields[5]) for fields in (line.split() for line in lines) if len(fields) > 5]


def _ancestors(folder: str) -> list[str]:
    """The folder and every folder above it, up to /."""
    found = [folder]
    while folder != "/":
        folder = os.path.dirname(folder)
        found.append(folder)
    return found


def _outermost(folders: list[str], scratch: Path) -> list[str]:
    chosen: list[str] = []
    for folder in sorted({os.path.realpath(f) for f in folders if f and os.path.isdir(f)}, key=len):
        if folder == "/" or any(_inside(folder, c) for c in chosen) or _inside(str(scratch), folder):
            continue
        chosen.append(folder)
    return chosen


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _changed(mine: str, theirs: str) -> bool:
    a, b = os.stat(mine), os.stat(theirs)
    return a.st_size != b.st_size or a.st_mtime_ns != b.st_mtime_ns


# --- the launcher, run as `python -S -m pitfall_lint.harness.sandbox SPEC -- COMMAND...` ------------------------


def _enter_namespaces(loopback_only: bool, sealing: bool) -> dict[str, Any]:
    """The strongest set of namespaces this machine permits, and what it got, in words."""
    mounts, pids = isolation.CLONE_NEWNS, isolation.CLONE_NEWPID
    network = isolation.CLONE_NEWNET if loopback_only else 0
    candidates = [mounts | pids | network, mounts | network] + ([] if sealing else [pids | network, network])
    reason = "not tried"
    for flags in candidates:
        try:
            if flags:
                isolation.unshare(flags)
        except OSError as error:
            reason = str(error)
            continue
        got_network = bool(flags & isolation.CLONE_NEWNET)
        return {
            "mounts": bool(flags & mounts), "pids": bool(flags & pids),
            "network": "loopback-only network namespace" if got_network else _no_network(loopback_only, reason),
        }
    return {"mounts": False, "pids": False, "network": _no_network(loopback_only, reason)}


def _no_network(loopback_only: bool, reason: str) -> str:
    if not loopback_only:
        return "the machine's network (--allow-network)"
    return f"unavailable ({reason}); torch's rendezvous store listened on all interfaces"


def _seal(layers: list[dict[str, str]], cwd: str) -> None:
    isolation.make_mounts_private()
    for layer in layers:
        isolation.overlay(layer["folder"], layer["upper"], layer["work"])
    try:
        isolation.private_tmpfs("/dev/shm")
    except OSError:
        pass  # no /dev/shm to hide: nothing of the run is left there either
    os.chdir(cwd)  # through the overlay: the old working folder is the one below it


def _pass_on(child: int, number: int) -> None:
    """A signal sent to our process group reached the child too: a second one would interrupt the stack dump it
    writes on SIGTERM (faulthandler chains with SA_NODEFER), so only a child of another group gets it from us."""
    try:
        if os.getpgid(child) != os.getpgrp():
            os.kill(child, number)
    except ProcessLookupError:
        pass


def _init(command: list[str]) -> int:
    """PID 1 of the run's namespace: starts the command, passes on termination, reaps every orphan."""
    isolation.die_with_parent(signal.SIGKILL)
    try:
        isolation.fresh_proc()
    except OSError:
        pass
    child = os.fork()
    if child == 0:
        os.execvp(command[0], command)

    def forward(number: int, frame: Any) -> None:
        _pass_on(child, number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, forward)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    command = argv[argv.index("--") + 1:]
    isolation.die_with_parent(signal.SIGTERM)  # handled below: the launcher cleans up after a killed verify
    if os.getppid() != spec["parent"]:
        return 1  # verify is already gone
    status = _enter_namespaces(spec["loopback_only"], bool(spec["layers"]))
    if spec["layers"]:
        if not status["mounts"]:
            status["sealed"] = UNSEALED_NO_NAMESPACES
        else:
            try:
                _seal(spec["layers"], spec["cwd"])
                status["sealed"] = "overlay"
            except OSError as error:
                status["sealed"] = f"an overlay could not be mounted here: {error.strerror or error}"
        if status["sealed"] != "overlay":
            Path(spec["status"]).write_text(json.dumps(status))
            return SEAL_UNAVAILABLE
    if status["network"].startswith("loopback"):
        isolation.bring_up_loopback()
    Path(spec["status"]).write_text(json.dumps(status))
    child = os.fork()
    if child == 0:
        if status["pids"]:
            os._exit(_init(command))
        os.execvp(command[0], command)

    def on_signal(number: int, frame: Any) -> None:
        if os.getppid() == spec["parent"]:
            _pass_on(child, number)  # verify stops the run: the command winds down
            return
        # verify itself was killed: take the run and the scratch folder with it.
        os.kill(child, signal.SIGKILL)  # PID 1 of the namespace: the kernel kills the rest
        remove_scratch(spec["scratch"])
        if not status["pids"]:
            os.killpg(0, signal.SIGKILL)  # the process group, this launcher included
        os._exit(1)

    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, on_signal)
    while True:
        try:
            _, wait_status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            return 1
    code = os.waitstatus_to_exitcode(wait_status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
