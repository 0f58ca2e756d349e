"""The bridge's own log: where it goes (stderr, or `--log-file`) and at what level; and the
one way anything of the bridge reaches its stderr.

Owns: `FdWriter`, the bounded writer of a file descriptor nobody may be reading (our
stderr, the log file): the log, the agent's stderr passed through and the diverted stray
lines all go through `stderr_writer()`, and `run` points `sys.stderr` there too; the one
handler of the `acp_bridge` logger, writing a log line whole; and escaping what a log line
quotes from the wire (`PrintableFormatter`). Must never: write to stdout (the protocol
channel), or wait for a reader of stderr or of the log: an editor that never reads them
holds up neither the relay nor the bridge's exit.
"""

from __future__ import annotations

import io
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from acp_bridge.config import Config
from acp_bridge.core.printable import printable, printable_lines

FORMAT = "acp-bridge: %(levelname)s: %(message)s"


class PrintableFormatter(logging.Formatter):
    """Log lines with no control character in them: a session id or method the agent
    chose (`"x\\u001b]0;PWNED\\u0007y"`) cannot retitle or rewrite the terminal, nor a
    line feed in it forge a second log line. Escaped here, at the one handler, so that no
    call site can forget it; backslashes are left as they are, since messages quote ids
    as `repr()`s, which are escaped already. A traceback keeps its line feeds."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record), quote_backslash=False)

    def formatException(self, ei: Any) -> str:
        return printable_lines(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return printable_lines(super().formatStack(stack_info))


WAITING_LIMIT = 256 * 1024  # bytes waiting for a descriptor's reader, at most
CLOSE_SECONDS = 1.0  # how long the end waits for what waits to be written


class FdWriter:
    """Writes to one file descriptor that never wait: `write` writes at once what the
    descriptor takes without waiting (a line, when nothing else waits), and queues the
    rest for a daemon thread of the writer's own, which waits for room as long as it takes
    (a terminal, a pipe the editor reads late, or never). Past `limit` bytes waiting, a
    write is dropped whole and counted; where the drops began, a note says how many bytes
    were dropped, written once the descriptor takes bytes again (or as the bridge ends,
    if it does by then). A reader that is gone (EPIPE) ends the writing.

    A thread rather than non-blocking writes: our stderr is often a file description we
    share (a terminal), and making it non-blocking would change it for everyone else."""

    def __init__(self, fd: int, limit: int = WAITING_LIMIT, *, what: str = "stderr") -> None:
        self.fd = fd
        self.limit = limit
        self.what = what
        self.dropped = 0  # bytes dropped in all
        self._unsaid = 0  # ... since the last note
        self._queue: list[bytes | None] = []  # None: drops began here (a note is due)
        self._size = 0
        self._busy = False  # the thread holds bytes it has not written yet
        self._gone = False  # the reader went away: nothing more is written
        self._at_line_start = True  # the last byte handed to the thread ends a line
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<FdWriter fd={self.fd} waiting={self._size}B dropped={self.dropped}B>"

    def write(self, data: bytes) -> bool:
        """Queue `data`; never waits. False: dropped (no room, or the reader is gone)."""
        if not data:
            return True
        with self._cond:
            if self._gone:
                return False
            if not self._queue and not self._busy:  # nothing waits: at once, if there is room
                from acp_bridge.shell.posix import write_if_room

                try:
                    written = write_if_room(self.fd, data)
                except OSError:  # EPIPE, EBADF: nobody can read it any more
                    self._gone = True
                    return False
                if written:
                    self._at_line_start = data[:written].endswith(b"\n")
                    data = data[written:]
                    if not data:
                        return True
            if self._size + len(data) > self.limit:
                if not self._unsaid:
                    self._put(None)
                self._unsaid += len(data)
                self.dropped += len(data)
                return False
            self._put(data)
            self._size += len(data)
        return True

    def _put(self, piece: bytes | None) -> None:
        """Queue a piece (None: the note of the drops) for the thread (the lock is held)."""
        self._queue.append(piece)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"acp-bridge {self.what}", daemon=True)
            self._thread.start()
        self._cond.notify()

    def _note(self) -> bytes:
        count, self._unsaid = self._unsaid, 0
        return f"acp-bridge: {count:,} bytes of {self.what} dropped: nobody read it\n".encode()

    def _run(self) -> None:
        from acp_bridge.shell.posix import write_all

        while True:
            with self._cond:
                while not self._queue:
                    self._busy = False
                    self._cond.notify_all()
                    self._cond.wait()
                pieces: list[bytes] = []
                for piece in self._queue:
                    if piece is None:  # said once what came before is written
                        piece = (b"" if self._at_line_start else b"\n") + self._note()
                    pieces.append(piece)
                    self._at_line_start = piece.endswith(b"\n")
                self._queue, self._size, self._busy = [], 0, True
            try:
                write_all(self.fd, b"".join(pieces))
            except OSError:  # EPIPE, EBADF: nobody can read it any more
                with self._cond:
                    self._gone, self._queue, self._size, self._busy = True, [], 0, False
                    self._cond.notify_all()
                return

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for everything queued to be written (the note of
        bytes dropped included: it is queued where the drops began); True if it was."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._queue or self._busy) and not self._gone:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float) -> None:
        """Write what waits for up to `timeout` seconds, then close the descriptor; one
        still being written to by the thread is left open (closed, its number could be
        reused and the thread would write into another file)."""
        self.flush(timeout)
        with self._cond:
            self._gone, self._queue, self._size = True, [], 0
            if self._busy:
                return
        os.close(self.fd)


_STDERR: list[FdWriter] = []  # the writer of fd 2, once made (made at first use: a thread)


def stderr_writer() -> FdWriter:
    """The writer of file descriptor 2, the one way to our stderr."""
    if not _STDERR:
        import atexit

        _STDERR.append(FdWriter(2))
        # A command that logs and ends (replay, drive) has its last lines written: the
        # thread is a daemon, stopped at exit; for at most CLOSE_SECONDS, as `run` waits.
        atexit.register(_STDERR[0].flush, CLOSE_SECONDS)
    return _STDERR[0]


def writer_for(fd: int) -> FdWriter:
    """`stderr_writer()` for fd 2, a writer of its own for any other descriptor."""
    return stderr_writer() if fd == 2 else FdWriter(fd)


class WriterText(io.TextIOBase):
    """`sys.stderr` while `run` relays: text written through an `FdWriter` (a warning, a
    traceback, click's messages), one write per line, so it never waits."""

    def __init__(self, writer: FdWriter) -> None:
        super().__init__()
        self.writer = writer
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text, self._partial = self._partial + text, ""
        whole, newline, rest = text.rpartition("\n")
        if newline:
            self.writer.write((whole + "\n").encode("utf-8", "replace"))
        self._partial = rest
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self.writer.write(self._partial.encode("utf-8", "replace"))
            self._partial = ""


@contextmanager
def stderr_bounded(flush_seconds: float) -> Iterator[None]:
    """For the block: `sys.stderr` written through `stderr_writer()` (when it is file
    descriptor 2: not under a test's captured stream); after it, up to `flush_seconds`
    for what waits to be written, so that an unread stderr never holds up the exit."""
    import sys

    original = sys.stderr
    try:
        ours = original is not None and original.fileno() == 2
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        ours = False
    if ours:
        original.flush()
        sys.stderr = WriterText(stderr_writer())
    try:
        yield
    finally:
        if ours:
            sys.stderr.flush()
            sys.stderr = original
        if _STDERR:
            _STDERR[0].flush(flush_seconds)


class StderrHandler(logging.Handler):
    """Log lines to file descriptor 2 (or `fd`), whole, through its `FdWriter`: a log line
    never waits for a reader. (Written by a thread, not through a StreamHandler: when
    stdout and stderr are one terminal, the FdStream on stdout makes the shared file
    description non-blocking, and the thread waits for room instead of failing.)"""

    def __init__(self, fd: int = 2, writer: FdWriter | None = None, *, owns_fd: bool = False) -> None:
        super().__init__()
        self.fd = fd
        self.writer = writer if writer is not None else writer_for(fd)
        self.owns_fd = owns_fd  # the log file's: closed with the handler

    def close(self) -> None:
        if self.owns_fd:
            self.owns_fd = False
            self.writer.close(CLOSE_SECONDS)
        super().close()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.writer.write((self.format(record) + "\n").encode("utf-8", "replace"))
        except Exception:
            self.handleError(record)


def setup_logging(config: Config) -> None:
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(config.verbosity, logging.DEBUG)
    handler: logging.Handler
    if config.log_file:
        # Through a writer too: a log file that stalls (a FIFO read late, a hung network
        # disk) must not hold up the relay either.
        fd = os.open(config.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # not inherited (PEP 446)
        handler = StderrHandler(fd, FdWriter(fd, what="the log"), owns_fd=True)
    else:
        handler = StderrHandler()
    handler.setFormatter(PrintableFormatter(FORMAT))
    root = logging.getLogger("acp_bridge")
    for old in root.handlers:
        old.close()
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
