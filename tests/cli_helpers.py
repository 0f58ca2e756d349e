"""Helpers for the command tests that ask a command in this process what a real process was
started for before: a FIFO's peer on call, so that a command that waits on one fails its test
instead of hanging the worker."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def peer_on_call(fifo: Path, *, writer: bool, after: float = 10) -> Iterator[None]:
    """Should a command open `fifo` and wait for its other end (a reader waits for a writer,
    a writer for a reader), that end comes and goes `after` seconds later, and each second
    from then on: the command reads the FIFO's end, or finds nobody reading what it writes,
    and goes on, so that a regression fails the test instead of blocking its process."""
    done = threading.Event()
    flags = (os.O_WRONLY if writer else os.O_RDONLY) | os.O_NONBLOCK

    def come_and_go() -> None:
        wait = after
        while not done.wait(wait):
            try:
                os.close(os.open(fifo, flags))
            except OSError:  # ENXIO: a writer finds no reader waiting
                pass
            wait = 1

    thread = threading.Thread(target=come_and_go, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
