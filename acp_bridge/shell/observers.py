"""Observers: what watches the traffic (the capture file, health watchdog, telemetry).

Owns: the one `Observer` protocol, building the observers a configuration asks for,
running their background work beside the bridge, and `Observers`, which hands each read's
forwards, and each finding, to every observer in turn: the capture file first. Must never:
change or delay traffic. An observer's `record` is called on the forwarding path, before
the forwards are sent, so it must only note what it needs (no waiting; the capture file's
one write is the exception that is the point of it); anything slower belongs in its `run`,
which runs beside the pumps.

With no observer but the capture configured, `observing` hands back the capture itself
(or None): nothing is added to the forwarding path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import trio

from acp_bridge.config import Config
from acp_bridge.core import Forward

if TYPE_CHECKING:
    from acp_bridge.core.findings import Finding
    from acp_bridge.core.session import Connection
    from acp_bridge.shell.capture_file import CaptureFile

log = logging.getLogger("acp_bridge.shell.observers")


class Observer(Protocol):
    """Something that watches every forward of a connection, and every finding about it.

    The parts implement it without naming it (health and telemetry import nothing of the
    shell); mypy checks each where `build_observers` puts it in the list.
    """

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        """Note one read's forwards before they are sent (synchronous, cheap, never raises
        for bad traffic; the capture file raises CaptureError when it is required)."""

    def finding(self, wall: float, finding: Finding) -> None:
        """A finding the health watchdog tells (or, with `total`, the count of one code and
        session at the end), at `wall`. The watchdog's own is a no-op."""

    async def run(self) -> None:
        """Background work beside the pumps (timers, export); cancelled when they end."""

    def close(self, wall: float, mono: float) -> None:
        """The connection has ended: finish up, in bounded time (before the capture's end
        record is written)."""


class Observers:
    """Every observer of a connection as one `Observer`: each read's forwards and each
    finding go to each of them, in the order they were added (the capture file first: a
    finding's record follows the records of the read it is about)."""

    __slots__ = ("all",)

    def __init__(self, observers: Sequence[Observer] = ()) -> None:
        self.all: list[Observer] = list(observers)

    def __repr__(self) -> str:
        return f"<Observers {self.all!r}>"

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        for observer in self.all:
            observer.record(wall, mono, forwards)

    def finding(self, wall: float, finding: Finding) -> None:
        for observer in self.all:
            observer.finding(wall, finding)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            for observer in self.all:
                nursery.start_soon(observer.run)

    def close(self, wall: float, mono: float) -> None:
        """Last added, first closed: the watchdog's findings at the end still reach
        telemetry and the capture (whose end record `open_capture_for_writing` writes after this)."""
        for observer in reversed(self.all):
            try:
                observer.close(wall, mono)
            except Exception:  # an observer must not take the bridge's exit status down
                log.error("observer %r failed to close (-vv shows why)", observer)
                log.debug("observer failure", exc_info=True)


def build_observers(config: Config, capture: CaptureFile | None, session: Connection) -> Observers:
    """The capture file and the observers `config` asks for, each imported only when it is
    asked for. `session`: the relay's, whose facts an observer may read (not change)."""
    observers = Observers([capture] if capture is not None else [])
    if config.telemetry.enabled:
        from acp_bridge.telemetry.live import telemetry_observer

        observers.all.append(telemetry_observer(config))
    if config.health.enabled:
        from acp_bridge.health.watchdog import Watchdog

        # Its findings go to every observer: a record in the capture, a span event.
        observers.all.append(Watchdog(config, session, tell=observers.finding,
                                      last_seq=capture.last_seq if capture is not None else None))
    return observers


@asynccontextmanager
async def observing(config: Config, capture: CaptureFile | None,
                    session: Connection) -> AsyncIterator[Observer | None]:
    """Run the configured observers for the life of the block; yield what the bridge
    records into (the capture itself, or None, when there is nothing else)."""
    observers = build_observers(config, capture, session)
    if len(observers.all) == (capture is not None):  # no observer but the capture
        yield capture
        return
    async with trio.open_nursery() as nursery:
        nursery.start_soon(observers.run)
        try:
            yield observers
        finally:
            nursery.cancel_scope.cancel()
            observers.close(time.time(), time.monotonic())
