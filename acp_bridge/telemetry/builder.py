"""The trace builder: timed ACP messages in, finished spans and metric observations out.

Owns: the span tree of a connection (a trace per session: session > invoke_agent turn >
execute_tool and request spans; requests outside a session as their own traces), pairing
requests with responses, tool calls by `toolCallId`, turns of v1 (the prompt's response
ends it) and v2 (an idle `state_update` ends it), handing lines a rule touched to `work`, and
what content may be added (only with a redactor: `--otlp-content`). The same builder is
fed live (`live`) and from a capture (`offline`); `ledger` keeps its records and
makes and ends its spans. A span never outlives its parent: ending one ends what is still
open under it, marked `acp.unfinished`.
Must never: do IO, read a clock (every time comes with its message), import the SDK, or
hold unbounded state: open sessions, requests and tool calls are capped, and the oldest
is ended (marked `acp.evicted`) to make room; or raise on any shape from the wire (a field
of the wrong type is left out).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core.messages import id_key
from acp_bridge.telemetry import spans as s
from acp_bridge.telemetry.fields import (
    MAX_CONTENT,
    add_event,
    id_text,
    json_text,
    key_of,
    message_parts,
    permission_attributes,
    text_of,
    usage_attributes,
)
from acp_bridge.telemetry.ledger import Request, Session, SpanLedger, Turn
from acp_bridge.telemetry.spans import Observation, Seen, SpanRecord
from acp_bridge.telemetry.work import BridgeWork

MAX_SESSIONS = 1024
MAX_PENDING = 256  # requests in flight: a handful in a healthy connection
MAX_TOOLS = 1024  # open tool calls per session
MAX_OPEN_TOOLS = 4096  # open tool calls across every session: what the exit ends and flushes
MAX_CODE_DIGITS = 32  # of an error code in a span's status description
TOOL_DONE = frozenset({"completed", "failed"})
SESSION_SETUP = frozenset({p.SESSION_NEW, p.SESSION_LOAD, p.SESSION_RESUME, p.SESSION_FORK})
REQUEST_PERMISSION = "session/request_permission"
_OTHER_WAY = {"to-agent": "to-client", "to-client": "to-agent"}


class TraceBuilder(SpanLedger):
    """Builds spans from `Seen` messages fed in order; `take()` hands over what has ended.

    Args:
        masked: with content (`--otlp-content`), a function that returns a message with the
            capture's redaction applied; None (the default): no content leaves the machine
            (tool titles included: an agent writes the command it runs into its title).
        rng: where span and trace ids come from (seeded in tests).
        masked_text: with content, what masks each string attribute of content as it is
            sent (the joined reply, an error message, a finding's message, a tool title, the
            JSON of the prompt and of a tool's input and output): a secret split across
            chunks is whole only there, and free text can hold `API_TOKEN=...`.
    """

    def __init__(self, masked: Callable[[Any], Any] | None = None, rng: random.Random | None = None,
                 masked_text: Callable[[str], str] = lambda text: text) -> None:
        super().__init__(rng)
        self.masked = masked
        self.masked_text = masked_text
        # Ordered: the oldest goes first when full (a plain dict's first key is found by a
        # scan past every deleted slot, which made eviction quadratic).
        self._sessions: OrderedDict[Any, Session] = OrderedDict()
        self._pending: OrderedDict[tuple[str, Any], Request] = OrderedDict()
        self.evicted = 0
        self._waiting = 0  # open turns without their first chunk yet
        self._acked = 0  # open v2 turns: acknowledged, waiting for an idle state_update
        self._turns = 0  # open turns (any of them may end with an idle state_update)
        # Every open tool call, oldest first, by (session key, tool key): the cap across sessions.
        self._tools: OrderedDict[tuple[Any, Any], Session] = OrderedDict()
        self._work = BridgeWork(self._current, self._session_span, self._request_span)

    def __repr__(self) -> str:
        return (f"<TraceBuilder sessions={len(self._sessions)} pending={len(self._pending)} "
                f"ended={len(self._done)}>")

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
        return len(self._sessions) + self._turns + len(self._tools) + len(self._pending)

    # -- feeding --------------------------------------------------------------------------------

    def feed(self, seen: Seen) -> None:
        """One message, in the order the bridge handled them."""
        msg = seen.msg
        if type(msg) is dict and seen.verdict != "drop":  # a dropped line reached nobody
            method = msg.get("method")
            if isinstance(method, str):
                if "id" in msg:
                    self._request(seen, msg, method)
                elif method == p.SESSION_UPDATE:
                    self._update(seen.wall, msg)
                elif method == p.SESSION_CANCEL:
                    turn = self._turn_of(msg)
                    if turn is not None:
                        add_event(turn.span, "session/cancel", seen.wall, {})
            elif "id" in msg and ("result" in msg or "error" in msg):
                self._response(seen, msg)
        if seen.rules:
            self._work.feed(seen)

    def finding(self, wall: float, session: Any, code: str, level: str, message: str) -> None:
        """A finding of the health watchdog, as an event on its session's turn or session
        span (dropped when the session is not known: there is no span to hang it on)."""
        state = self._sessions.get(key_of(session)) if session is not None else None
        if state is None:
            return
        span = state.turn.span if state.turn is not None else state.span
        attrs = {"acp_bridge.finding.code": code, "acp_bridge.finding.level": level}
        if self.masked is not None:
            attrs["acp_bridge.finding.message"] = self.masked_text(message[:MAX_CONTENT])
        add_event(span, "acp_bridge.finding", wall, attrs)

    def finish(self, wall: float) -> None:
        """The connection (or capture) ended at `wall`: end every open span, marked unfinished."""
        for request in self._pending.values():
            if request.span.end is None:
                request.span.attributes[s.UNFINISHED] = True
                self._end(request.span, wall)
        self._pending.clear()
        for state in self._sessions.values():
            self._close_session(state, wall, unfinished=True)
        self._sessions.clear()

    # -- requests and responses -------------------------------------------------------------------

    def _request(self, seen: Seen, msg: dict[str, Any], method: str) -> None:
        # Before the span's parent is chosen: giving up a prompt ends its turn.
        key = (seen.direction, id_key(msg.get("id")))
        if key in self._pending:  # the same id again before an answer: the older one is lost
            self._give_up(self._pending.pop(key), s.UNFINISHED, seen.wall)
        if len(self._pending) >= MAX_PENDING:
            _, oldest = self._pending.popitem(last=False)
            self.evicted += 1
            self._give_up(oldest, s.EVICTED, seen.wall)
        params = msg.get("params")
        session_id = params.get("sessionId") if type(params) is dict else None
        attrs: dict[str, Any] = {s.RPC_SYSTEM: "jsonrpc", s.RPC_METHOD: text_of(method), s.DIRECTION: seen.direction}
        rid = id_text(msg.get("id"))
        if rid is not None:
            attrs[s.RPC_ID] = rid
        if method == p.SESSION_PROMPT and session_id is not None:
            state = self._session(session_id, seen.wall)
            if state.turn is not None:  # a turn never answered: a new prompt starts another
                self._end_turn(state, seen.wall, None, unfinished=True)
            attrs.update({s.OPERATION: "invoke_agent", s.CONVERSATION: text_of(session_id), **self.agent})
            name = f"invoke_agent {self.agent[s.AGENT_NAME]}" if s.AGENT_NAME in self.agent else "invoke_agent"
            span = self._span(name, seen.wall, state.span, attrs, s.CLIENT)
            state.turn = Turn(span)
            self._waiting += 1
            self._turns += 1
            if self.masked is not None:
                prompt = p.get_path(self.masked(msg), "params", "prompt")
                parts = json_text([{"role": "user", "parts": message_parts(prompt)}])
                span.attributes[s.INPUT_MESSAGES] = self.masked_text(parts)
        else:
            parent = self._parent_of(method, params, session_id, seen.wall)
            if session_id is not None:
                attrs[s.SESSION_ID] = text_of(session_id)
            span = self._span(attrs[s.RPC_METHOD], seen.wall, parent, attrs, s.CLIENT)
        self._pending[key] = Request(span, method, session_id, msg)

    def _give_up(self, request: Request, mark: str, wall: float) -> None:
        """A request that will not be answered (as far as the builder can pair it) ends now,
        marked; a prompt ends its turn, and with it what the turn holds."""
        if request.span.end is not None:
            return
        request.span.attributes[mark] = True
        state = self._sessions.get(key_of(request.session)) if request.method == p.SESSION_PROMPT else None
        if state is not None and state.turn is not None and state.turn.span is request.span:
            self._end_turn(state, wall, None)
        else:
            self._end(request.span, wall)

    def _parent_of(self, method: str, params: Any, session_id: Any, wall: float) -> SpanRecord | None:
        if session_id is None or method in (p.SESSION_NEW, p.SESSION_FORK):
            return None  # a new session's span starts with its response, and adopts this one
        state = self._session(session_id, wall)
        if method == REQUEST_PERMISSION:
            tool_id = p.get_path(params, "toolCall", "toolCallId")
            tool = state.tools.get(key_of(tool_id)) if tool_id is not None else None
            if tool is not None:
                return tool
        return state.turn.span if state.turn is not None else state.span

    def _response(self, seen: Seen, msg: dict[str, Any]) -> None:
        request = self._pending.pop((_OTHER_WAY.get(seen.direction, ""), id_key(msg.get("id"))), None)
        if request is None:
            return
        span, method = request.span, request.method
        error = msg.get("error")
        result = msg.get("result")
        outcome = "ok"
        if error is not None:
            outcome = "error"
            code = error.get("code") if type(error) is dict else None
            if isinstance(code, int) and not isinstance(code, bool):
                if -2**63 <= code < 2**63:  # what an OTLP int holds; the SDK drops a larger one silently
                    span.attributes[s.RPC_ERROR_CODE] = code
                code_text = str(code) if abs(code) < 10**MAX_CODE_DIGITS else "(not a 64-bit integer)"
            else:
                code_text = text_of(code)[:MAX_CODE_DIGITS] if code is not None else ""
            message = error.get("message") if type(error) is dict else None
            if self.masked is not None and isinstance(message, str):
                span.attributes[s.RPC_ERROR_MESSAGE] = self.masked_text(message[:MAX_CONTENT])
            span.error = f"JSON-RPC error {code_text}" if code is not None else "JSON-RPC error"
        direction = request.span.attributes.get(s.DIRECTION, "")
        method_value = self._bounded(s.RPC_METHOD, text_of(method))
        self._observations.append(Observation(s.REQUESTS, 1, (
            (s.RPC_METHOD, method_value), (s.DIRECTION, direction), ("acp.outcome", outcome))))
        if method == p.INITIALIZE and type(result) is dict:
            info = result.get("agentInfo") or result.get("info")
            if type(info) is dict:
                for attr, key in ((s.AGENT_NAME, "name"), (s.AGENT_VERSION, "version")):
                    if isinstance(info.get(key), str):
                        self.agent[attr] = text_of(info[key])
        if method == p.SESSION_PROMPT:
            state = self._sessions.get(key_of(request.session))
            if state is not None and state.turn is not None and state.turn.span is span:
                stop = result.get("stopReason") if type(result) is dict else None
                if error is not None or stop is not None:
                    usage_attributes(span, result)
                    self._end_turn(state, seen.wall, stop if isinstance(stop, str) else None)
                else:  # v2: the response only acknowledges; an idle state_update ends the turn
                    usage_attributes(span, result)
                    if not state.turn.acked:
                        state.turn.acked = True
                        self._acked += 1
            return
        if method in SESSION_SETUP and error is None:
            new_id = result.get("sessionId") if type(result) is dict else None
            session_id = new_id if new_id is not None else request.session
            if session_id is not None:
                state = self._session(session_id, span.start)
                if span.parent_id is None:  # session/new, session/fork: adopted by the new session
                    span.trace_id, span.parent_id = state.span.trace_id, state.span.span_id
                    span.attributes[s.SESSION_ID] = text_of(session_id)
                dialect = span.attributes.get(s.DIALECT)
                if dialect is not None:
                    state.span.attributes[s.DIALECT] = dialect
        if method == REQUEST_PERMISSION:
            permission_attributes(span, request.msg, result)
        self._end(span, seen.wall)
        if method == p.SESSION_CLOSE and error is None and request.session is not None:
            state = self._sessions.pop(key_of(request.session), None)
            if state is not None:
                self._close_session(state, seen.wall, unfinished=False)

    # -- session/update -----------------------------------------------------------------------

    def _update(self, wall: float, msg: dict[str, Any]) -> None:
        params = msg.get("params")
        update = params.get("update") if type(params) is dict else None
        session_id = params.get("sessionId") if type(params) is dict else None
        if type(update) is not dict or session_id is None:
            return
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            state = self._sessions.get(key_of(session_id))
            turn = state.turn if state is not None else None
            if turn is None:
                return
            if turn.first_chunk is None:
                turn.first_chunk = wall
                self._waiting -= 1
                ttfc = max(0.0, wall - turn.span.start)
                turn.span.attributes[s.TIME_TO_FIRST_CHUNK] = ttfc
                self._observations.append(Observation(s.TTFC_METRIC, ttfc, self._agent_attrs()))
            if self.masked is not None and turn.size < MAX_CONTENT:
                text = p.get_path(self.masked(msg), "params", "update", "content", "text")
                if isinstance(text, str):
                    turn.text.append(text)
                    turn.size += len(text)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(wall, session_id, update)
        elif kind == "state_update" and update.get("state") == "idle":
            state = self._sessions.get(key_of(session_id))
            if state is not None and state.turn is not None:
                stop = update.get("stopReason")
                self._end_turn(state, wall, stop if isinstance(stop, str) else None)

    def _tool(self, wall: float, session_id: Any, update: dict[str, Any]) -> None:
        tool_id = update.get("toolCallId")
        if tool_id is None:
            return
        state = self._session(session_id, wall)
        key = key_of(tool_id)
        span = state.tools.get(key)
        if span is None:
            if len(state.tools) >= MAX_TOOLS:
                self._evict_tool(state, next(iter(state.tools)), wall)
            if len(self._tools) >= MAX_OPEN_TOOLS:
                (_, tool_key), owner = next(iter(self._tools.items()))
                self._evict_tool(owner, tool_key, wall)
            parent = state.turn.span if state.turn is not None else state.span
            span = self._span("execute_tool", wall, parent, {
                s.OPERATION: "execute_tool", s.TOOL_CALL_ID: text_of(tool_id), s.CONVERSATION: text_of(session_id)})
            state.tools[key] = span
            self._tools[(state.key, key)] = state
        for attr, field_name in ((s.TOOL_KIND, "kind"), (s.TOOL_STATUS, "status")):
            value = update.get(field_name)
            if isinstance(value, str):
                span.attributes[attr] = text_of(value)
        title = update.get("title")
        if self.masked is not None and isinstance(title, str):  # content: it can hold the command run
            span.attributes[s.TOOL_TITLE] = self.masked_text(text_of(title))
        kind = span.attributes.get(s.TOOL_KIND)
        if isinstance(kind, str):
            span.name, span.attributes[s.TOOL_NAME] = f"execute_tool {kind}", kind
        if self.masked is not None:
            masked = self.masked({"params": {"update": update}})
            for attr, field_name in ((s.TOOL_ARGUMENTS, "rawInput"), (s.TOOL_RESULT, "rawOutput")):
                value = p.get_path(masked, "params", "update", field_name)
                if value is not None:
                    span.attributes[attr] = self.masked_text(json_text(value))
        status = update.get("status")
        if isinstance(status, str) and status in TOOL_DONE:
            self._forget_tool(state, key)
            self._end_tool(span, wall)

    def _evict_tool(self, state: Session, key: Any, wall: float) -> None:
        span = self._forget_tool(state, key)
        self.evicted += 1
        span.attributes[s.EVICTED] = True
        self._end_tool(span, wall)

    def _forget_tool(self, state: Session, key: Any) -> SpanRecord:
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

    # -- helpers ------------------------------------------------------------------------------

    def _current(self, session_id: Any) -> SpanRecord | None:
        state = self._sessions.get(key_of(session_id)) if session_id is not None else None
        if state is None:
            return None
        return state.turn.span if state.turn is not None else state.span

    def _session_span(self, session_id: Any) -> SpanRecord | None:
        state = self._sessions.get(key_of(session_id)) if session_id is not None else None
        return state.span if state is not None else None

    def _request_span(self, direction: str, id_: Any) -> SpanRecord | None:
        request = self._pending.get((direction, id_key(id_)))
        return request.span if request is not None else None

    def _turn_of(self, msg: dict[str, Any]) -> Turn | None:
        session_id = p.get_path(msg, "params", "sessionId")
        state = self._sessions.get(key_of(session_id)) if session_id is not None else None
        return state.turn if state is not None else None

    def _session(self, session_id: Any, wall: float) -> Session:
        key = key_of(session_id)
        state = self._sessions.get(key)
        if state is None:
            if len(self._sessions) >= MAX_SESSIONS:
                _, oldest = self._sessions.popitem(last=False)
                self.evicted += 1
                oldest.span.attributes[s.EVICTED] = True
                self._close_session(oldest, wall, unfinished=True)
            span = self._span("session", wall, None, {s.CONVERSATION: text_of(session_id), **self.agent})
            state = self._sessions[key] = Session(span, key)
        return state

    def _end_turn(self, state: Session, wall: float, stop: str | None, *, unfinished: bool = False) -> None:
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

    def _close_session(self, state: Session, wall: float, *, unfinished: bool) -> None:
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
        if not self._pending:
            return
        under = [key for key, request in self._pending.items() if request.span.parent_id == parent.span_id
                 and request.span.trace_id == parent.trace_id and request.span is not parent]
        for key in under:
            span = self._pending.pop(key).span
            if span.end is None:
                span.attributes[s.UNFINISHED] = True
                self._end(span, wall)
