"""The span builder's records: the open state it keeps, and where its spans are made and ended.

Owns: the records of open sessions, turns and requests (`SessionSpan`, `TurnSpan`,
`RequestSpan`: spans with what their end needs, not the relay's `core.Connection` and
`Pending`); choosing span and trace ids; ending a span once (never before it started) and
collecting what ended and the metric observations made, for `take()`; and the bound on
distinct metric values from the wire.
Must never: do IO, read a clock (every time is passed in), import the SDK, or decide when a
span ends (the builder does, from the traffic).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from acp_bridge.core.session import Pending
from acp_bridge.telemetry import spans as s
from acp_bridge.telemetry.fields import MAX_METRIC_VALUES
from acp_bridge.telemetry.spans import Observation, SpanRecord


@dataclass(slots=True)
class TurnSpan:
    """A prompt turn in progress: its span and what its end needs."""

    span: SpanRecord
    first_chunk: float | None = None
    acked: bool = False  # v2: the prompt's response came without a stop reason
    text: list[str] = field(default_factory=list)  # the agent's reply (content only)
    size: int = 0


@dataclass(slots=True)
class SessionSpan:
    """An ACP session's span, its turn in progress and its open tool calls."""

    span: SpanRecord
    key: Any  # its sessionId's key
    turn: TurnSpan | None = None
    tools: OrderedDict[Any, SpanRecord] = field(default_factory=OrderedDict)  # O(1) eviction of the oldest


@dataclass(slots=True)
class RequestSpan:
    """A request's span, until the response the relay's session pairs with `pending`."""

    span: SpanRecord
    pending: Pending  # held, so that its identity (the key it is found by) stays its own
    msg: Any  # the request, for what its response needs (permission options)


class SpanLedger:
    """Spans made and ended, observations made; `take()` hands them over.

    Args:
        rng: where span and trace ids come from (seeded in tests).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()  # seeded from the OS once: ids must be unique, not secret
        self.agent: dict[str, str] = {}  # gen_ai.agent.name / version, from initialize
        self._done: list[SpanRecord] = []
        self._observations: list[Observation] = []
        self._metric_values: dict[str, set[str]] = {}

    def take(self) -> tuple[list[SpanRecord], list[Observation]]:
        """The spans that ended and the metric observations made since the last call."""
        done, observed = self._done, self._observations
        self._done, self._observations = [], []
        return done, observed

    def _bounded(self, key: str, value: str) -> str:
        """A metric attribute's value from the wire, or "other" once MAX_METRIC_VALUES
        distinct ones have been seen for `key`: each is a series the SDK keeps."""
        seen = self._metric_values.setdefault(key, set())
        if value in seen:
            return value
        if len(seen) >= MAX_METRIC_VALUES:
            return "other"
        seen.add(value)
        return value

    def _agent_attrs(self) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted(self.agent.items()))

    def _span(self, name: str, wall: float, parent: SpanRecord | None, attrs: dict[str, Any],
              kind: str = s.INTERNAL) -> SpanRecord:
        trace_id = parent.trace_id if parent is not None else self._rng.getrandbits(128) or 1
        return SpanRecord(name, trace_id, self._rng.getrandbits(64) or 1,
                          parent.span_id if parent is not None else None, wall, kind, attrs)

    def _end(self, span: SpanRecord, wall: float) -> None:
        if span.end is not None:  # ended already (a turn a newer prompt replaced, still pending)
            return
        span.end = max(wall, span.start)
        self._done.append(span)
