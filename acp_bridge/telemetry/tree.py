"""The open span tree: sessions, their turns and tool calls, and the requests in flight.

Owns: the tables of what is open (a session per `sessionId`, its turn and tool calls, a
request per `Pending` the relay's session tracks), their caps (the oldest is ended, marked
`acp.evicted`, to make room), and ending: a span never outlives its parent, so ending one
ends what is still open under it, marked `acp.unfinished`; a turn's end carries its reply
(content only) and its metrics. Must never: read a message (the builder decides from the
traffic what starts and ends), do IO, read a clock, or import the SDK.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core.session import Pending
from acp_bridge.telemetry import spans as s
from acp_bridge.telemetry.fields import MAX_CONTENT, json_text, key_of, text_of
from acp_bridge.telemetry.ledger import RequestSpan, SessionSpan, SpanLedger, TurnSpan
from acp_bridge.telemetry.spans import Observation, SpanRecord

MAX_SESSIONS = 1024
MAX_PENDING = 256  # requests in flight: a handful in a healthy connection
MAX_TOOLS = 1024  # open tool calls per session
MAX_OPEN_TOOLS = 4096  # open tool calls across every session: what the exit ends and flushes


class SpanTree(SpanLedger):
    """What is open, and how it ends (see the module docstring). Args as `TraceBuilder`'s."""

    def __init__(self, masked: Callable[[Any], Any] | None = None, rng: random.Random | None = None,
                 masked_text: Callable[[str], str] = lambda text: text) -> None:
        super().__init__(rng)
        self.masked = masked
        self.masked_text = masked_text
        # Ordered: the oldest goes first when full (a plain dict's first key is found by a
        # scan past every deleted slot, which made eviction quadratic).
        self._sessions: OrderedDict[Any, SessionSpan] = OrderedDict()
        # By the identity of the relay's `Pending`: its session pairs, this keeps the span.
        self._requests: OrderedDict[int, RequestSpan] = OrderedDict()
        # Told of each request whose span ended before any answer (evicted, or ended with its
        # parent): offline, where nothing else needs it, its session forgets it too, which
        # holds that session to these caps and pairs a later reuse of its id as before.
        self.released: Callable[[Pending], None] | None = None
        self.evicted = 0
        self._waiting = 0  # open turns without their first chunk yet
        self._acked = 0  # open v2 turns: acknowledged, waiting for an idle state_update
        self._turns = 0  # open turns (any of them may end with an idle state_update)
        # Every open tool call, oldest first, by (session key, tool key): the cap across sessions.
        self._tools: OrderedDict[tuple[Any, Any], SessionSpan] = OrderedDict()

    @property
    def awaiting_first_chunk(self) -> bool:
        """Whether an `agent_message_chunk` would tell the builder something (a turn still
        waiting for its first chunk, or content being kept): the observer parses chunks only then."""
        return self.masked is not None or self._waiting > 0

    @property
    def awaiting_idle(self) -> bool:
        """Whether a turn is open, which an idle `state_update` would end (v2; it may come
        before the prompt's acknowledgment): the observer looks for those only then."""
        return self._turns > 0

    @property
    def open_spans(self) -> int:
        """Spans `finish` would end: sessions, their turns, tool calls, requests in flight."""
        return len(self._sessions) + self._turns + len(self._tools) + len(self._requests)

    def finish(self, wall: float) -> None:
        """The connection (or capture) ended at `wall`: end every open span, marked unfinished."""
        for request in self._requests.values():
            if request.span.end is None:
                request.span.attributes[s.UNFINISHED] = True
                self._end(request.span, wall)
        self._requests.clear()
        for state in self._sessions.values():
            self._close_session(state, wall, unfinished=True)
        self._sessions.clear()

    # -- looking up -------------------------------------------------------------------------------

    def _current(self, session_id: Any) -> SpanRecord | None:
        """A session's open turn span, else its session span (None: unknown session)."""
        state = self._sessions.get(key_of(session_id)) if session_id is not None else None
        if state is None:
            return None
        return state.turn.span if state.turn is not None else state.span

    def _session_span(self, session_id: Any) -> SpanRecord | None:
        state = self._sessions.get(key_of(session_id)) if session_id is not None else None
        return state.span if state is not None else None

    def _request_span(self, pending: Pending | None) -> SpanRecord | None:
        request = self._requests.get(id(pending)) if pending is not None else None
        return request.span if request is not None else None

    def _turn_of(self, session_id: Any) -> TurnSpan | None:
        state = self._sessions.get(key_of(session_id)) if session_id is not None else None
        return state.turn if state is not None else None

    # -- opening, within the caps -----------------------------------------------------------------

    def _session(self, session_id: Any, wall: float) -> SessionSpan:
        """The session's record, its span started at `wall` if it is new."""
        key = key_of(session_id)
        state = self._sessions.get(key)
        if state is None:
            if len(self._sessions) >= MAX_SESSIONS:
                _, oldest = self._sessions.popitem(last=False)
                self.evicted += 1
                oldest.span.attributes[s.EVICTED] = True
                self._close_session(oldest, wall, unfinished=True)
            span = self._span("session", wall, None, {s.CONVERSATION: text_of(session_id), **self.agent})
            state = self._sessions[key] = SessionSpan(span, key)
        return state

    def _room_for_request(self, wall: float) -> None:
        """Make room for one more request in flight (before its parent is chosen: ending an
        evicted prompt ends its turn)."""
        if len(self._requests) < MAX_PENDING:
            return
        _, oldest = self._requests.popitem(last=False)
        self.evicted += 1
        if self.released is not None:
            self.released(oldest.pending)
        if oldest.span.end is not None:
            return
        oldest.span.attributes[s.EVICTED] = True
        prompt = oldest.pending.method == p.SESSION_PROMPT
        state = self._sessions.get(key_of(oldest.pending.session_id)) if prompt else None
        if state is not None and state.turn is not None and state.turn.span is oldest.span:
            self._end_turn(state, wall, None)
        else:
            self._end(oldest.span, wall)

    def _room_for_tool(self, state: SessionSpan, wall: float) -> None:
        if len(state.tools) >= MAX_TOOLS:
            self._evict_tool(state, next(iter(state.tools)), wall)
        if len(self._tools) >= MAX_OPEN_TOOLS:
            (_, tool_key), owner = next(iter(self._tools.items()))
            self._evict_tool(owner, tool_key, wall)

    # -- ending -----------------------------------------------------------------------------------

    def _evict_tool(self, state: SessionSpan, key: Any, wall: float) -> None:
        span = self._forget_tool(state, key)
        self.evicted += 1
        span.attributes[s.EVICTED] = True
        self._end_tool(span, wall)

    def _forget_tool(self, state: SessionSpan, key: Any) -> SpanRecord:
        span = state.tools.pop(key)
        self._tools.pop((state.key, key), None)
        return span

    def _end_tool(self, span: SpanRecord, wall: float) -> None:
        self._end_requests_under(span, wall)
        if span.attributes.get(s.TOOL_STATUS) == "failed":
            span.error = "tool call failed"
        self._end(span, wall)
        attrs = span.attributes
        self._observations.append(Observation(s.TOOL_DURATION, max(0.0, wall - span.start), (
            (s.TOOL_KIND, self._bounded(s.TOOL_KIND, attrs.get(s.TOOL_KIND, ""))),
            (s.TOOL_STATUS, self._bounded(s.TOOL_STATUS, attrs.get(s.TOOL_STATUS, ""))))))

    def _end_turn(self, state: SessionSpan, wall: float, stop: str | None, *, unfinished: bool = False) -> None:
        turn = state.turn
        if turn is None:
            return
        state.turn = None
        self._turns -= 1
        if turn.first_chunk is None:
            self._waiting -= 1
        if turn.acked:
            self._acked -= 1
        span = turn.span
        for key in [key for key, tool in state.tools.items() if tool.parent_id == span.span_id]:
            tool = self._forget_tool(state, key)  # a tool call never done: it ends with its turn
            tool.attributes[s.UNFINISHED] = True
            self._end_tool(tool, wall)
        self._end_requests_under(span, wall)
        if stop is not None:
            span.attributes[s.FINISH_REASONS] = (text_of(stop),)
        if unfinished:
            span.attributes[s.UNFINISHED] = True
        if self.masked is not None and turn.text:
            text = self.masked_text("".join(turn.text))[:MAX_CONTENT]
            reply = [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]
            span.attributes[s.OUTPUT_MESSAGES] = json_text(reply)
        self._end(span, wall)
        self._observations.append(Observation(s.TURN_DURATION, max(0.0, wall - span.start), (
            *self._agent_attrs(), (s.FINISH_REASONS, self._bounded(s.FINISH_REASONS, stop or "")))))

    def _close_session(self, state: SessionSpan, wall: float, *, unfinished: bool) -> None:
        if state.turn is not None:
            self._end_turn(state, wall, None, unfinished=True)
        for key in list(state.tools):
            tool = self._forget_tool(state, key)
            tool.attributes[s.UNFINISHED] = True
            self._end_tool(tool, wall)
        self._end_requests_under(state.span, wall)
        if unfinished:
            state.span.attributes[s.UNFINISHED] = True
        self._end(state.span, wall)

    def _end_requests_under(self, parent: SpanRecord, wall: float) -> None:
        """Requests still in flight under `parent`, which ends now: they end with it, unfinished
        (a child never outlives its parent; an answer that comes later is not paired)."""
        if not self._requests:
            return
        under = [key for key, request in self._requests.items() if request.span.parent_id == parent.span_id
                 and request.span.trace_id == parent.trace_id and request.span is not parent]
        for key in under:
            request = self._requests.pop(key)
            if self.released is not None:
                self.released(request.pending)
            span = request.span
            if span.end is None:
                span.attributes[s.UNFINISHED] = True
                self._end(span, wall)
