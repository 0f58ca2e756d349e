"""The capture writer process: records of untouched runs made on the other core.

Owns: the wire between the bridge and its capture writer (frames on the writer's stdin), the
writer's main loop (`python -P -m acp_bridge.capture.worker OUT_FD PAGE_FD`), and the
bridge's handle on it (`CaptureWorker`). Must never: write a record the bridge's own encoder would not write byte
for byte (the property in tests/capture/test_worker.py compares the two), lose a frame the
bridge handed over (it drains its stdin to the end, whatever becomes of the bridge), write
anything on its stdout but the reason it stopped, or make the bridge wait for it longer than
`STALL_SECONDS`.

Why a process: nearly all of a busy capture is the records of runs of untouched lines
(`Forward.untouched_lines`), ~0.7-1 us of Python a line, and a thread would hold the same
interpreter lock as the relay. The bridge hands each run over as the bytes it read, with the
number of its first record (a run's records are one a line, so the bridge counts the rest
with one `bytes.count`), and encodes every other forward itself: those carry what only the
relay knows (the request a response answers, what a rule did). A pipe keeps both in order.
The writer counts the frames it has written in a page both map (`Progress`). While it is
busy, the bridge encodes the next run itself rather than queue it, and while it is idle, the
bridge writes its own records to the file itself (the two share one file offset, and only
one writes at a time): under a stream the two processes share the records, each on its core,
and no record the bridge made goes through the pipe unless it must wait its turn there.

What a SIGKILL leaves: a frame is in the pipe before the bridge sends the bytes it records,
and the writer is in a session of its own: a bridge killed, alone or with its process group,
leaves the writer to drain the pipe to its end, so the capture still loses at most what the
bridge had not yet read. The writer ignores SIGINT, SIGTERM and SIGHUP (its end is its pipe's);
a SIGKILL sent to it too (a whole process tree killed) loses what was in its pipe, up to
`PIPE_SIZE` of records whose bytes were sent.

Frames: a kind byte and the payload's size (`FRAME_HEAD`), then the payload.
- `C`, first and once: the redaction, JSON `{"redact": [pointer, ...], "secret": text|null}`.
- `D`: record lines the bridge encoded, written as they are.
- `R`: a run: `_RUN` (seq of the record before its first, wall, mono, direction), then its
  lines as they came in.
"""

from __future__ import annotations

import errno
import gc
import mmap
import os
import select
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Protocol

import orjson

from acp_bridge.capture.records import CaptureEncoder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.messages import Direction
from acp_bridge.shell.tuning import keep_heap, widen_pipe

FRAME_HEAD = struct.Struct("<cQ")
_RUN = struct.Struct("<QddB")
CONFIG, DATA, RUN = b"C", b"D", b"R"
_DIRECTIONS = ("to-agent", "to-client")  # a run's direction byte: its index here
READ_SIZE = 1 << 20
STATUS_LIMIT = 4096  # bytes of the writer's reason the bridge reads
# A writer that reads nothing for this long (stopped, wedged) is given up: the capture stops,
# said once, and the relay goes on; the bridge never waits longer for it, at the end either.
STALL_SECONDS = 10.0


def frame(kind: bytes, payload_size: int) -> bytes:
    """The head of a frame whose payload follows."""
    return FRAME_HEAD.pack(kind, payload_size)


def run_head(seq: int, wall: float, mono: float, direction: str, size: int) -> bytes:
    """The head of an `R` frame for a run of `size` bytes, whose records follow `seq`."""
    return frame(RUN, _RUN.size + size) + _RUN.pack(seq, wall, mono, _DIRECTIONS.index(direction))


def read_frames(fd: int, read_size: int = READ_SIZE) -> Iterator[tuple[bytes, bytes]]:
    """Each (kind, payload) on `fd` until its end. A frame cut short by the end is dropped:
    only a bridge killed while handing it over leaves one, and it had not yet sent the bytes
    that frame records."""
    buf = bytearray()
    pos = 0
    while True:
        data = os.read(fd, read_size)
        if not data:
            return
        buf += data
        while len(buf) - pos >= FRAME_HEAD.size:
            kind, size = FRAME_HEAD.unpack_from(buf, pos)
            start = pos + FRAME_HEAD.size
            if len(buf) - start < size:
                break
            pos = start + size
            yield kind, bytes(buf[start:pos])
        del buf[:pos]
        pos = 0


