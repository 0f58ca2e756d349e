"""The capture's shell helpers that touch the system: the path template, opening a capture for
the reader and reading its lines (as it grows, too), and the local time of day for people.

Owns: filling in `{time}` and `{pid}` (the config checks a template with `capture_path`
before the run), what at a capture's path refuses it before the run
(`capture_target_problem`: a folder, a FIFO, a device), opening a capture (`open_capture`:
regular files only), reading its lines in bounded memory (following it like `tail -f`, or a
read at a time from where the last one stopped: `Growth`, `grown_lines`, `stored_lines`), and
`local_clock`, the one time-zone lookup of the package. The pure modules take times as
numbers and clocks as functions, so they never read either. Must never: write a capture.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from acp_bridge.capture.reader import MAX_RECORD, CaptureReader, Line, LongLine, UnreadableCapture, Unterminated

CAPTURE_FIELDS = frozenset({"time", "pid"})  # the placeholders of a capture path template
POLL_SECONDS = 0.2


def capture_path(template: str, now: float, pid: int) -> str:
    """Fill in a capture path template: `{time}` as UTC `YYYYmmddTHHMMSSZ`, `{pid}`. The
    configuration checks every template with it when it is read (`check_capture_template`)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return template.format(time=stamp, pid=pid)


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


def capture_target_problem(path: str) -> str | None:
    """Why no capture can be made at `path` (a template filled in, checked by the
    configuration: not empty, no directory's name), said before the agent starts, or None
    when one can be tried. A capture is a new regular file: a directory,
    a FIFO, a socket or a device at `path`, and a folder above it that is something else
    than a directory, are refused (writing beside a FIFO or in /dev is no capture). A
    regular file there is no problem (the capture takes a fresh name beside it), nor a
    symbolic link (refused as the capture is created), nor missing folders (made then)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return _folder_problem(os.path.dirname(path))
    except OSError:  # cannot be looked at: creating it says why
        return None
    if stat.S_ISDIR(mode):
        return f"{path} is a directory, not a file"
    kind = special_kind(mode)
    return None if kind is None else f"{path} is {kind}, not a regular file"


def special_kind(mode: int) -> str | None:
    """What a file of `mode` is when it is a device, a FIFO or a socket ("a FIFO"), else None."""
    return next((kind for test, kind in _KINDS if test(mode)), None)


def _folder_problem(folder: str) -> str | None:
    """`folder`'s nearest existing folder or itself, when it is no directory (links followed)."""
    while folder:
        try:
            mode = os.stat(folder).st_mode
        except (FileNotFoundError, NotADirectoryError):
            parent = os.path.dirname(folder)
            if parent == folder:
                return None
            folder = parent
            continue
        except OSError:
            return None
        return None if stat.S_ISDIR(mode) else f"{folder} is not a directory"
    return None


READ_SIZE = 1 << 20


@contextmanager
def open_capture(path: str, *, strict: bool = True, follow: bool = False,
                 max_line: int = MAX_RECORD) -> Iterator[CaptureReader]:
    """The capture at `path`, read by the one reader (`reader.CaptureReader`); with `follow`,
    read as it grows. Only a regular file is read: a FIFO would block (its open too, without a
    writer) and a device such as /dev/zero never ends, so either is refused before anything of
    it is read.

    Raises:
        UnreadableCapture: not a regular file, cannot be opened, or not a capture (and while
            the records are read, as the reader says).
    """
    with open_regular(path) as file:
        yield CaptureReader(path, read_lines(file, follow=follow, max_line=max_line), strict=strict)


