"""Tool calls left open: closed as failed when the turn that started them ends.

bridge-rules 6.2 (opt-in). An agent that ends a turn while a tool call it reported is still
`pending` or `in_progress` leaves the client showing a spinner for good. The rule keeps,
per session, the tool calls whose last reported status is one of those two, and when the
turn ends (v1: the `session/prompt` response; v2: the `idle` state update) sends one
`tool_call_update` per such call, before the message that ends the turn.

Before (agent -> client): a `tool_call` `call_1` `in_progress`, then the turn's end
    {"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}
After: ahead of that response, as it came,
    {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":
     {"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"failed","content":
     [{"type":"content","content":{"type":"text","text":"Closed by acp-bridge: ..."}}]}}}

Owns: the open tool calls of each session (`OpenToolCalls`, bounded per session and across
sessions: the agent names the sessions, and may name a million) and the updates that close
them (`closing_updates`). Must never: change a message the agent sent, or keep anything for
a tool call that is no longer open (a million completed calls cost nothing).
"""

from __future__ import annotations

from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.messages import Direction, Frame
from acp_bridge.core.protocol import Json
from acp_bridge.core.rewrites.base import PASS, Emit, Outcome, Replace, Rule
from acp_bridge.core.rewrites.options import FLAG, BuiltIn, Option
from acp_bridge.core.session import Connection, HeldStates, Pending

OPEN = frozenset({"pending", "in_progress"})
MAX_OPEN = 1000  # open tool calls remembered per session; later ones are not closed
# Sessions with open tool calls remembered at once; past it, the one whose tool calls moved
# longest ago (a session abandoned mid-turn, most likely; not a busy one whose turn runs long)
# is forgotten.
MAX_SESSIONS = 256
MAX_ID = 1024  # characters: a longer toolCallId is not remembered (real ones are ~40)


def closing_text(status: str) -> str:
    return f"Closed by acp-bridge: the turn ended while this tool call was still {status}"


class OpenToolCalls:
    """One session's tool calls whose last reported status is `pending` or `in_progress`,
    in the order they were first reported (a dict keeps that order)."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}  # toolCallId -> its last status

    def __repr__(self) -> str:
        return f"<OpenToolCalls {self.calls!r}>"


def reported_status(update: Json, known: str | None, v2: bool) -> str | None:
    """A tool call's status after `update` (a `tool_call` or `tool_call_update`), given the
    status the bridge holds for it (`known`: None when it holds none, for a call it has not
    seen or that is no longer open).

    v1's `tool_call` creates the call, pending unless it says otherwise. An update without
    `status` leaves it as it was; v2's `null` resets it to pending (patch semantics). v2 has
    no `tool_call`: its first update creates the call, and one without `status` starts
    pending, but the bridge cannot tell that from an update to a call it has stopped holding
    (completed, so its id was let go), so it holds neither: such a call is closed only once
    an update gives it a status.
    """
    status = update.get("status")
    if update.get("sessionUpdate") == p.TOOL_CALL:
        return status if isinstance(status, str) else "pending"
    if isinstance(status, str):
        return status
    if status is None and "status" in update and v2:
        return "pending"
    return known


def closing_updates(open_calls: dict[str, str], session_id: Any, keep: frozenset[str] = frozenset()) -> list[Json]:
    """One `tool_call_update` (status failed, a text block saying why) per open tool call
    but those in `keep` (v2: listed as background work, which an idle turn leaves running)."""
    return [
        p.session_update(session_id, {
            "sessionUpdate": p.TOOL_CALL_UPDATE, "toolCallId": call_id, "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": closing_text(status)}}],
        })
        for call_id, status in open_calls.items() if call_id not in keep
    ]


def background_calls(update: Json) -> frozenset[str]:
    """The tool calls a v2 state update lists as background work (still running)."""
    work = update.get("background")
    if not isinstance(work, list):
        return frozenset()
    return frozenset(item["toolCallId"] for item in work
                     if isinstance(item, dict) and item.get("type") == p.TOOL_CALL
                     and isinstance(item.get("toolCallId"), str))


class CloseToolCalls(Rule):
    """`[repair] close_tool_calls = true` or `--close-tool-calls` (off by default)."""

    name = "close-tool-calls"

    def __init__(self) -> None:
        # The sessions this rule holds open calls for, the one used longest ago first
        # (Connection forgets one on `session/close`: such keys are found stale and let go).
        self._held = HeldStates(OpenToolCalls, MAX_SESSIONS)
    # Parsed: only the lines that open, move or end a tool call, and v2's state updates (a
    # `"tool_call_content_chunk"` is neither; a string's own quotes are escaped, so text that
    # mentions "tool_call" does not match).
    triggers = (b'"tool_call"', b'"tool_call_update"', b'"state_update"')

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        msg = frame.msg
        if frame.direction is not Direction.TO_CLIENT or msg is None or msg.get("method") != p.SESSION_UPDATE:
            return PASS
        update = read.update_of(msg)
        if update is None:
            return PASS
        session_id = read.session_id_of(msg)
        if read.update_kind(update) in read.TOOL_CALL_UPDATES:
            self._track(session, session_id, update)
            return PASS
        if read.ends_turn_v2(update) and session.v2:
            return self._close(frame, session, session_id, background_calls(update))
        return PASS

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        if request.method != p.SESSION_PROMPT or request.origin is not Direction.TO_AGENT or session.v2:
            return PASS  # v2 answers a prompt when it accepts it: the idle update ends the turn
        if session.in_flight(p.SESSION_PROMPT, request.session_id):
            return PASS  # another prompt of the session runs on (this one was refused mid-turn)
        return self._close(frame, session, request.session_id, frozenset())

    def _track(self, session: Connection, session_id: Any, update: Json) -> None:
        call_id = read.tool_call_id(update)
        if not isinstance(call_id, str) or len(call_id) > MAX_ID or not isinstance(session_id, str):
            return
        state = self._held.existing(session, session_id)  # now the session used last
        known = state.calls.get(call_id) if state is not None else None
        status = reported_status(update, known, session.v2)
        if status is not None and status in OPEN:
            if state is None:
                state = self._held.get(session, session_id)
            if call_id in state.calls or len(state.calls) < MAX_OPEN:
                state.calls[call_id] = status
        elif state is not None and state.calls.pop(call_id, None) is not None and not state.calls:
            self._held.forget(session, session_id)

    def _close(self, frame: Frame, session: Connection, session_id: Any, keep: frozenset[str]) -> Outcome:
        state = self._held.existing(session, session_id)
        if state is None or frame.msg is None:
            return PASS
        updates = closing_updates(state.calls, session_id, keep)
        state.calls = {call_id: status for call_id, status in state.calls.items() if call_id in keep}
        if not state.calls:
            self._held.forget(session, session_id)
        if not updates or not session.client_ready:
            return PASS
        # The message that ends the turn goes on as it came, after the updates.
        return Replace(frame.msg, before=tuple(Emit(Direction.TO_CLIENT, update) for update in updates))


DECLARED = BuiltIn(
    CloseToolCalls.name, switch="repair.close_tool_calls", rule=CloseToolCalls, rank=40,
    options=(Option(
        "close_tool_calls", "repair.close_tool_calls", "--close-tool-calls", "ACP_BRIDGE_CLOSE_TOOL_CALLS",
        "When a turn ends, close as failed each tool call the agent left pending or in_progress (a "
        "tool_call_update sent before the message that ends the turn).", FLAG, default=False),),
)
