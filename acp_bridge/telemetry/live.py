"""The live telemetry observer: a bridge's forwards in, spans and metrics to the exporter.

Owns: the bounded queue between the forwarding path and the span builder, deciding which
lines are worth parsing (the relay leaves most streamed chunks unparsed, and so does this
unless a turn still waits for its first chunk), counting bytes and messages by direction,
and the bounded flush at the end. Must never: parse, build or export on the forwarding
path (`record` only appends), wait on the network, or raise into the bridge: a full queue
drops what does not fit and counts it, and any exception while building turns telemetry off
(said once on stderr) with the traffic and the exit status untouched.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson
import trio
import trio.lowlevel

from acp_bridge.config import Config
from acp_bridge.core.findings import Finding
from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.messages import Direction
from acp_bridge.core.methods import SESSION_CANCEL
from acp_bridge.core.rewrites.system_prompt_options import NAME as SYSTEM_PROMPT
from acp_bridge.telemetry import require_sdk
from acp_bridge.telemetry import spans as s
from acp_bridge.telemetry.builder import TraceBuilder
from acp_bridge.telemetry.spans import Observation, SpanRecord, Timed

log = logging.getLogger("acp_bridge.telemetry")

QUEUE_BYTES = 4 * 1024 * 1024  # forwarded bytes waiting for the builder, at most
DRAIN_INTERVAL = 0.05  # seconds between drains: batching keeps the cost off each message
SLICE_SECONDS = 0.002  # building between two checkpoints: the most a message can wait for it
# The most of the bridge's time that building may take. It shares the thread with the
# pumps, so under a flood it would otherwise slow the relay down; held to this share, the
# queue fills instead, and what does not fit is dropped and counted (the relay comes first).
SHARE = 0.05
CLOSE_SECONDS = 0.1  # building what is still queued at the end, at most (then: dropped)
# Handing the spans still open at the end to the SDK, at most (then: dropped and counted).
# The builder holds a few thousand at most (its caps); each takes the SDK ~40 us.
FINISH_SECONDS = 0.1
FINISH_BATCH = 256  # spans handed between two looks at the clock at the end
# Lines the relay did not parse that the builder needs. Requests and responses are not among
# them: the relay parses every line with an "id" member (or a `\u` escape), so they come
# with their frame. Toward the client: tool calls (`toolCallId` is required in both kinds),
# the end of a v2 turn only while one waits for it, and chunks only while a turn waits for
# its first one. Toward the agent: a cancel. Each needle is one more pass over the bytes,
# so there are as few as can be.
TOOL_CALL = b'CallId"'
STATE_UPDATE = b"state_update"
CHUNK = b"agent_message_chunk"
CANCEL = SESSION_CANCEL.encode()


def telemetry_observer(config: Config) -> TelemetryObserver:
    """The observer `[telemetry]` asks for, exporting through the SDK. Raises ConfigError
    when the SDK is missing or a setting cannot be used."""
    require_sdk()
    from acp_bridge.errors import ConfigError

    try:  # the SDK reads some OTEL_* variables as it is imported, and raises on a bad one
        from acp_bridge.telemetry.sdk import ExportSettings, OtlpSink
    except ValueError as exc:
        raise ConfigError(f"OpenTelemetry settings: {exc}") from None

    builder = TraceBuilder()
    if config.telemetry.content:
        from acp_bridge.capture.redaction import Redactor
        from acp_bridge.capture.text_redaction import mask_text_secrets

        secret = None if config.capture.include_system_prompt else config.system_prompt.text
        redactor = Redactor(config.capture.redact, secret)

        def masked(msg: Any) -> Any:
            try:
                return redactor.mask(msg)[0]
            except RecursionError:  # nested too deep to mask: nothing of it is sent
                return None

        def masked_text(text: str) -> str:
            return mask_text_secrets(text, secret)

        builder = TraceBuilder(masked, masked_text=masked_text)
    metrics = os.environ.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() != "none"  # e.g. for Jaeger
    sink = OtlpSink(ExportSettings(config.telemetry.endpoint, config.telemetry.protocol, metrics))
    return TelemetryObserver(builder, sink, flush_seconds=config.telemetry.flush_seconds)


class _Lines:
    """The rest of a run of unparsed lines a drain's slice ran out of time in (queued again)."""

    __slots__ = ("data", "direction")

    def __init__(self, direction: Direction, data: bytes) -> None:
        self.direction, self.data = direction, data


