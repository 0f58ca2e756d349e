"""The capture file: creating it safely, and writing each batch of records before it is sent.

Owns: creating the capture file (mode 0600, parent directories made, never through a
symbolic link, never over an existing file), the header and trailer records, the synchronous
write of each read's records, in the bridge's own process, and what happens when the file
cannot be written (said once, capture stops, relay goes on; or `CaptureError` when
`capture.required`). Must never: hold a record back (a batch is on disk before its bytes are
sent, so a SIGKILLed bridge loses at most what it had not yet read), start a process or a
thread to write it, truncate or follow anything already at the path, or make a capture
failure stop the relay unless the configuration says it must.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from acp_bridge.capture.files import capture_path, special_kind
from acp_bridge.capture.records import CaptureEncoder, dumps, header_record, safe_dumps
from acp_bridge.capture.redaction import Redactor
from acp_bridge.config import Config
from acp_bridge.core.findings import Finding
from acp_bridge.core.relay import Forward
from acp_bridge.errors import CaptureError
from acp_bridge.shell import posix

log = logging.getLogger("acp_bridge.capture")

# Names tried after the one asked for is taken: PATH-1 ... PATH-N (before the extension).
MAX_FRESH_NAMES = 1000


class SymlinkRefused(OSError):
    """The capture path is a symbolic link: the bridge writes nothing through one."""


def create_new(path: str) -> tuple[str, int]:
    """Create a new file for the capture (mode 0600) at `path`, or, if something is there
    already, at the first free `STEM-N.EXT`; return the name used and a descriptor.

    O_CREAT|O_EXCL makes each attempt atomic: of two processes racing for one name, one
    gets it and the other moves on, and nothing that exists is opened, truncated or
    followed (a symbolic link, dangling or not, counts as existing). A symbolic link, a
    folder, a FIFO, a socket or a device at `path` itself is refused rather than stepped
    around: the user meant that path (`run` refuses all but the link before the agent starts).

    Raises:
        SymlinkRefused: `path` is a symbolic link.
        FileExistsError: something at `path` is no regular file (IsADirectoryError: a folder).
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
            if n == 0 and os.path.isdir(path):  # the user meant a folder: a file beside it is lost
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path) from None
            if n == 0 and (kind := _special_kind(path)) is not None:  # a FIFO, /dev/null: no capture
                raise FileExistsError(errno.EEXIST, f"it is {kind}, not a regular file", path) from None
            continue
        try:
            posix.make_private(fd)
        except OSError:
            os.close(fd)
            raise
        return candidate, fd
    raise FileExistsError(errno.EEXIST, f"it and {MAX_FRESH_NAMES} fresh names exist", path)


def _special_kind(path: str) -> str | None:
    try:
        return special_kind(os.lstat(path).st_mode)
    except OSError:  # gone since: the next name is tried
        return None


def _open_new(path: str) -> int:
    try:
        return os.open(path, posix.CREATE_NEW, 0o600)
    except FileNotFoundError:
        # Only a missing directory is made (private, like the file); any other reason
        # the open failed is the one worth reporting.
        _make_private_folders(os.path.dirname(path))
        return os.open(path, posix.CREATE_NEW, 0o600)


def _make_private_folders(folder: str) -> None:
    """Each missing folder of `folder`, mode 0700: `os.makedirs` gives that mode to the last
    only, and the umask's (often 0755) to those above it."""
    missing = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for made in reversed(missing):
        try:
            os.mkdir(made, 0o700)
        except FileExistsError:  # another bridge made it first, or a file is there (the open says)
            pass


