"""The trace builder: timed ACP messages in, finished spans and metric observations out.

Owns: what the traffic means for the span tree of a connection (a trace per session:
session > invoke_agent turn > execute_tool and request spans; requests outside a session as
their own traces): which message starts or ends which span, with what attributes; a
response ends the span of the request the relay's `Connection` paired it with (`Timed.request`:
the builder keeps no pairing of its own); tool calls by `toolCallId`; turns of v1 (the
prompt's response ends it) and v2 (an idle `state_update` ends it); handing lines a rule
touched to `work`; and what content may be added (only with a redactor: `--otlp-content`).
The same builder is fed live (`live`) and from a capture (`offline`); `tree` keeps what is
open, within caps, and ends it; `ledger` makes the spans.
Must never: do IO, read a clock (every time comes with its message), import the SDK, or
raise on any shape from the wire (a field of the wrong type is left out).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from acp_bridge.core import methods as m
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
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
from acp_bridge.telemetry.ledger import RequestSpan, TurnSpan
from acp_bridge.telemetry.spans import Observation, SpanRecord, Timed
from acp_bridge.telemetry.tree import SpanTree
from acp_bridge.telemetry.work import BridgeWork

MAX_CODE_DIGITS = 32  # of an error code in a span's status description
TOOL_DONE = frozenset({"completed", "failed"})
SESSION_SETUP = m.SETUP_METHODS
REQUEST_PERMISSION = m.SESSION_REQUEST_PERMISSION


class TraceBuilder(SpanTree):
    """Builds spans from `Timed` messages fed in order; `take()` hands over what has ended.

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
        super().__init__(masked, rng, masked_text)
        self._work = BridgeWork(self._current, self._session_span, self._request_span)

    def __repr__(self) -> str:
        return (f"<TraceBuilder sessions={len(self._sessions)} pending={len(self._requests)} "
                f"ended={len(self._done)}>")

    # -- feeding --------------------------------------------------------------------------------

    def feed(self, timed: Timed) -> None:
        """One message, in the order the bridge handled them."""
        msg = timed.msg
        if type(msg) is dict and timed.verdict != "drop":  # a dropped line reached nobody
            method = msg.get("method")
            if isinstance(method, str):
                if "id" in msg:
                    self._request(timed, msg, method)
                elif method == p.SESSION_UPDATE:
                    self._update(timed.wall, msg)
                elif method == p.SESSION_CANCEL:
                    turn = self._turn_of(read.session_id_of(msg))
                    if turn is not None:
                        add_event(turn.span, p.SESSION_CANCEL, timed.wall, {})
            elif "id" in msg and ("result" in msg or "error" in msg):
                self._response(timed, msg)
        if timed.rules:
            self._work.feed(timed)

    def finding(self, wall: float, session: Any, code: str, level: str, message: str) -> None:
        """A finding of the health watchdog, as an event on its session's turn or session
        span (dropped when the session is not known: there is no span to hang it on)."""
        span = self._current(session)
        if span is None:
            return
        attrs = {"acp_bridge.finding.code": code, "acp_bridge.finding.level": level}
        if self.masked is not None:
            attrs["acp_bridge.finding.message"] = self.masked_text(message[:MAX_CONTENT])
        add_event(span, "acp_bridge.finding", wall, attrs)

    # -- requests and responses -------------------------------------------------------------------

    def _request(self, timed: Timed, msg: dict[str, Any], method: str) -> None:
        pending = timed.request
        if pending is None:  # one the relay's session does not track: nothing could end its span
            return
        self._room_for_request(timed.wall)
        params = msg.get("params")
        session_id = pending.session_id
        attrs: dict[str, Any] = {s.RPC_SYSTEM: "jsonrpc", s.RPC_METHOD: text_of(method), s.DIRECTION: timed.direction}
        rid = id_text(msg.get("id"))
        if rid is not None:
            attrs[s.RPC_ID] = rid
        if method == p.SESSION_PROMPT and session_id is not None:
            state = self._session(session_id, timed.wall)
            if state.turn is not None:  # a turn never answered: a new prompt starts another
                self._end_turn(state, timed.wall, None, unfinished=True)
            attrs.update({s.OPERATION: "invoke_agent", s.CONVERSATION: text_of(session_id), **self.agent})
            name = f"invoke_agent {self.agent[s.AGENT_NAME]}" if s.AGENT_NAME in self.agent else "invoke_agent"
            span = self._span(name, timed.wall, state.span, attrs, s.CLIENT)
            state.turn = TurnSpan(span)
            self._waiting += 1
            self._turns += 1
            if self.masked is not None:
                prompt = p.get_path(self.masked(msg), "params", "prompt")
                parts = json_text([{"role": "user", "parts": message_parts(prompt)}])
                span.attributes[s.INPUT_MESSAGES] = self.masked_text(parts)
        else:
            parent = self._parent_of(method, params, session_id, timed.wall)
            if session_id is not None:
                attrs[s.SESSION_ID] = text_of(session_id)
            span = self._span(attrs[s.RPC_METHOD], timed.wall, parent, attrs, s.CLIENT)
        self._requests[id(pending)] = RequestSpan(span, pending, msg)

    def _parent_of(self, method: str, params: Any, session_id: Any, wall: float) -> SpanRecord | None:
        if session_id is None or method in m.SESSION_OPENERS:
            return None  # a new session's span starts with its response, and adopts this one
        if method in m.SESSION_DETACHED and key_of(session_id) not in self._sessions:
            return None  # it names a session without joining it: no session span for it
        state = self._session(session_id, wall)
        if method == REQUEST_PERMISSION:
            tool_id = read.permission_tool_call_id(params)
            tool = state.tools.get(key_of(tool_id)) if tool_id is not None else None
            if tool is not None:
                return tool
        return state.turn.span if state.turn is not None else state.span

    def _response(self, timed: Timed, msg: dict[str, Any]) -> None:
        pending = timed.request
        request = self._requests.pop(id(pending), None) if pending is not None else None
        if request is None:
            return
        span, method, session_id = request.span, request.pending.method, request.pending.session_id
        error = msg.get("error")
        result = msg.get("result")
        outcome = "ok"
        if error is not None:
            outcome = "error"
            self._error_attributes(span, error)
        direction = span.attributes.get(s.DIRECTION, "")
        method_value = self._bounded(s.RPC_METHOD, text_of(method))
        self._observations.append(Observation(s.REQUESTS, 1, (
            (s.RPC_METHOD, method_value), (s.DIRECTION, direction), ("acp.outcome", outcome))))
        if method == p.INITIALIZE and type(result) is dict:
            self._agent_info(result)
        if method == p.SESSION_PROMPT:
            self._prompt_answered(span, session_id, error, result, timed.wall)
            return
        if method in SESSION_SETUP and error is None:
            session_id = self._session_set_up(span, session_id, result)
        if method == REQUEST_PERMISSION:
            permission_attributes(span, request.msg, result)
        self._end(span, timed.wall)
        if method in m.SESSION_CLOSERS and error is None and session_id is not None:
            state = self._sessions.pop(key_of(session_id), None)
            if state is not None:
                self._close_session(state, timed.wall, unfinished=False)

    def _error_attributes(self, span: SpanRecord, error: Any) -> None:
        """A JSON-RPC error's code and (masked) message on the span, which ends in error."""
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

    def _agent_info(self, result: dict[str, Any]) -> None:
        """The agent's name and version, from `initialize`'s result."""
        info = result.get("agentInfo") or result.get("info")
        if type(info) is dict:
            for attr, key in ((s.AGENT_NAME, "name"), (s.AGENT_VERSION, "version")):
                if isinstance(info.get(key), str):
                    self.agent[attr] = text_of(info[key])

    def _prompt_answered(self, span: SpanRecord, session_id: Any, error: Any, result: Any, wall: float) -> None:
        """`session/prompt` answered: its turn ends (v1: a stop reason or an error), or is
        acknowledged (v2: an idle state_update ends it)."""
        state = self._sessions.get(key_of(session_id))
        if state is not None and state.turn is not None and state.turn.span is span:
            stop = read.stop_reason(result)  # v1: the response ends the turn
            if error is not None or stop is not None:
                usage_attributes(span, result)
                self._end_turn(state, wall, stop if isinstance(stop, str) else None)
            else:  # v2: the response only acknowledges; an idle state_update ends the turn
                usage_attributes(span, result)
                if not state.turn.acked:
                    state.turn.acked = True
                    self._acked += 1

    def _session_set_up(self, span: SpanRecord, session_id: Any, result: Any) -> Any:
        """A session made (new, load, resume, fork): its span adopts the request's, which
        takes the session's trace; the session id, the new one when the result gives it."""
        new_id = read.created_session_id(result)
        session_id = new_id if new_id is not None else session_id
        if session_id is not None:
            state = self._session(session_id, span.start)
            if span.parent_id is None:  # session/new, session/fork: adopted by the new session
                span.trace_id, span.parent_id = state.span.trace_id, state.span.span_id
                span.attributes[s.SESSION_ID] = text_of(session_id)
            dialect = span.attributes.get(s.DIALECT)
            if dialect is not None:
                state.span.attributes[s.DIALECT] = dialect
        return session_id

    # -- session/update -----------------------------------------------------------------------

    def _update(self, wall: float, msg: dict[str, Any]) -> None:
        update = read.update_of(msg)
        session_id = read.session_id_of(msg)
        if update is None or session_id is None:
            return
        kind = read.update_kind(update)
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
        elif kind in read.TOOL_CALL_UPDATES:
            self._tool(wall, session_id, update)
        elif read.ends_turn_v2(update):
            state = self._sessions.get(key_of(session_id))
            if state is not None and state.turn is not None:
                stop = read.stop_reason(update)
                self._end_turn(state, wall, stop if isinstance(stop, str) else None)

    def _tool(self, wall: float, session_id: Any, update: dict[str, Any]) -> None:
        tool_id = read.tool_call_id(update)
        if tool_id is None:
            return
        state = self._session(session_id, wall)
        key = key_of(tool_id)
        span = state.tools.get(key)
        if span is None:
            self._room_for_tool(state, wall)
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
