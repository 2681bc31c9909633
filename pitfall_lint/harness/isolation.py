"""Linux namespaces for the run, through libc: a network of its own with only `lo` (torch's TCPStore listens on
every interface), a mount table of its own (copy-on-write layers over the user's folders), and a PID
namespace of its own (when its first process dies, the kernel kills every other one)."""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x2, 0x4, 0x8
_MS_REC, _MS_PRIVATE = 0x4000, 0x40000
_PR_SET_PDEATHSIG = 1
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sH22x"  # struct ifreq: interface name, then the flags in the union
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def unshare(flags: int) -> None:
    """Enters new namespaces; an unprivileged user does it inside a user namespace of its own."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _check(_libc.unshare(flags))
        return
    _check(_libc.unshare(flags | CLONE_NEWUSER))
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def die_with_parent(signal_number: int) -> None:
    """PR_SET_PDEATHSIG: the kernel sends `signal_number` to this process when its parent dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal_number, 0, 0, 0)


def mount(source: str | None, target: str, kind: str | None, flags: int = 0, data: str | None = None) -> None:
    encode = (lambda text: text.encode() if text is not None else None)
    _check(_libc.mount(encode(source), encode(target), encode(kind), ctypes.c_ulong(flags), encode(data)))


def make_mounts_private() -> None:
    """Mounts made from now on stay in this namespace (systemd makes / shared)."""
    mount(None, "/", None, _MS_REC | _MS_PRIVATE)


def overlay(folder: str, upper: str, work: str) -> None:
    """`folder` becomes copy-on-write: reads see it, writes land in `upper`."""
    for path in (folder, upper, work):
        if any(c in path for c in ",:\\"):
            raise OSError(f"an overlay cannot name {path!r} (a comma, colon or backslash in the path)")
    mount("overlay", folder, "overlay", 0, f"lowerdir={folder},upperdir={upper},workdir={work}")


def private_tmpfs(folder: str) -> None:
    mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777")


def fresh_proc() -> None:
    """/proc of the new PID namespace, so that `ps` inside shows the run's processes only."""
    mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def bring_up_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))