class CaptureFile:
    """An open capture: the file descriptor, its encoder, and whether it still works. It is
    an `observers.Observer`, the first: the records of a read, and the findings about it.

    `record` encodes one read's forwards and writes them with one `os.write` before the
    bridge sends them on, on the event loop thread: a regular file write lands in the page
    cache and returns at once, and handing the records to another thread or process would
    add a place where records the client already has wait to be written. Nothing is
    buffered in Python, so whatever was sent is on disk when a SIGKILL comes.
    """

    def __init__(self, path: str, fd: int, encoder: CaptureEncoder, required: bool) -> None:
        self.path = path
        self.fd: int | None = fd  # None once closed
        self.encoder = encoder
        self.required = required

    def __repr__(self) -> str:
        return f"<CaptureFile {self.path} {'closed' if self.closed else 'open'}>"

    @property
    def closed(self) -> bool:
        return self.fd is None

    @classmethod
    def create(cls, path: str, encoder: CaptureEncoder, required: bool) -> CaptureFile:
        """A new file at `path` or a fresh name beside it (see `create_new`). Raises OSError."""
        actual, fd = create_new(path)
        return cls(actual, fd, encoder, required)

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        """Write the records of one read's forwards, now (nothing once the capture failed).

        Raises:
            CaptureError: the write failed and `capture.required` is set.
        """
        if self.fd is not None:
            data = self.encoder.encode_batch(wall, mono, forwards)
            if data:  # none for a piece of a long line: its record comes with its last
                self.write(data)

    def finding(self, wall: float, finding: Finding) -> None:
        """Write a finding's record, between two reads' batches (after the records of the
        read it is about). It takes no `seq`: those number the messages.

        Raises:
            CaptureError: the write failed and `capture.required` is set.
        """
        if not self.closed:
            self.write(safe_dumps(self.encoder.mask_finding(finding.record(wall))))

    def last_seq(self) -> int | None:
        """The `seq` of the last message record written; None once the capture stopped."""
        return None if self.closed else self.encoder.seq

    async def run(self) -> None:
        """Nothing runs beside the pumps: each read's records are written as it is read."""

    def close(self, wall: float, mono: float) -> None:
        """The connection has ended. The file stays open for what the other observers say
        as they close; `open_capture_for_writing` writes the end record and closes it after them."""

    def write(self, data: bytes) -> bool:
        """Write all of `data` after what came before it; on failure say so once and stop
        (or raise when required)."""
        if self.fd is None:
            return False
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as exc:
            self.shut()
            self.fail(exc)
            return False
        return True

    def fail(self, exc: OSError) -> None:
        reason = exc.strerror or str(exc)
        if self.required:
            raise CaptureError(f"capture: cannot write {self.path}: {reason} (capture.required is set)") from exc
        log.error("capture: cannot write %s: %s; capture stopped, relaying goes on", self.path, reason)

    def finish(self, wall: float, mono: float) -> None:
        """Write the records of long lines cut short and the trailer, then close."""
        if not self.closed:
            self.write(self.encoder.trailer(wall, mono))
        self.shut()

    def shut(self) -> None:
        """Close the file now (it failed, or it is finished)."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.close(fd)
            except OSError:  # pragma: no cover - nothing left to report it to
                pass


def start_capture(config: Config, *, argv: Sequence[str] | None = None,
                  wall: float | None = None, mono: float | None = None,
                  pid: int | None = None, chain: dict[str, str] | None = None) -> CaptureFile | None:
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
        include_system_prompt=config.capture.include_system_prompt, chain=chain,
    )
    if not capture.write(dumps(header)):
        return None
    if capture.path != path:
        # At the default level: whoever reads PATH afterwards would read an older session.
        log.warning("capture: %s exists; writing %s", path, capture.path)
    else:
        log.info("capture: writing %s", path)
    return capture


@contextmanager
def open_capture_for_writing(config: Config, *, argv: Sequence[str] | None = None,
                             chain: dict[str, str] | None = None) -> Iterator[CaptureFile | None]:
    """The capture for one session, or None when capture is off or failed to start.

    Leaving the block writes the trailer and closes the file, however the session ended.
    With `capture.required`, a capture that cannot be created or written raises
    `CaptureError`, which ends the session.
    """
    if config.capture.path is None:
        yield None
        return
    capture = start_capture(config, argv=argv, chain=chain)
    if capture is None:
        yield None
        return
    try:
        yield capture
    finally:
        capture.finish(time.time(), time.monotonic())
