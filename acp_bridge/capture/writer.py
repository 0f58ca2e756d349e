"""The capture file: creating it safely, and handing each batch of records over before it is sent.

Owns: creating the capture file (mode 0600, parent directories made, never through a
symbolic link, never over an existing file), the header and trailer records, handing each
read's records over before its bytes are sent (to the capture writer process, `worker`, or
written here when it cannot be used), and what happens when the file cannot be written (said
once, capture stops, relay goes on; or `CaptureError` when `capture.required`). Must never:
hold a record back (a batch is in the writer's pipe, or on disk, before its bytes are sent,
so a SIGKILLed bridge loses at most what it had not yet read), truncate or follow anything
already at the path, or make a capture failure stop the relay unless the configuration says
it must.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from acp_bridge.capture.files import capture_path
from acp_bridge.capture.records import CaptureEncoder, dumps, header_record, safe_dumps
from acp_bridge.capture.redaction import Redactor
from acp_bridge.capture.worker import DATA, CaptureWorker, WriterPipe, frame, run_head
from acp_bridge.config import Config
from acp_bridge.core.protocol import Json
from acp_bridge.core.relay import Forward
from acp_bridge.errors import CaptureError

log = logging.getLogger("acp_bridge.capture")

# Names tried after the one asked for is taken: PATH-1 ... PATH-N (before the extension).
MAX_FRESH_NAMES = 1000
# Whether a capture that is not `required` has its runs recorded by a writer process (see
# `worker`). A required one is written here, each batch before its bytes are sent, so that a
# write that fails stops the bridge before it sends what it could not record.
OFFLOAD = not getattr(sys, "frozen", False)  # a frozen app has no `python -m` to run
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class SymlinkRefused(OSError):
    """The capture path is a symbolic link: the bridge writes nothing through one."""


def create_new(path: str) -> tuple[str, int]:
    """Create a new file for the capture (mode 0600) at `path`, or, if something is there
    already, at the first free `STEM-N.EXT`; return the name used and a descriptor.

    O_CREAT|O_EXCL makes each attempt atomic: of two processes racing for one name, one
    gets it and the other moves on, and nothing that exists is opened, truncated or
    followed (a symbolic link, dangling or not, counts as existing). A symbolic link at
    `path` itself is refused rather than stepped around: the user meant that path.

    Raises:
        SymlinkRefused: `path` is a symbolic link.
        OSError: anything else (a missing directory is made first, mode 0700).
    """
    stem, ext = os.path.splitext(path)
    candidate = path
    for n in range(MAX_FRESH_NAMES + 1):
        candidate = path if n == 0 else f"{stem}-{n}{ext}"
        try:
            fd = _open_new(candidate)
        except FileExistsError:
            if n == 0 and os.path.islink(path):
                raise SymlinkRefused(errno.ELOOP, "it is a symbolic link", path) from None
            continue
        try:
            os.fchmod(fd, 0o600)  # exactly: a umask may have taken bits away
        except OSError:
            os.close(fd)
            raise
        return candidate, fd
    raise FileExistsError(errno.EEXIST, f"it and {MAX_FRESH_NAMES} fresh names exist", path)


def _open_new(path: str) -> int:
    try:
        return os.open(path, _CREATE, 0o600)
    except FileNotFoundError:
        # Only a missing directory is made (private, like the file); any other reason
        # the open failed is the one worth reporting.
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        return os.open(path, _CREATE, 0o600)


class CaptureFile:
    """An open capture: where its records go, its encoder, and whether it still works.

    `record` hands one read's records over before the bridge sends the read on, on the event
    loop thread. With a writer process (`worker`), a run of untouched lines goes to it as
    the bytes that came in when it is idle; every other record is encoded here and written
    to the file here when the writer is idle, or down its pipe in turn when it is not.
    Without one, the records are encoded here and written with one `os.write`: a regular
    file write lands in the page cache and returns at once. Nothing is buffered in Python
    either way, so what was sent is on disk, or in the writer's pipe, when a SIGKILL comes.
    """

    def __init__(self, path: str, fd: int, encoder: CaptureEncoder, required: bool) -> None:
        self.path = path
        self.fd: int | None = fd  # None once closed
        self.worker: WriterPipe | None = None
        self.encoder = encoder
        self.required = required
        self.runs = [0, 0]  # runs recorded by the writer process, and by the bridge while it was busy
        self.offload_at_first_run = False  # start the writer process when a run first comes

    def __repr__(self) -> str:
        how = "closed" if self.closed else "with a writer process" if self.worker is not None else "inline"
        return f"<CaptureFile {self.path} {how}>"

    @property
    def closed(self) -> bool:
        return self.fd is None

    @classmethod
    def create(cls, path: str, encoder: CaptureEncoder, required: bool) -> CaptureFile:
        """A new file at `path` or a fresh name beside it (see `create_new`). Raises OSError."""
        actual, fd = create_new(path)
        return cls(actual, fd, encoder, required)

    def offload(self) -> bool:
        """Start a writer process for the runs (see `worker`); False, and nothing changed,
        when one cannot be started."""
        if self.fd is None or self.worker is not None:
            return False
        redactor = self.encoder.redactor
        try:
            worker = CaptureWorker.start(self.fd, redactor.pointers, redactor.secret)
        except OSError as exc:
            log.info("capture: no writer process (%s); records are written by the bridge", exc.strerror or exc)
            return False
        except Exception:  # a bug starting it must not end the relay: the bridge records itself
            log.exception("capture: no writer process; records are written by the bridge")
            return False
        self.worker = worker
        log.debug("capture: writer process %d", worker.proc.pid)
        return True

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        """Hand the records of one read's forwards over, now (nothing once the capture failed).

        Raises:
            CaptureError: the write failed and `capture.required` is set.
        """
        if self.offload_at_first_run and any(fwd.untouched_lines for fwd in forwards):
            self.offload_at_first_run = False
            self.offload()
        if self.worker is not None:
            self._hand_over(self.worker, wall, mono, forwards)
        elif self.fd is not None:
            data = self.encoder.encode_batch(wall, mono, forwards)
            if data:
                self.write(data)

    def _hand_over(self, worker: WriterPipe, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        """A run to the writer as it came, if it is idle (a run's records are one a line, so
        counting its newlines numbers what follows); the rest encoded here, in order."""
        encoder = self.encoder
        mine: list[Forward] = []
        for fwd in forwards:
            if self.worker is not None and fwd.untouched_lines and worker.idle():
                if mine and not self.write(encoder.encode_batch(wall, mono, mine)):
                    return
                mine = []
                raw = fwd.raw
                try:
                    worker.send(run_head(encoder.seq, wall, mono, fwd.direction.value, len(raw)), raw)
                except OSError as exc:
                    if not self._take_over(worker, exc):
                        return
                    mine.append(fwd)  # the bridge records it, and all that follows
                    continue
                encoder.seq += raw.count(b"\n")
                self.runs[0] += 1
            else:
                mine.append(fwd)
                self.runs[1] += fwd.untouched_lines
        if mine:
            self.write(encoder.encode_batch(wall, mono, mine))

    def _take_over(self, worker: WriterPipe, exc: OSError) -> bool:
        """The writer is gone, found while handing it a run. If it had written every frame
        before (it was idle, and it ended: nothing of it can come later), nothing is lost:
        the bridge records from here on, and says so. Else the capture stops (`_stop`)."""
        if isinstance(exc, BrokenPipeError) and worker.idle():
            reason = worker.finish()
            self.worker = None
            log.warning("capture: the writer process ended (%s); the bridge records the rest itself",
                        reason or exc.strerror or exc)
            return True
        self._stop(exc)
        return False

    def write_record(self, record: Json) -> None:
        """Write one record of another kind than a message (a health finding), between two
        reads' batches. It takes no `seq`: those number the messages."""
        if not self.closed:
            self.write(safe_dumps(record))

    def write(self, data: bytes) -> bool:
        """Write all of `data` after what came before it (to the file, or down the writer's
        pipe while it is busy); on failure say so once and stop (or raise when required)."""
        if self.fd is None:
            return False
        if not data:  # a piece of a long line leaves no record until its last
            return True
        if self.worker is not None and not self.worker.idle():
            return self._send(frame(DATA, len(data)), data)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as exc:
            self._stop(exc)
            return False
        return True

    def _send(self, head: bytes, payload: bytes) -> bool:
        assert self.worker is not None
        try:
            self.worker.send(head, payload)
        except OSError as exc:
            self._stop(exc)
            return False
        return True

    def _stop(self, exc: OSError) -> None:
        """Writing failed: close everything, and say why once (the writer's word first)."""
        worker, self.worker = self.worker, None
        reason = worker.finish() if worker is not None else None
        self.close()
        self.fail(OSError(exc.errno, reason) if reason else exc)

    def fail(self, exc: OSError) -> None:
        reason = exc.strerror or str(exc)
        if self.required:
            raise CaptureError(f"capture: cannot write {self.path}: {reason} (capture.required is set)") from exc
        log.error("capture: cannot write %s: %s; capture stopped, relaying goes on", self.path, reason)

    def finish(self, wall: float, mono: float) -> None:
        """Write the records of long lines cut short and the trailer, then close (and wait
        for the writer process to have written everything)."""
        if not self.closed:
            self.write(self.encoder.trailer(wall, mono))
        self.close()

    def close(self) -> None:
        """Close the writer's pipe and wait for it (said once if it failed), then the file."""
        try:
            self._close_worker()
        finally:
            self._close_fd()

    def _close_worker(self) -> None:
        if self.worker is not None:
            worker, self.worker = self.worker, None
            log.debug("capture: runs recorded by the writer process: %d, by the bridge while it was busy: %d",
                      *self.runs)
            reason = worker.finish()
            if reason is not None:
                self.fail(OSError(None, reason))

    def _close_fd(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.close(fd)
            except OSError:  # pragma: no cover - nothing left to report it to
                pass


def start_capture(config: Config, *, argv: Sequence[str] | None = None,
                  wall: float | None = None, mono: float | None = None,
                  pid: int | None = None) -> CaptureFile | None:
    """Create the capture file and write its header; None when it cannot be (said once).

    Raises:
        CaptureError: it cannot be created and `capture.required` is set.
    """
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
        verb = "refusing" if isinstance(exc, SymlinkRefused) else "cannot create"
        if config.capture.required:
            raise CaptureError(f"capture: {verb} {path}: {reason} (capture.required is set)") from exc
        log.error("capture: %s %s: %s; relaying without a capture", verb, path, reason)
        return None
    header = header_record(
        wall=wall, mono=mono, argv=list(sys.argv if argv is None else argv),
        config_digest=config.digest(), pid=pid, redact=config.capture.redact,
        include_system_prompt=config.capture.include_system_prompt,
    )
    if not capture.write(dumps(header)):
        return None
    # Not before it pays: a session of single messages (each read a line or two) has no runs,
    # and would only pay the writer's start-up (~0.1 s of CPU) and wait for it at the end.
    capture.offload_at_first_run = OFFLOAD and not config.capture.required
    if capture.path != path:
        # At the default level: whoever reads PATH afterwards would read an older session.
        log.warning("capture: %s exists; writing %s", path, capture.path)
    else:
        log.info("capture: writing %s", path)
    return capture


@contextmanager
def open_capture(config: Config, *, argv: Sequence[str] | None = None) -> Iterator[CaptureFile | None]:
    """The capture for one session, or None when capture is off or failed to start.

    Leaving the block writes the trailer and closes the file, however the session ended.
    With `capture.required`, a capture that cannot be created or written raises
    `CaptureError`, which ends the session.
    """
    if config.capture.path is None:
        yield None
        return
    capture = start_capture(config, argv=argv)
    if capture is None:
        yield None
        return
    try:
        yield capture
    finally:
        capture.finish(time.time(), time.monotonic())
