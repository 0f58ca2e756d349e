"""The agent's stderr: passed through to ours as it comes, its tail kept for the client; and
the agent's stray stdout lines the bridge shows there instead of forwarding them.

Owns: copying the agent's stderr to the bridge's without stalling the relay, the last few
KiB of it, masked, for the errors the bridge answers with, and `StrayLines`. Must never:
let a slow or closed stderr of ours stop the relay, or send an unmasked secret to the client.
"""

from __future__ import annotations

import errno

import trio

from acp_bridge.shell import posix

STDERR_TAIL_BYTES = 4096


class StderrTail:
    """The last few KiB the agent wrote to stderr, for the errors the bridge answers with."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self.limit = limit
        self._data = bytearray()
        self._dropped = False  # some of the stderr is gone: the tail starts mid-line

    def add(self, chunk: bytes | bytearray) -> None:
        self._data += chunk
        if len(self._data) > 2 * self.limit:
            del self._data[: len(self._data) - self.limit]
            self._dropped = True

    def text(self, private: str | None = None) -> str:
        """The tail, whole lines where possible, with secrets masked: it goes to the client."""
        if not self._data:  # nothing to mask: most agents end without a word on stderr, and
            return ""  # then a run does not load the masking (capture.text_redaction) at all
        data = bytes(self._data[-self.limit :])
        if self._dropped or len(self._data) > self.limit:
            cut = data.find(b"\n")
            data = data[cut + 1 :] if 0 <= cut < len(data) - 1 else data
        return mask_secrets(data.decode("utf-8", "replace"), private)


def mask_secrets(text: str, private: str | None = None) -> str:
    """Text that leaves the bridge (bridge-rules 5) masked as the capture masks it: secret-
    looking values and the configured system prompt (`capture.text_redaction.mask_text_secrets`)."""
    from acp_bridge.capture.text_redaction import mask_text_secrets  # as the agent ends, not at start-up

    return mask_text_secrets(text, private)


async def pass_stderr(source: trio.abc.ReceiveStream, tail: StderrTail, fd: int, done: trio.Event) -> None:
    """Copy the agent's stderr to ours as it comes, keeping its tail.

    The writes run in a thread: our stderr may be a terminal or a pipe that is slow to
    drain, and a blocking write must not stall the relay (FdStream would instead make the
    shared file description non-blocking for everyone else writing to it).
    """
    try:
        while chunk := await source.receive_some(65536):
            tail.add(chunk)
            try:
                await trio.to_thread.run_sync(posix.write_all, fd, chunk)
            except OSError as exc:
                if exc.errno not in (errno.EPIPE, errno.EBADF):
                    raise
    finally:
        done.set()


STRAY_WAITING_LIMIT = 256 * 1024  # bytes of diverted lines waiting for our stderr, at most


class StrayLines:
    """The agent's stdout lines diverted to our stderr (`[relay] stray_output = "stderr"`),
    written by `run` in a worker thread: `put` never waits, so a stderr that is slow or not
    read never holds up the relay. Past `limit` bytes waiting, a line is dropped and
    counted; `aclose` says how many, after the rest."""

    def __init__(self, fd: int, limit: int = STRAY_WAITING_LIMIT) -> None:
        self.fd = fd
        self.limit = limit
        self.dropped = 0
        self._waiting: list[bytes] = []
        self._size = 0
        self._more = trio.Event()
        self._closed = False
        self._done = trio.Event()
        self._scope = trio.CancelScope()

    def __repr__(self) -> str:
        return f"<StrayLines fd={self.fd} waiting={self._size}B dropped={self.dropped}>"

    def put(self, text: str) -> None:
        """Queue one line (without its newline) for our stderr; never blocks."""
        data = (text + "\n").encode("utf-8", "replace")
        if self._closed or self._size + len(data) > self.limit:
            self.dropped += 1
            return
        self._waiting.append(data)
        self._size += len(data)
        self._more.set()

    async def run(self) -> None:
        """Write what is put, until `aclose` (or our stderr is gone: the rest is dropped)."""
        try:
            with self._scope:
                while not (self._closed and not self._waiting):
                    await self._more.wait()
                    self._more = trio.Event()
                    waiting, self._waiting, self._size = self._waiting, [], 0
                    if waiting:
                        await trio.to_thread.run_sync(posix.write_all, self.fd, b"".join(waiting),
                                                      abandon_on_cancel=True)
        except OSError:  # our stderr is gone: nothing more can be shown there
            pass
        finally:
            self._done.set()

    async def aclose(self, timeout: float) -> None:
        """Write what waits, and how many lines were dropped, for at most `timeout` seconds."""
        if self.dropped and not self._closed:
            note = (f"acp-bridge: {self.dropped} more line(s) of the agent's stdout were not forwarded "
                    "and not shown: the bridge's stderr was not taking them")
            self._waiting.append((note + "\n").encode())
        self._closed = True
        self._more.set()
        with trio.move_on_after(timeout):
            await self._done.wait()
        self._scope.cancel()
