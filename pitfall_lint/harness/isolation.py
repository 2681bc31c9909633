"""Loopback-only networking for the children: torch's TCPStore listens on every interface, so the
harness gives the run a network namespace of its own in which the only interface is `lo`."""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sH22x"  # struct ifreq: interface name, then the flags in the union


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _bring_up_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def enter_loopback_only_namespace() -> None:
    """Runs in the child between fork and exec (subprocess's preexec_fn)."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _unshare(_CLONE_NEWNET)
    else:  # an unprivileged user may still own a user namespace, and a network namespace in it
        _unshare(_CLONE_NEWUSER | _CLONE_NEWNET)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _bring_up_loopback()
