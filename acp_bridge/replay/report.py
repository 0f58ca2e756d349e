"""The replay's stderr: report lines written beside the replay, never in its way.

Owns: `Reporter`, a callable taking one report, holding at most `MAX_LINES` lines of at most
`MAX_CHARS` characters (the rest are counted, and the count said at the end, before the
summary lines `close` is given: those are always the last), written by `run()` in a worker
thread. Must never: block the replay on a stderr that is not drained,
end the replay because stderr is closed or broken, or hold unbounded text.
"""

from __future__ import annotations

import os
import select
from collections import deque
from collections.abc import Sequence

import trio

from acp_bridge.core.printable import printable

MAX_LINES = 200
MAX_CHARS = 1000
PREFIX = "acp-bridge replay: "


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:  # a stderr that shares stdout's non-blocking file description
            select.select([], [fd], [])


class Reporter:
    """Report lines for `fd`; call it with a text, run `run()` beside the replay, and
    `await close(linger)` at the end (what is left is written within `linger` seconds)."""

    def __init__(self, fd: int = 2) -> None:
        self.fd = fd
        self.lines = 0
        self.dropped = 0
        self.broken = False  # stderr failed: nothing more is written
        self._pending: deque[bytes] = deque()
        self._busy = False  # a write is under way in the worker thread
        self._changed = trio.Event()

    def __repr__(self) -> str:
        return f"<Reporter lines={self.lines} dropped={self.dropped} broken={self.broken}>"

    def __call__(self, text: str) -> None:
        if self.lines >= MAX_LINES:
            self.dropped += 1
            return
        self.lines += 1
        self._add(text)

    def _add(self, text: str) -> None:
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS] + "…"
        text = printable(text, quote_backslash=False)  # it quotes methods and ids the client sent
        self._pending.append(f"{PREFIX}{text}\n".encode("utf-8", "replace"))
        self._poke()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def run(self) -> None:
        """Write the reports as they come, until cancelled (or stderr fails)."""
        while not self.broken:
            if not self._pending:
                await self._changed.wait()
                continue
            data = b"".join(self._pending)
            self._pending.clear()
            self._busy = True
            try:
                await trio.to_thread.run_sync(_write_all, self.fd, data, abandon_on_cancel=True)
            except OSError:  # closed (EBADF), or nobody reads it (EPIPE): the replay goes on
                self.broken = True
            finally:
                self._busy = False
                self._poke()

    async def close(self, linger: float, last: Sequence[str] = ()) -> None:
        """Say how many reports were left out, then the `last` lines (a summary: never left
        out, however many reports came before), and let `run()` write what is pending,
        waiting at most `linger` seconds for stderr (a write may be blocked on it)."""
        if self.dropped:
            self._add(f"{self.dropped} more report line(s) not shown")
            self.dropped = 0
        for text in last:
            self._add(text)
        with trio.move_on_after(linger):
            while (self._pending or self._busy) and not self.broken:
                await self._changed.wait()