def open_regular(path: str, *, follow_link: bool = True, dir_fd: int | None = None) -> IO[bytes]:
    """`path` opened for reading if it is a regular file (without `follow_link`, not through
    a symbolic link at its last step), checked on the file opened, not on the name. With
    `dir_fd`, a relative `path` is taken from that folder.

    Raises:
        UnreadableCapture: anything else, or a file that cannot be opened.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_link else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except IsADirectoryError:
        raise UnreadableCapture(path, None, "is a directory, not a capture") from None
    except OSError as exc:
        raise UnreadableCapture(path, None, f"cannot read: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        problem = "is a directory, not a capture" if stat.S_ISDIR(mode) else "not a regular file, so not a capture"
        raise UnreadableCapture(path, None, problem)
    os.set_blocking(fd, True)
    return open(fd, "rb")


_FOLDER = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)


def open_beneath(path: str) -> IO[bytes]:
    """The regular file at the absolute `path`, reached from / one step at a time without
    following a symbolic link at any step (a folder swapped for a link since the path was
    found is refused, not followed), as `open_regular` opens it.

    Raises:
        UnreadableCapture: a step is a link, or missing, or the file is no regular file.
    """
    *folders, name = path.split("/")[1:]
    if not path.startswith("/") or not name or any(step in ("", ".", "..") for step in (*folders, name)):
        raise UnreadableCapture(path, None, "not a plain absolute path")
    fd = os.open("/", _FOLDER)
    try:
        for step in folders:
            try:
                inner = os.open(step, _FOLDER, dir_fd=fd)
            except OSError as exc:
                raise UnreadableCapture(path, None, f"cannot read: {exc.strerror or exc}") from None
            os.close(fd)
            fd = inner
        return open_regular(name, follow_link=False, dir_fd=fd)
    finally:
        os.close(fd)


def read_lines(file: IO[bytes], *, follow: bool = False, poll: float = POLL_SECONDS,
               max_line: int = MAX_RECORD) -> Iterator[Line]:
    """The lines of a capture file (a regular one: it is read again where a line continues),
    without their newlines; a last line without one comes as `Unterminated`. With `follow`,
    wait for more like `tail -f` (forever): a partial last line (a record being written) waits
    until it is complete, and a capture that shrinks (rewritten from the start) is read again
    from the top.

    A line longer than `max_line` comes as a `LongLine`: it is scanned for its end a piece at
    a time and never held, so memory stays bounded by the longest line read, on any input.
    A line is read in one piece once its end is found (linear in its length).
    """
    while True:
        start = file.tell()
        chunk = file.read(READ_SIZE)
        if not chunk:
            if not follow:
                return
            if os.fstat(file.fileno()).st_size < start:
                file.seek(0)
            time.sleep(poll)
            continue
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if not lines:  # no line ends in this chunk: a long line, or the last one
            line = _long_line(file, start, chunk, max_line, follow)
            if line is None:  # following, and the line is not complete yet
                end = file.tell()
                while (size := os.fstat(file.fileno()).st_size) == end:
                    time.sleep(poll)
                file.seek(start if size > end else 0)
                continue
            held = [line]  # handed out without a name for it here, so not kept while it is used
            del line
            yield held.pop()
            continue
        for line in lines:
            yield line if len(line) <= max_line else LongLine(len(line), max_line)
        if tail:
            file.seek(start + len(chunk) - len(tail))  # read it again, with what follows


@dataclass
class Growth:
    """Where reading a capture that grows stands between one read and the next (`grown_lines`,
    `stored_lines`): the file's identity (device, inode), the offset after the last whole line
    read, and the file's size then (a torn last line is not read again until the file grows).
    `Growth.of(file)` starts at the top of `file`."""

    identity: tuple[int, int] | None = None
    offset: int = 0
    size: int = 0

    @classmethod
    def of(cls, file: IO[bytes]) -> Growth:
        info = os.fstat(file.fileno())
        return cls((info.st_dev, info.st_ino))

    def replaced(self, file: IO[bytes]) -> bool:
        """Is `file` not the one read so far: another file at the path, or shorter than what
        was read (cut short, or rewritten from the start)? Then it is read again from the top."""
        info = os.fstat(file.fileno())
        return (info.st_dev, info.st_ino) != self.identity or info.st_size < self.offset


def grown_lines(file: IO[bytes], at: Growth, *, max_line: int = MAX_RECORD) -> Iterator[tuple[Line, int]]:
    """The whole lines `file` has grown by since `at`, each with its offset, without their
    newlines; `at` moves past each line as it is given. Nothing when the file's size is what
    it was. The torn-last-line rule of a capture that grows: a last line without its newline
    is left for the next read (the bridge may be writing it). A line longer than `max_line`
    comes as a `LongLine` once its newline is written, never held (`read_lines`)."""
    size = os.fstat(file.fileno()).st_size
    if size in (at.offset, at.size):
        return
    at.size = size
    file.seek(at.offset)
    for line in read_lines(file, max_line=max_line):
        if isinstance(line, Unterminated):
            return
        start = at.offset
        if isinstance(line, LongLine):
            if file.tell() == start + line.size:  # no newline yet: still being written
                return
            at.offset = start + line.size + 1
        else:
            at.offset += len(line) + 1
        yield line, start


def stored_lines(file: IO[bytes], at: Growth, start: int, *, max_line: int = MAX_RECORD) -> Iterator[bytes]:
    """The whole lines of `file` from offset `start` (a line's start) up to where `at` has
    read, without their newlines (a line over `max_line` passed over unread); nothing when the
    file was replaced or cut short since (`Growth.replaced`)."""
    if at.replaced(file):
        return
    file.seek(start)
    offset = start
    for line in read_lines(file, max_line=max_line):
        if isinstance(line, Unterminated) or offset >= at.offset:
            break
        offset += (line.size if isinstance(line, LongLine) else len(line)) + 1
        if not isinstance(line, LongLine):
            yield line


def _long_line(file: IO[bytes], start: int, chunk: bytes, max_line: int, follow: bool) -> Line | None:
    """The line at `start` that `chunk` begins and does not end. Scan for its end without
    holding it, then read it whole if it is no longer than `max_line`; the file is left
    after it. None: following, and the line has no end yet (the file is left at its end)."""
    size, ended = len(chunk), False
    while piece := file.read(READ_SIZE):
        end = piece.find(b"\n")
        if end >= 0:
            size, ended = size + end, True
            break
        size += len(piece)
    if not ended and follow:
        return None
    if size > max_line:
        file.seek(start + size + ended)
        return LongLine(size, max_line)
    if size > len(chunk):
        file.seek(start)
        chunk = _read(file, size)
    file.seek(start + size + ended)
    return chunk[:size] if ended else Unterminated(chunk[:size])


def _read(file: IO[bytes], size: int) -> bytes:
    """`size` bytes of `file` (fewer only at its end), in one piece however reads come."""
    data = file.read(size)
    if len(data) == size or not data:
        return data
    pieces, held = [data], len(data)
    while held < size and (piece := file.read(size - held)):
        pieces.append(piece)
        held += len(piece)
    return b"".join(pieces)


def wait_for_file(path: str, poll: float = POLL_SECONDS) -> None:
    """Return once `path` exists (a capture the bridge has not created yet)."""
    while not os.path.exists(path):
        time.sleep(poll)


def local_clock(wall: float) -> str:
    """HH:MM:SS.mmm in the local time zone (what `show`, `stats` and `export` print)."""
    try:
        return time.strftime("%H:%M:%S", time.localtime(wall)) + f".{int(wall * 1000) % 1000:03d}"
    except (OverflowError, OSError, ValueError):  # a time no calendar holds
        return f"t={wall!r}"
