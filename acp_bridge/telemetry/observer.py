"""The live telemetry observer: a bridge's forwards in, spans and metrics to the exporter.

Owns: the bounded queue between the forwarding path and the span builder, deciding which
lines are worth parsing (the relay leaves most streamed chunks unparsed, and so does this
unless a turn still waits for its first chunk), counting bytes and messages by direction,
and the bounded flush at the end. Must never: parse, build or export on the forwarding
path (`record` only appends), wait on the network, or raise into the bridge: a full queue
drops what does not fit and counts it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson
import trio
import trio.lowlevel

from acp_bridge.config import Config
from acp_bridge.core.forward import Forward, Verdict, complete_lines
from acp_bridge.telemetry import require_sdk
from acp_bridge.telemetry import spans as s
from acp_bridge.telemetry.builder import TraceBuilder
from acp_bridge.telemetry.spans import Observation, Seen, SpanRecord

log = logging.getLogger("acp_bridge.telemetry")

QUEUE_BYTES = 32 * 1024 * 1024  # forwarded bytes waiting for the builder, at most
DRAIN_INTERVAL = 0.05  # seconds between drains: batching keeps the cost off each message
SLICE = 2000  # lines built between two checkpoints, so the pumps are never kept waiting long
# Lines the builder needs: requests and responses (an "id" member), tool calls, the end of a
# v2 turn, a cancel. Streamed chunks only while a turn waits for its first one.
NEEDED = (b'"id"', b"tool_call", b"state_update", b"session/cancel")
CHUNK = b"agent_message_chunk"


def telemetry_observer(config: Config) -> TelemetryObserver:
    """The observer `[telemetry]` asks for, exporting through the SDK. Raises ConfigError
    when the SDK is missing or a setting cannot be used."""
    require_sdk()
    from acp_bridge.telemetry.sdk import ExportSettings, OtlpSink

    masked: Callable[[Any], Any] | None = None
    if config.telemetry.content:
        from acp_bridge.capture.redaction import Redactor

        secret = None if config.capture.include_system_prompt else config.system_prompt.text
        redactor = Redactor(config.capture.redact, secret)

        def masked(msg: Any) -> Any:
            try:
                return redactor.mask(msg)[0]
            except RecursionError:  # nested too deep to mask: nothing of it is sent
                return None

    sink = OtlpSink(ExportSettings(config.telemetry.endpoint, config.telemetry.protocol))
    return TelemetryObserver(TraceBuilder(masked), sink, flush_seconds=config.telemetry.flush_seconds)


class SpanSink(Protocol):
    """Where built spans and observations go (the SDK adapter; a list in tests)."""

    def spans(self, records: list[SpanRecord]) -> None: ...

    def observe(self, observations: list[Observation]) -> None: ...

    def shutdown(self, timeout: float) -> bool: ...


class TelemetryObserver:
    """An `observers.Observer` that turns the traffic into spans beside the pumps."""

    def __init__(self, builder: TraceBuilder, sink: SpanSink, *, flush_seconds: float = 2.0,
                 queue_bytes: int = QUEUE_BYTES) -> None:
        self.builder, self.sink = builder, sink
        self.flush_seconds = flush_seconds
        self._limit = queue_bytes
        self._queue: deque[tuple[float, Any]] = deque()
        self._queued = 0
        self.dropped = 0  # reads (or findings) not turned into telemetry: the queue was full
        self.lines = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"<TelemetryObserver queued={len(self._queue)} dropped={self.dropped} {self.builder!r}>"

    # -- on the forwarding path -------------------------------------------------------------------

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        size = 0
        for fwd in forwards:
            size += len(fwd.raw)
        if self._queued + size > self._limit or self._closed:
            self.dropped += 1
            return
        self._queued += size
        self._queue.append((wall, forwards))

    def finding(self, finding: Any, wall: float | None = None) -> None:
        """Hook for the health watchdog: a finding (with `code`, `level`, `session` and
        `message`) becomes an event on its session's span. Cheap; built with the traffic."""
        if self._closed or len(self._queue) > 65536:
            self.dropped += 1
            return
        import time

        self._queue.append((time.time() if wall is None else wall, finding))

    # -- beside the pumps -------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await trio.sleep(DRAIN_INTERVAL)
            while self._queue:
                self.drain(SLICE)
                await trio.lowlevel.checkpoint()  # let the pumps go first

    def drain(self, budget: int | None = None) -> None:
        """Build what is queued (about `budget` lines of it; None: all), and hand it on."""
        built = 0
        counts: dict[tuple[str, str], int] = {}
        while self._queue and (budget is None or built < budget):
            wall, item = self._queue.popleft()
            if isinstance(item, Sequence):
                for fwd in item:
                    self._queued -= len(fwd.raw)
                    built += self._forward(wall, fwd, counts)
            else:
                self.builder.finding(wall, getattr(item, "session", None), str(getattr(item, "code", "")),
                                     str(getattr(item, "level", "")), str(getattr(item, "message", "")))
        spans, observations = self.builder.take()
        observations.extend(Observation(name, value, ((s.DIRECTION, direction),))
                            for (name, direction), value in counts.items())
        try:
            if spans:
                self.sink.spans(spans)
            if observations:
                self.sink.observe(observations)
        except Exception:  # the SDK must not take the bridge down
            log.exception("telemetry: handing spans to the SDK failed")

    def _forward(self, wall: float, fwd: Forward, counts: dict[tuple[str, str], int]) -> int:
        """Build one forward; the number of lines parsed."""
        direction = fwd.direction.value
        if fwd.data:
            key = (s.BYTES, direction)
            counts[key] = counts.get(key, 0) + len(fwd.data)
        frame = fwd.frame
        if frame is None:
            if fwd.verdict is Verdict.EMIT:
                self._count(counts, direction, 1)
                self.builder.feed(Seen(wall, direction, _loads(fwd.data), "emit", fwd.rules))
                return 1
            if fwd.verdict is Verdict.OPAQUE:  # a piece of a line over the parse limit
                self._count(counts, direction, fwd.raw.endswith(b"\n"))
                return 0
            raw = fwd.raw
            self._count(counts, direction, raw.count(b"\n") if fwd.untouched_lines else 1)
            if not self._needed(raw):
                return 0
            parsed = 0
            for line in complete_lines(raw) if fwd.untouched_lines else (raw,):
                if self._needed(line):
                    parsed += 1
                    self.builder.feed(Seen(wall, direction, _loads(line)))
            return parsed
        self._count(counts, direction, 1)
        sent = None
        if fwd.verdict is Verdict.REWRITE and "system-prompt" in fwd.rules:
            sent = _loads(fwd.data)
        self.builder.feed(Seen(wall, frame.direction.value, frame.msg, fwd.verdict.value, fwd.rules, sent))
        return 1

    def _needed(self, raw: bytes) -> bool:
        for needle in NEEDED:
            if needle in raw:
                return True
        return CHUNK in raw and self.builder.awaiting_first_chunk

    @staticmethod
    def _count(counts: dict[tuple[str, str], int], direction: str, lines: int) -> None:
        key = (s.MESSAGES, direction)
        counts[key] = counts.get(key, 0) + lines

    def close(self, wall: float, mono: float) -> None:
        """Build what is left, end every open span at `wall`, and flush, within `flush_seconds`."""
        self._closed = True
        self.drain()
        self.builder.finish(wall)
        self.drain()
        if self.dropped:
            log.warning("telemetry: %d reads were not turned into telemetry (its queue was full)", self.dropped)
        self.sink.shutdown(self.flush_seconds)


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