class SpanSink(Protocol):
    """Where built spans and observations go (the SDK adapter; a list in tests)."""

    def spans(self, records: list[SpanRecord]) -> None: ...

    def observe(self, observations: list[Observation]) -> None: ...

    def shutdown(self, timeout: float) -> bool: ...

    @property
    def export_cpu(self) -> float:
        """CPU seconds spent exporting so far (in the SDK's thread, competing for the GIL)."""
        ...


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
        self.failed = False  # building raised: telemetry is off for the rest of the connection

    def __repr__(self) -> str:
        return f"<TelemetryObserver queued={len(self._queue)} dropped={self.dropped} {self.builder!r}>"

    # -- on the forwarding path -------------------------------------------------------------------

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        size = 0
        for fwd in forwards:
            size += len(fwd.raw)
        # A read larger than the whole bound is taken when nothing else waits (a 5 MB
        # file's content is one message): the bound holds the queue to one such read.
        if (self._queued and self._queued + size > self._limit) or self._closed:
            self.dropped += 1
            return
        self._queued += size
        self._queue.append((wall, forwards))

    def finding(self, wall: float, finding: Finding) -> None:
        """A finding the health watchdog told becomes an event on its session's span. Cheap;
        built with the traffic. A total at the end is no occurrence: it makes no event."""
        if finding.total:
            return
        if self._closed or len(self._queue) > 65536:
            self.dropped += 1
            return
        self._queue.append((wall, finding))

    # -- beside the pumps -------------------------------------------------------------------------

    async def run(self) -> None:
        exported = self.sink.export_cpu
        while not self._closed:
            await trio.sleep(DRAIN_INTERVAL)
            while self._queue and not self._closed:
                start = time.perf_counter()
                self._safely(self.drain, SLICE_SECONDS)
                # Building here, and encoding in the SDK's export thread: both take the
                # interpreter from the pumps, so both count against the share.
                spent = time.perf_counter() - start + self.sink.export_cpu - exported
                exported = self.sink.export_cpu
                await trio.sleep(spent * (1 - SHARE) / SHARE)  # the pumps go first

    def _safely(self, build: Callable[..., None], *args: Any) -> bool:
        """`build(*args)`; any exception turns telemetry off for good, said once (the traffic
        goes on untouched, and the exit status is the relay's). Whether it went well."""
        if self.failed:
            return False
        try:
            build(*args)
            return True
        except Exception:
            self.failed = self._closed = True
            self.dropped += len(self._queue)
            self._queue.clear()
            self._queued = 0
            log.error("telemetry: building spans failed; telemetry is off for the rest of this connection, "
                      "the relay goes on", exc_info=True)
            return False

    def drain(self, seconds: float | None = None) -> None:
        """Build what is queued (for about `seconds`, handing spans to the SDK included;
        None: all of it), and hand it on."""
        deadline = None if seconds is None else time.perf_counter() + seconds
        counts: dict[tuple[str, str], int] = {}
        observations: list[Observation] = []
        begun = False  # each drain builds something, however late it starts
        while self._queue and (deadline is None or not begun or time.perf_counter() < deadline):
            begun = True
            wall, item = self._queue.popleft()
            if isinstance(item, _Lines):
                self._queued -= len(item.data)
                rest = self._lines(wall, item.direction, item.data, deadline)
                if rest:
                    self._queued += len(rest)
                    self._queue.appendleft((wall, _Lines(item.direction, rest)))
            elif isinstance(item, Sequence):
                for index, fwd in enumerate(item):
                    if deadline is not None and index and time.perf_counter() >= deadline:
                        self._queue.appendleft((wall, item[index:]))  # one read can hold 10,000 lines
                        break
                    self._queued -= len(fwd.raw)
                    rest = self._forward(wall, fwd, counts, deadline)
                    if rest:  # a run of lines the slice ran out in: the rest of it first, next time
                        self._queued += len(rest)
                        if index + 1 < len(item):
                            self._queue.appendleft((wall, item[index + 1:]))
                        self._queue.appendleft((wall, _Lines(fwd.direction, rest)))
                        break
                    if fwd.frame is not None:  # a parsed line may have ended spans
                        spans, observed = self.builder.take()
                        observations.extend(observed)
                        if spans:
                            self._hand(self.sink.spans, spans)
            else:
                self.builder.finding(wall, item.session, item.code, item.level.label, item.text)
            spans, observed = self.builder.take()
            observations.extend(observed)
            if spans:
                self._hand(self.sink.spans, spans)
        spans, observed = self.builder.take()  # what `finish` ended
        if spans:
            self._hand(self.sink.spans, spans)
        observations.extend(observed)
        observations.extend(Observation(name, value, ((s.DIRECTION, direction),))
                            for (name, direction), value in counts.items())
        if observations:
            self._hand(self.sink.observe, observations)

    @staticmethod
    def _hand(to: Callable[[Any], None], what: Any) -> None:
        try:
            to(what)
        except Exception:  # the SDK must not take the bridge down
            log.exception("telemetry: handing spans to the SDK failed")

    def _forward(self, wall: float, fwd: Forward, counts: dict[tuple[str, str], int],
                 deadline: float | None = None) -> bytes:
        """Build one forward (counted whole); the lines of a run not built by `deadline`."""
        direction = fwd.direction.value
        if fwd.data:
            key = (s.BYTES, direction)
            counts[key] = counts.get(key, 0) + len(fwd.data)
        frame = fwd.frame
        if frame is None:
            if fwd.verdict is Verdict.EMIT:
                self._count(counts, direction, 1)
                self.builder.feed(Timed(wall, direction, _loads(fwd.data), "emit", fwd.rules, request=fwd.request))
                return b""
            if fwd.verdict is Verdict.OPAQUE:  # a piece of a line over the parse limit
                self._count(counts, direction, fwd.raw.endswith(b"\n"))
                return b""
            raw = fwd.raw
            self._count(counts, direction, raw.count(b"\n") if fwd.untouched_lines else 1)
            if not self._needed(raw, fwd.direction is Direction.TO_CLIENT):
                return b""
            if not fwd.untouched_lines:
                self.builder.feed(Timed(wall, direction, _loads(raw)))
                return b""
            return self._lines(wall, fwd.direction, raw, deadline)
        if fwd.data:  # messages that went out (a dropped one did not)
            self._count(counts, direction, 1)
        sent = None
        if fwd.verdict is Verdict.REWRITE and SYSTEM_PROMPT in fwd.rules:
            sent = _loads(fwd.data)
        self.builder.feed(Timed(wall, frame.direction.value, frame.msg, fwd.verdict.value, fwd.rules, sent,
                                fwd.request))
        return b""

    def _lines(self, wall: float, to: Direction, run: bytes, deadline: float | None) -> bytes:
        """Build the lines of `run` (each ends with "\\n") that are needed, until `deadline`:
        a 1 MiB read holds thousands of tool calls. The lines not reached."""
        to_client, direction = to is Direction.TO_CLIENT, to.value
        start, end = 0, len(run)
        while start < end:
            stop = run.find(b"\n", start) + 1 or end  # each ends with one; a last without: to the end
            line = run[start:stop]
            start = stop
            if self._needed(line, to_client):
                self.builder.feed(Timed(wall, direction, _loads(line)))
                if deadline is not None and start < end and time.perf_counter() >= deadline:
                    return run[start:]
        return b""

    def _needed(self, raw: bytes, to_client: bool) -> bool:
        if not to_client:
            return CANCEL in raw
        builder = self.builder
        return (TOOL_CALL in raw or (builder.awaiting_idle and STATE_UPDATE in raw)
                or (builder.awaiting_first_chunk and CHUNK in raw))

    @staticmethod
    def _count(counts: dict[tuple[str, str], int], direction: str, lines: int) -> None:
        key = (s.MESSAGES, direction)
        counts[key] = counts.get(key, 0) + lines

    def close(self, wall: float, mono: float) -> None:
        """Build what is left (CLOSE_SECONDS at most), end every open span at `wall` and hand
        them on (FINISH_SECONDS at most), and flush, within `flush_seconds`."""
        self._closed = True
        self._safely(self.drain, CLOSE_SECONDS)
        self.dropped += len(self._queue)
        self._queue.clear()
        self._safely(self._finish, wall)
        if self.dropped:
            log.warning("telemetry: %d reads were not turned into telemetry (its queue was full)", self.dropped)
        self.sink.shutdown(self.flush_seconds)

    def _finish(self, wall: float) -> None:
        self.builder.finish(wall)
        spans, observed = self.builder.take()
        spans.sort(key=lambda span: span.parent_id is not None)  # sessions first: the roots of their traces
        deadline = time.perf_counter() + FINISH_SECONDS
        for at in range(0, len(spans), FINISH_BATCH):
            if at and time.perf_counter() >= deadline:
                log.warning("telemetry: %d spans still open at exit were not sent (no time left)", len(spans) - at)
                break
            self._hand(self.sink.spans, spans[at:at + FINISH_BATCH])
        if observed:
            self._hand(self.sink.observe, observed)


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
