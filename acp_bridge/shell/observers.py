"""Observers: what watches the traffic beside the capture (health watchdog, telemetry).

Owns: the `Observer` protocol, building the observers a configuration asks for, running
their background work beside the bridge, and fanning each read's forwards out to the
capture and then to every observer. Must never: change or delay traffic. An observer's
`record` is called on the forwarding path, after the capture has the forwards and before
they are sent, so it must only note what it needs (no I/O, no waiting); anything slower
belongs in its `run`, which runs beside the pumps.

With no observer configured, `observing` hands back the capture itself: nothing is added
to the forwarding path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol

import trio

from acp_bridge.config import Config
from acp_bridge.core import Forward
from acp_bridge.shell.bridge import CaptureSink

if TYPE_CHECKING:
    from acp_bridge.core.session import Session
    from acp_bridge.shell.capture_file import CaptureFile

log = logging.getLogger("acp_bridge.shell.observers")


class Observer(Protocol):
    """Something that watches every forward of a connection."""

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        """Note one read's forwards (synchronous, cheap, never raises for bad traffic)."""

    async def run(self) -> None:
        """Background work beside the pumps (timers, export); cancelled when they end."""

    def close(self, wall: float, mono: float) -> None:
        """The connection has ended: finish up, in bounded time (before the capture's end
        record is written)."""


class FanOut:
    """A CaptureSink that hands each read's forwards to the capture, then to each observer."""

    __slots__ = ("capture", "observers")

    def __init__(self, capture: CaptureSink | None, observers: Sequence[Observer]) -> None:
        self.capture = capture
        self.observers = tuple(observers)

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        if self.capture is not None:
            self.capture.record(wall, mono, forwards)
        for observer in self.observers:
            observer.record(wall, mono, forwards)


def build_observers(config: Config, capture: CaptureFile | None, session: Session | None = None) -> list[Observer]:
    """The observers `config` asks for. Each is imported only when it is asked for.
    `session`: the relay's, whose requests in flight an observer may read (not change)."""
    observers: list[Observer] = []
    telemetry = None
    if config.telemetry.enabled:
        from acp_bridge.telemetry.live import telemetry_observer

        telemetry = telemetry_observer(config)
        observers.append(telemetry)
    if config.health.enabled:
        from acp_bridge.health.watchdog import Watchdog

        watchdog = Watchdog(config, capture, session)
        if telemetry is not None:  # findings become span events too
            watchdog.engine.listeners.append(_told_to(telemetry))
        observers.append(watchdog)
    return observers


def _told_to(telemetry: Any) -> Callable[[Any], None]:
    """A health listener that hands each finding to telemetry's hook, in the terms the hook
    takes (`code`, `level` as a word, `session`, `message`)."""
    def tell(finding: Any) -> None:
        telemetry.finding(SimpleNamespace(code=finding.code, level=finding.level.label,
                                          session=finding.session, message=finding.text))
    return tell


@asynccontextmanager
async def observing(config: Config, capture: Any, session: Session | None = None) -> AsyncIterator[CaptureSink | None]:
    """Run the configured observers for the life of the block; yield the sink the bridge
    records into (the capture itself when there are no observers)."""
    observers = build_observers(config, capture, session)
    if not observers:
        yield capture
        return
    async with trio.open_nursery() as nursery:
        for observer in observers:
            nursery.start_soon(observer.run)
        try:
            yield FanOut(capture, observers)
        finally:
            nursery.cancel_scope.cancel()
            wall, mono = time.time(), time.monotonic()
            # Last built, first closed: the watchdog's findings at the end still reach telemetry.
            for observer in reversed(observers):
                try:
                    observer.close(wall, mono)
                except Exception:  # an observer must not take the bridge's exit status down
                    log.error("observer %r failed to close (-vv shows why)", observer)
                    log.debug("observer failure", exc_info=True)
