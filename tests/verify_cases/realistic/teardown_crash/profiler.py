"""A compiled profiling extension's Python face (here reached through ctypes): its library handle is released when the
interpreter tears the module down, and this build's release aborts, as a mismatched binary's static destructor does."""

import ctypes


class _Library:
    def __init__(self) -> None:
        self.handle = ctypes.CDLL(None)

    def mark(self, label: str) -> None:
        self.label = label

    def __del__(self) -> None:
        self.handle.abort()


library = _Library()
