"""The one hash the cache keys and fingerprints use: BLAKE2b from CPython's own module, which hashlib re-exports after
loading OpenSSL (2.5 ms of every run that reads a cache, a fortieth of a pre-commit run)."""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

__all__ = ["blake2b"]
