"""Shared by the telemetry tests: messages, a builder fed as the relay feeds it, the shape of
the spans it made, and a sink that keeps them."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from acp_bridge.core import Connection
from acp_bridge.telemetry.builder import TraceBuilder
from acp_bridge.telemetry.offline import paired
from acp_bridge.telemetry.spans import Observation, SpanRecord, Timed

A, C = "to-agent", "to-client"
T0 = 1_800_000_000.0


def req(id_: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def ok(id_: Any, **result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def update(session: str, **fields: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": fields}}


def feeder(builder: TraceBuilder) -> Callable[[float, str, Any], None]:
    """`feed(wall, direction, msg)`: a message to `builder`, paired by a `Connection` as the
    relay pairs them (as `export --otlp` feeds it)."""
    session = Connection()

    def feed(wall: float, direction: str, msg: Any) -> None:
        builder.feed(paired(session, Timed(wall, direction, msg)))

    return feed


def build(script: list[tuple[float, str, Any]], end: float = 100.0, **kwargs: Any) -> list[SpanRecord]:
    builder = TraceBuilder(rng=random.Random(7), **kwargs)
    feed = feeder(builder)
    for at, direction, msg in script:
        feed(T0 + at, direction, msg)
    builder.finish(T0 + end)
    return builder.take()[0]


def shape(spans: list[SpanRecord]) -> list[tuple[str, str, float, float]]:
    """(name, parent's name, start, end) with times relative to T0, in the order spans ended."""
    by_id = {span.span_id: span for span in spans}
    return [(span.name, by_id[span.parent_id].name if span.parent_id else "", round(span.start - T0, 6),
             round((span.end or 0) - T0, 6)) for span in spans]


class ListSink:
    """A SpanSink that keeps what it is given."""

    def __init__(self) -> None:
        self.records: list[SpanRecord] = []
        self.observations: list[Observation] = []
        self.export_cpu = 0.0
        self.closed_with: float | None = None

    def spans(self, records: list[SpanRecord]) -> None:
        self.records.extend(records)

    def observe(self, observations: list[Observation]) -> None:
        self.observations.extend(observations)

    def shutdown(self, timeout: float) -> bool:
        self.closed_with = timeout
        return True
