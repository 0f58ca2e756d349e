"""The capture writer (trio): Forward batches in from the pumps, JSONL records out to a file.

Owns: creating the capture file (mode 0600, parent directories made), the header and trailer
records, the task that drains the capture channel with one write per batch, and what happens
when the file cannot be written (said once, capture stops, relay goes on; or `CaptureError`
when `capture.required`). Must never: hold a record back (each batch is handed to the OS as it
arrives, so a SIGKILLed bridge leaves valid JSONL), or make a capture failure stop the relay
unless the configuration says it must.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

from acp_bridge.bridge import CaptureBatch
from acp_bridge.config import Config, capture_path
from acp_bridge.core.capture import CaptureEncoder, Redactor, dumps, header_record
from acp_bridge.errors import CaptureError

log = logging.getLogger("acp_bridge.capture")

# Batches (one per read) the pumps may be ahead of the writer before they wait for it.
BUFFER_BATCHES = 64


class CaptureFile:
    """An open capture: the file descriptor, its encoder, and whether it still works.

    Writes are plain `os.write` calls on the event loop thread: a regular file write lands in
    the page cache and returns at once, and a thread hop per batch would cost more than it
    saves. Nothing is buffered in Python, so whatever was written survives a SIGKILL.
    """

    def __init__(self, path: str, fd: int, encoder: CaptureEncoder, required: bool) -> None:
        self.path = path
        self.fd: int | None = fd
        self.encoder = encoder
        self.required = required
        self.written = 0  # bytes

    def __repr__(self) -> str:
        return f"<CaptureFile {self.path} written={self.written} open={self.fd is not None}>"

    @classmethod
    def create(cls, path: str, encoder: CaptureEncoder, required: bool) -> CaptureFile:
        """Create (or truncate) `path` with mode 0600. Raises OSError."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            # Only a missing directory is made (private, like the file); any other reason
            # the open failed is the one worth reporting.
            os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
            fd = os.open(path, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_TRUNC
        except OSError:
            os.close(fd)
            raise
        return cls(path, fd, encoder, required)

    def write(self, data: bytes) -> bool:
        """Write all of `data`; on failure say so once and stop (or raise when required)."""
        if self.fd is None:
            return False
        view = memoryview(data)
        try:
            while view:
                done = os.write(self.fd, view)
                view = view[done:]
                self.written += done
        except OSError as exc:
            self.fail(exc)
            return False
        return True

    def fail(self, exc: OSError) -> None:
        self.close()
        reason = exc.strerror or str(exc)
        if self.required:
            raise CaptureError(f"capture: cannot write {self.path}: {reason} (capture.required is set)") from exc
        log.error("capture: cannot write %s: %s; capture stopped, relaying goes on", self.path, reason)

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.close(fd)
            except OSError:  # pragma: no cover - nothing left to report it to
                pass

    async def drain(self, receive: trio.MemoryReceiveChannel[CaptureBatch]) -> None:
        """Write every batch as it arrives until the channel ends; then the trailer.

        Cancelled (the bridge is going down hard), it still writes what is already queued:
        that takes no waiting, because the writes are synchronous.
        """
        with receive:
            try:
                async for wall, mono, forwards in receive:
                    if not self.write(self.encoder.encode_batch(wall, mono, forwards)):
                        return  # closing `receive` tells the pumps to stop capturing
            finally:
                self._drain_nowait(receive)
                if self.fd is not None:
                    self.write(self.encoder.trailer(time.time(), time.monotonic()))
                self.close()

    def _drain_nowait(self, receive: trio.MemoryReceiveChannel[CaptureBatch]) -> None:
        while self.fd is not None:
            try:
                wall, mono, forwards = receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            self.write(self.encoder.encode_batch(wall, mono, forwards))


def start_capture(config: Config, *, argv: Sequence[str] | None = None,
                  wall: float | None = None, mono: float | None = None,
                  pid: int | None = None) -> CaptureFile | None:
    """Open the capture file and write its header; None when it cannot be (said once)."""
    assert config.capture.path is not None
    wall = time.time() if wall is None else wall
    mono = time.monotonic() if mono is None else mono
    pid = os.getpid() if pid is None else pid
    path = capture_path(config.capture.path, wall, pid)
    secret = None if config.capture.include_system_prompt else config.system_prompt.text
    encoder = CaptureEncoder(Redactor(config.capture.redact, secret))
    try:
        capture = CaptureFile.create(path, encoder, config.capture.required)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if config.capture.required:
            raise CaptureError(f"capture: cannot create {path}: {reason} (capture.required is set)") from exc
        log.error("capture: cannot create %s: %s; relaying without a capture", path, reason)
        return None
    header = header_record(
        wall=wall, mono=mono, argv=list(sys.argv if argv is None else argv),
        config_digest=config.digest(), pid=pid, redact=config.capture.redact,
        include_system_prompt=config.capture.include_system_prompt,
    )
    if not capture.write(dumps(header)):
        return None
    log.info("capture: writing %s", path)
    return capture


@asynccontextmanager
async def open_capture(config: Config, *, argv: Sequence[str] | None = None,
                       ) -> AsyncIterator[trio.MemorySendChannel[CaptureBatch] | None]:
    """Yield a channel to send capture batches to, or None when capture is off.

    The writer runs in a nursery outside the bridge's, so it keeps draining after the pumps
    are done; leaving the block closes the channel, and the block ends once every batch sent
    is on disk. With `capture.required`, a failed write raises `CaptureError` (in the
    nursery's ExceptionGroup) and ends the session.
    """
    if config.capture.path is None:
        yield None
        return
    capture = start_capture(config, argv=argv)
    if capture is None:
        yield None
        return
    send, receive = trio.open_memory_channel[CaptureBatch](BUFFER_BATCHES)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(capture.drain, receive)
        with send:
            yield send