class WriterPipe(Protocol):
    """What the capture file hands its frames to (a `CaptureWorker`, or a test's double)."""

    def send(self, head: bytes, payload: bytes) -> None:
        """Hand one frame over, all of it, now. Raises OSError."""

    def idle(self) -> bool:
        """Whether the writer has written every frame it was handed."""

    def finish(self) -> str | None:
        """No more frames: wait for them to be written; why that failed, or None."""


class Progress:
    """A counter in a shared page: the frames the writer has written. The bridge reads it
    with no system call. Only the writer adds to it, after its write returned."""

    _COUNT = struct.Struct("<Q")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.page = mmap.mmap(fd, self._COUNT.size)

    @classmethod
    def create(cls) -> Progress:
        fd = os.memfd_create("acp-bridge-capture") if hasattr(os, "memfd_create") else _temporary_fd()
        try:
            os.ftruncate(fd, cls._COUNT.size)
            return cls(fd)
        except OSError:
            os.close(fd)
            raise

    @property
    def done(self) -> int:
        count: int = self._COUNT.unpack_from(self.page)[0]
        return count

    def add(self) -> None:
        self._COUNT.pack_into(self.page, 0, self.done + 1)

    def close(self) -> None:
        self.page.close()
        os.close(self.fd)


def _temporary_fd() -> int:  # pragma: no cover - where there is no memfd_create (macOS)
    import tempfile

    fd, path = tempfile.mkstemp(prefix="acp-bridge-capture-")
    os.unlink(path)
    return fd


