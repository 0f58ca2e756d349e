"""The capture's shell helpers that touch the system: the path template, reading a capture as
it grows, and the local time of day for people.

Owns: filling in `{time}` and `{pid}` (the config checks a template with `capture_path`
before the run), reading complete lines of a capture file (following it like `tail -f`), and
`local_clock`, the one time-zone lookup of the package. The pure modules take times as
numbers and clocks as functions, so they never read either. Must never: write a capture.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import IO

CAPTURE_FIELDS = frozenset({"time", "pid"})  # the placeholders of a capture path template
POLL_SECONDS = 0.2


def capture_path(template: str, now: float, pid: int) -> str:
    """Fill in a capture path template: `{time}` as UTC `YYYYmmddTHHMMSSZ`, `{pid}`. The
    configuration checks every template with it when it is read (`check_capture_template`)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return template.format(time=stamp, pid=pid)


READ_SIZE = 1 << 20
MAX_LINE = 1 << 30  # a capture line longer than this is no record: its first MAX_LINE bytes stand for it


def read_lines(file: IO[bytes], *, follow: bool = False, poll: float = POLL_SECONDS,
               max_line: int = MAX_LINE) -> Iterator[bytes]:
    """Complete lines of a capture; with `follow`, wait for more like `tail -f` (forever).

    A partial last line (a record being written) is held until it is complete; when
    following, a capture that shrinks (rewritten from the start) is read again from the top.
    The pieces of a long line are joined once, when it ends (linear in its length); a line
    past `max_line` bytes is cut there (its head, which no reader takes for a record, stands
    for it) and the rest of it is skipped, so memory stays bounded on any input.
    """
    pieces: list[bytes] = []
    held = 0  # bytes in pieces
    skipping = False  # inside a line already cut at max_line
    while True:
        chunk = file.read(READ_SIZE)
        if chunk:
            end = chunk.find(b"\n")
            if end < 0:
                if not skipping:
                    pieces.append(chunk)
                    held += len(chunk)
                    if held > max_line:
                        yield b"".join(pieces)[:max_line]
                        pieces, held, skipping = [], 0, True
                continue
            if not skipping:
                pieces.append(chunk[:end])
                yield b"".join(pieces)[:max_line]
            skipping = False
            lines = chunk[end + 1:].split(b"\n")
            last = lines.pop()
            for line in lines:
                yield line if len(line) <= max_line else line[:max_line]
            pieces, held = ([last], len(last)) if last else ([], 0)
            continue
        if not follow:
            if pieces and not skipping:
                yield b"".join(pieces)[:max_line]
            return
        if os.fstat(file.fileno()).st_size < file.tell():
            file.seek(0)
            pieces, held, skipping = [], 0, False
        time.sleep(poll)


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
