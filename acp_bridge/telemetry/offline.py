"""A capture as telemetry: its records fed to the span builder with their recorded times.

Owns: turning capture records (docs/capture-format.md) back into `Timed` messages, paired by
a `core.session.Connection` as the relay paired them (`paired`), and
`acp-bridge export CAPTURE --otlp`: the same spans a live bridge would have sent, with the
times the capture recorded. Metrics are not sent (an OTLP metric carries the time it was
collected, not a recorded one). Must never: write to the capture, or send content: a
capture holds prompt text and tool output, and export sends none of it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from acp_bridge.capture.reader import record_message
from acp_bridge.core.messages import Direction, Frame, Kind
from acp_bridge.core.protocol import Json
from acp_bridge.core.session import Connection
from acp_bridge.telemetry.builder import TraceBuilder
from acp_bridge.telemetry.spans import SpanRecord, Timed

# The times a span can carry: OTLP sends nanoseconds since 1970 in 64 bits, which many
# collectors read as signed (up to 2262). A capture edited by hand may hold any number.
LAST_WALL = 2**63 / 1e9


def span_time(wall: float) -> bool:
    """Can a span start or end at `wall` (seconds since 1970)?"""
    return 0 <= wall < LAST_WALL


_DIRECTIONS = {"to-agent": Direction.TO_AGENT, "to-client": Direction.TO_CLIENT}


def timed_message(record: Json) -> Timed | None:
    """The message a capture record holds, with its time (None: not a message). Not paired
    yet: `paired` adds the request."""
    if record.get("type") != "message":
        return None
    wall = record.get("time")
    direction = record.get("direction")
    if not isinstance(wall, (int, float)) or isinstance(wall, bool) or direction not in ("to-agent", "to-client"):
        return None
    verdict = record.get("verdict", "pass")
    rules = tuple(record.get("rules") or ())
    msg: Any = record_message(record, "out" if verdict == "emit" else "raw")
    sent = record_message(record, "out") if verdict == "rewrite" else None
    return Timed(float(wall), direction, msg, verdict, rules, sent)


def paired(session: Connection, timed: Timed) -> Timed:
    """`timed`, with the request it is or answers as the relay's session paired it (set on
    it): a request is tracked unless it was dropped (the relay forgets those), and a
    response, the bridge's own answers included, is paired with the oldest request in
    flight with its id from the other side."""
    msg = timed.msg
    if type(msg) is not dict or "id" not in msg:
        return timed
    direction = _DIRECTIONS[timed.direction]
    if "method" in msg:
        if isinstance(msg["method"], str) and timed.verdict != "drop":
            timed.request = session.on_request(Frame(direction, b"", Kind.REQUEST, msg), timed.wall)
    elif "result" in msg or "error" in msg:
        timed.request = session.on_response(Frame(direction, b"", Kind.RESPONSE, msg))
    return timed


def capture_spans(records: Iterable[Json], builder: TraceBuilder | None = None,
                  skipped: Callable[[Json], None] | None = None) -> Iterator[SpanRecord]:
    """Every span of a capture's records, as they end; what is still open at the end record
    (or the last message) ends there, marked unfinished. A record whose time no span can
    carry (`span_time`) is left out, and handed to `skipped`."""
    builder = builder or TraceBuilder()
    session = Connection()  # pairs requests and responses as the relay did
    builder.released = session.forget  # what the builder let go of: held to its caps
    last: float | None = None
    for record in records:
        if record.get("type") == "end" and isinstance(record.get("time"), (int, float)):
            if span_time(record["time"]):
                last = float(record["time"])
            elif skipped is not None:
                skipped(record)
            continue
        timed = timed_message(record)
        if timed is None:
            continue
        if not span_time(timed.wall):
            if skipped is not None:
                skipped(record)
            continue
        builder.feed(paired(session, timed))
        last = timed.wall if last is None else max(last, timed.wall)
        yield from builder.take()[0]
    if last is not None:
        builder.finish(last)
    yield from builder.take()[0]


EXPORT_SECONDS = 15.0  # how long `export --otlp` waits for the collector at the end
BATCH = 256  # spans handed to the SDK before waiting for it to send them (at most half its queue)


def send_capture(records: Iterable[Json], name: str) -> tuple[int, str]:
    """`export CAPTURE --otlp`: the exit status and the line to say on stderr. Spans go in
    batches, each sent before the next (a capture can hold more spans than the SDK's queue);
    once the collector has failed to take one, the rest are counted, not sent. What the
    telemetry says on the way (a collector that refuses) is said as the bridge's, prefixed."""
    said = logging.getLogger("acp_bridge.telemetry")
    handler: logging.Handler | None = None
    if not said.hasHandlers():  # `export` sets up no logging: Python's last resort would print it bare
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("acp-bridge: %(message)s"))
        said.addHandler(handler)
    try:
        return _send(records, name)
    finally:
        if handler is not None:
            said.removeHandler(handler)


def _send(records: Iterable[Json], name: str) -> tuple[int, str]:
    from acp_bridge.errors import ConfigError
    from acp_bridge.telemetry import missing_sdk

    problem = missing_sdk()
    if problem is not None:
        return 2, problem
    try:  # the SDK reads some OTEL_* variables as it is imported, and raises on a bad one
        from acp_bridge.telemetry.sdk import ExportSettings, OtlpSink

        sink = OtlpSink(ExportSettings(metrics=False), live=False)
    except ValueError as exc:
        return 2, f"OpenTelemetry settings: {exc}"
    except ConfigError as exc:
        return 2, str(exc)
    built = 0
    size = max(1, min(BATCH, sink.queue_size // 2))
    batch: list[SpanRecord] = []
    odd = 0  # records with a time no span can carry
    first_odd: Any = None  # the seq of the first (None: the end record)

    def skipped(record: Json) -> None:
        nonlocal odd, first_odd
        odd += 1
        if odd == 1:
            first_odd = record.get("seq")

    for span in capture_spans(records, skipped=skipped):
        built += 1
        if sink.failed:
            continue
        batch.append(span)
        if len(batch) == size:
            sink.spans(batch)
            sink.flush()
            batch = []
    if batch and not sink.failed:
        sink.spans(batch)
    if odd:
        logging.getLogger("acp_bridge.telemetry").warning(
            "%s: %d record(s) with a time no span can carry (before 1970 or after 2262) were left out "
            "(the first: %s)", name, odd, "the end record" if first_odd is None else f"seq {first_odd}")
    finished = sink.shutdown(EXPORT_SECONDS)
    if sink.failed or not finished or sink.exported < built:
        return 1, f"{name}: {sink.exported} of {built} spans taken by {sink.where}; the rest could not be sent"
    return 0, f"{name}: sent {sink.exported} spans to {sink.where}"