class CaptureWorker:
    """The bridge's side: a running writer, the pipe to it, the pipe it answers on, and
    the count of the frames it has written."""

    def __init__(self, proc: subprocess.Popen[bytes], progress: Progress) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.progress = progress
        self.pipe: int | None = proc.stdin.fileno()
        self.handed = 0  # frames handed over
        self.stalled = False  # a hand-over found it reading nothing for STALL_SECONDS

    def __repr__(self) -> str:  # not the page: it is closed once finished
        return f"<CaptureWorker pid={self.proc.pid} frames handed={self.handed}>"

    @classmethod
    def start(cls, fd: int, redact: tuple[str, ...], secret: str | None) -> CaptureWorker:
        """Start a writer appending to the open file `fd` (it gets its own copy) with this
        redaction. Raises OSError when it cannot be started."""
        if not sys.executable:  # an embedded Python may not know its own (None, or "")
            raise FileNotFoundError(errno.ENOENT, "this Python does not know its own executable")
        # The bridge's own sys.path, in its order: the writer imports what the bridge did (this
        # very acp_bridge, however it is installed), and the standard library before
        # site-packages (the package root put first let a `pathlib` from PyPI shadow it).
        # Not the bridge's own settings (ACP_BRIDGE_SYSTEM_PROMPT is the secret the writer
        # masks: it is told what it needs in its pipe, not in an environment others can list).
        env = {name: value for name, value in os.environ.items() if not name.startswith("ACP_BRIDGE_")}
        env["PYTHONPATH"] = os.pathsep.join(entry for entry in sys.path if entry and os.path.exists(entry))
        progress = Progress.create()
        try:
            proc = subprocess.Popen(
                # -P: not the working folder first on sys.path, as `-m` would put it: a project
                # holding an `orjson.py` (or an `acp_bridge`) would run in the writer.
                [sys.executable, "-P", "-m", "acp_bridge.capture.worker", str(fd), str(progress.fd)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(fd, progress.fd), env=env,
                start_new_session=True,  # a signal to the bridge's group must not stop it
            )
        except OSError:
            progress.close()
            raise
        worker = cls(proc, progress)
        assert worker.pipe is not None
        os.set_blocking(worker.pipe, False)  # `send` waits, but not for ever
        widen_pipe(worker.pipe)  # fewer wake-ups of either process
        config = orjson.dumps({"redact": list(redact), "secret": secret})
        try:
            worker.send(frame(CONFIG, len(config)), config)
        except OSError:
            worker.finish()
            raise
        return worker

    def send(self, head: bytes, payload: bytes) -> None:
        """Hand one frame to the writer, all of it, now: this blocks while the writer is a
        pipe's worth behind (the capture's backpressure), up to STALL_SECONDS without
        progress. Raises OSError (a broken pipe when the writer has stopped, TimeoutError
        when it reads nothing)."""
        pipe = self.pipe
        if pipe is None:
            raise BrokenPipeError("the capture writer was closed")
        views = [view for view in (memoryview(head), memoryview(payload)) if view]  # writev: 0 for an empty one
        while views:
            try:
                done = os.writev(pipe, views)
            except BlockingIOError:
                if not _ready(pipe, select.POLLOUT, STALL_SECONDS):
                    self.stalled = True
                    why = f"the capture writer has read nothing for {STALL_SECONDS:g} s"
                    raise TimeoutError(errno.ETIMEDOUT, why) from None
                continue
            while done:
                if done >= len(views[0]):
                    done -= len(views.pop(0))
                else:
                    views[0] = views[0][done:]
                    done = 0
        self.handed += 1

    def idle(self) -> bool:
        """Whether the writer has written every frame it was handed: until the bridge hands
        it another, nothing of it is in the pipe and nothing is being written."""
        return self.progress.done >= self.handed

    def finish(self) -> str | None:
        """Close the pipe, wait for the writer to write what it has (up to STALL_SECONDS;
        not at all once it was found stalled: it is left to finish on its own), and return
        why it failed (None when it did not, or was found stalled: the hand-over said why)."""
        if self.pipe is not None:
            self.pipe = None
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        assert self.proc.stdout is not None
        if not _ready(self.proc.stdout.fileno(), select.POLLIN, 0 if self.stalled else STALL_SECONDS):
            self.proc.stdout.close()
            self.progress.close()
            # Left to finish on its own (whatever it has is still written if it resumes),
            # and reaped if it ends while the bridge still runs.
            threading.Thread(target=self.proc.wait, name="capture-writer-reaper", daemon=True).start()
            if self.stalled:
                return None
            return f"the capture writer has not finished in {STALL_SECONDS:g} s (left to finish on its own)"
        reason = self.proc.stdout.read(STATUS_LIMIT).decode("utf-8", "replace").strip()
        self.proc.stdout.close()
        code = self.proc.wait()
        self.progress.close()
        if code == 0 and not reason:
            return None
        return reason or f"the capture writer exited with status {code}"


def _ready(fd: int, event: int, seconds: float) -> bool:
    """Whether `fd` is ready for `event` (or hung up) within `seconds`."""
    poll = select.poll()
    poll.register(fd, event)
    return bool(poll.poll(seconds * 1000))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Writer:
    """The writer's state: the encoder, made by the `C` frame."""

    def __init__(self) -> None:
        self.directions = [Direction(name) for name in _DIRECTIONS]
        self.encoder: CaptureEncoder | None = None

    def records(self, kind: bytes, payload: bytes) -> bytes:
        """The record lines a frame stands for. Raises ValueError for a frame out of place."""
        if kind == DATA:
            return payload
        if kind == RUN and self.encoder is not None:
            seq, wall, mono, direction = _RUN.unpack_from(payload)
            raw = payload[_RUN.size:]
            self.encoder.seq = seq
            run = Forward(self.directions[direction], raw, raw, Verdict.PASS, untouched_lines=True)
            return self.encoder.encode_batch(wall, mono, [run])
        if kind == CONFIG and self.encoder is None:
            config = orjson.loads(payload)
            self.encoder = CaptureEncoder(Redactor(tuple(config["redact"]), config["secret"]))
            return b""
        raise ValueError(f"frame {kind!r} out of place")


def serve(source: int, out: int, status: int, progress: Progress | None = None) -> int:
    """The writer: frames from `source`, records to `out`, each frame counted in `progress`
    once written; on failure, the reason on `status` and exit status 1. Reads to the end of
    `source` in any case but a failure."""
    writer = Writer()
    try:
        for kind, payload in read_frames(source):
            data = writer.records(kind, payload)
            if data:
                _write_all(out, data)
            if progress is not None:
                progress.add()
    except OSError as exc:
        _write_all(status, (exc.strerror or str(exc)).encode())
        return 1
    except Exception as exc:  # a bug here must say why, not leave a silent short capture
        _write_all(status, f"{type(exc).__name__}: {exc}".encode())
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    # Its end is its pipe's: a signal to every process of the bridge's tree (some editors
    # stop an agent so) must not lose the records handed over, which the bridge has sent.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    args = sys.argv[1:] if argv is None else argv
    out, progress = int(args[0]), Progress(int(args[1]))
    # As the bridge does (process.run_bridge): a run's records are megabytes allocated and
    # freed per frame, and few of the objects made per line live past it.
    gc.set_threshold(500_000, 10, 10)
    keep_heap()
    try:
        return serve(0, out, 1, progress)
    finally:
        os.close(out)
        progress.close()


if __name__ == "__main__":
    sys.exit(main())
