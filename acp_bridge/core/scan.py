"""The relay's chunk-wide byte searches: `bytes.find`, through the C library's memmem where
there is one.

Owns: `Finder`, the search for the relay's needles (`"id"`, the rules' triggers) over the
complete lines of one read. CPython's `bytes.find` runs at 0.5-1 ns a byte for these needles;
glibc's memmem (a search on two-byte hashes) at 0.15-0.4 on the same reads (docs/performance-history.md),
and every byte that goes to the client is searched. Must never: read outside the body it was
given, answer anything but what `bytes.find` answers (a property in tests/core/test_scan.py
compares the two paths), or be needed: where memmem cannot be loaded (no glibc: macOS,
Windows, musl), or for an empty needle, it is `bytes.find` itself. The C library is loaded
lazily (ctypes), on the first read long enough to be scanned whole.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_Native = tuple[Callable[..., Any], Callable[[bytes], int]]


@functools.cache
def native() -> _Native | None:
    """memmem and a way to a bytes object's buffer, or None where there is none (loaded
    on the first call)."""
    return _load()


def _load() -> _Native | None:
    try:
        import ctypes

        # By its soname, as tuning.keep_heap does: find_library would run ldconfig.
        memmem = ctypes.CDLL("libc.so.6").memmem
    except (OSError, AttributeError):
        return None
    memmem.restype = ctypes.c_void_p  # an int, or None for NULL
    memmem.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]

    def address(data: bytes) -> int:
        value = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
        assert value is not None
        return value

    return memmem, address


class Finder:
    """`body.find(needle, start)` for one body, searched for several needles from several
    starts. It holds `body`, so the buffer memmem reads stays alive as long as it does."""

    __slots__ = ("_base", "_memmem", "body", "size")

    def __init__(self, body: bytes, *, use_native: bool = True) -> None:
        self.body = body
        self.size = len(body)
        found = native() if use_native and type(body) is bytes else None
        self._memmem = None if found is None else found[0]
        self._base = 0 if found is None else found[1](body)

    def __repr__(self) -> str:
        return f"<Finder {self.size}B native={self._memmem is not None}>"

    @property
    def is_native(self) -> bool:
        return self._memmem is not None

    def find(self, needle: bytes, start: int = 0) -> int:
        """`self.body.find(needle, start)`."""
        memmem = self._memmem
        if memmem is None or not needle or start < 0:
            return self.body.find(needle, start)
        room = self.size - start
        if room < len(needle):
            return -1
        hit = memmem(self._base + start, room, needle, len(needle))
        return -1 if hit is None else int(hit) - self._base
