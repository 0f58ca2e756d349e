"""Closing the tool calls a turn left open (bridge-rules 6.2), table-driven on the pure core.

Each case starts a Relay with only this rule, lets `initialize` pass (v1 or v2), then plays
a script of (direction, line, what goes out toward that line's destination) steps, with
exact bytes. Every case runs twice: each line fed whole, and one byte at a time.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from acp_bridge.config import Config, RepairConfig
from acp_bridge.core.messages import Direction
from acp_bridge.core.relay import Relay, Verdict
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.core.rewrites.tool_calls import (
    MAX_ID,
    MAX_OPEN,
    MAX_SESSIONS,
    CloseToolCalls,
    OpenToolCalls,
    reported_status,
)
from tests.conftest import example, line

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
SAME = object()  # expected: the line itself, as it came, and nothing else


def upd(sid: str, **update: Any) -> bytes:
    return line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})


def call(sid: str, call_id: Any, status: str | None = None) -> bytes:
    """v1's `tool_call` (creates the call), with or without a status."""
    extra = {} if status is None else {"status": status}
    return upd(sid, sessionUpdate="tool_call", toolCallId=call_id, title="Read", **extra)


def moved(sid: str, call_id: str, **fields: Any) -> bytes:
    return upd(sid, sessionUpdate="tool_call_update", toolCallId=call_id, **fields)


def idle(sid: str, **extra: Any) -> bytes:
    return upd(sid, sessionUpdate="state_update", state="idle", stopReason="end_turn", **extra)


def prompt(rid: int, sid: str) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "method": "session/prompt",
                 "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}})


def answer(rid: int, result: str = '{"stopReason":"end_turn"}') -> bytes:
    return f'{{"jsonrpc":"2.0","id":{rid},"result":{result}}}\n'.encode()


def closing(sid: str, call_id: str, status: str) -> bytes:
    """The update the bridge sends, byte for byte."""
    return (f'{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{sid}","update":'
            f'{{"sessionUpdate":"tool_call_update","toolCallId":"{call_id}","status":"failed","content":'
            f'[{{"type":"content","content":{{"type":"text","text":"Closed by acp-bridge: the turn ended '
            f'while this tool call was still {status}"}}}}]}}}}}}\n').encode()


Step = tuple[Direction, bytes, Any]

V1_CASES = [
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", "c1"), SAME),  # no status: pending
        (C, call("s1", "c2", "in_progress"), SAME),
        (C, call("s1", "c3", "pending"), SAME),
        (C, moved("s1", "c3", status="completed"), SAME),
        (C, answer(2), [closing("s1", "c1", "pending"), closing("s1", "c2", "in_progress"), answer(2)]),
    ], id="open-calls-closed-before-the-prompt-response"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", "c1", "pending"), SAME),
        (C, moved("s1", "c1", status="in_progress"), SAME),
        (C, moved("s1", "c1", content=[]), SAME),  # no status: still in_progress
        (C, answer(2, '{"stopReason":"cancelled"}'),
         [closing("s1", "c1", "in_progress"), answer(2, '{"stopReason":"cancelled"}')]),
    ], id="last-status-counts"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", "c1", "in_progress"), SAME),
        (C, b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"boom"}}\n',
         [closing("s1", "c1", "in_progress"), b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"boom"}}\n']),
    ], id="an-error-ends-the-turn-too"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", "c1", "in_progress"), SAME),
        (A, prompt(3, "s1"), SAME),  # a second prompt while the turn runs: the agent refuses it
        (C, b'{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"busy"}}\n', SAME),
        (C, answer(2), [closing("s1", "c1", "in_progress"), answer(2)]),
    ], id="a-prompt-refused-mid-turn-ends-nothing"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", "c1", "in_progress"), SAME),
        (C, moved("s1", "c1", status="failed"), SAME),
        (C, call("s1", "c2", "in_progress"), SAME),
        (C, moved("s1", "c2", status="completed"), SAME),
        (C, answer(2), SAME),
    ], id="nothing-left-open"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (A, prompt(3, "s2"), SAME),
        (C, call("s1", "c1", "in_progress"), SAME),
        (C, call("s2", "c9", "in_progress"), SAME),
        (C, answer(2), [closing("s1", "c1", "in_progress"), answer(2)]),
        (C, answer(3), [closing("s2", "c9", "in_progress"), answer(3)]),
    ], id="each-session-its-own-calls"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", "c1", "in_progress"), SAME),
        (C, answer(2), [closing("s1", "c1", "in_progress"), answer(2)]),
        (A, prompt(3, "s1"), SAME),
        (C, answer(3), SAME),  # closed once: forgotten with its turn
    ], id="closed-once"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", "c1", "in_progress"), SAME),
        (A, line({"jsonrpc": "2.0", "id": 3, "method": "session/close", "params": {"sessionId": "s1"}}), SAME),
        (C, answer(3, "{}"), SAME),
        (C, answer(2), SAME),  # the session was closed: nothing is remembered for it
    ], id="a-closed-session-is-forgotten"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", 7, "in_progress"), SAME),  # a toolCallId is a string
        (C, upd("s1", sessionUpdate="tool_call", status="pending"), SAME),
        (C, line({"jsonrpc": "2.0", "method": "session/update", "params": {"update": {
            "sessionUpdate": "tool_call", "toolCallId": "c0", "status": "pending"}}}), SAME),
        (C, answer(2), SAME),
    ], id="malformed-calls-ignored"),
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, call("s1", "c1", "in_progress"), SAME),
        (C, idle("s1"), SAME),  # v1 has no state updates: the response ends the turn
        (C, answer(2), [closing("s1", "c1", "in_progress"), answer(2)]),
    ], id="v1-ignores-idle"),
]

V2_CASES = [
    pytest.param([
        (A, prompt(2, "s1"), SAME),
        (C, answer(2, '{"messageId":"m1"}'), SAME),  # v2: the answer only accepts the prompt
        (C, moved("s1", "c1", status="pending"), SAME),
        (C, moved("s1", "c2", status="in_progress"), SAME),
        (C, upd("s1", sessionUpdate="state_update", state="running"), SAME),
        (C, idle("s1"), [closing("s1", "c1", "pending"), closing("s1", "c2", "in_progress"), idle("s1")]),
    ], id="idle-ends-the-turn"),
    pytest.param([
        (C, moved("s1", "c1", status="in_progress"), SAME),
        (C, moved("s1", "c1", status=None), SAME),  # null resets to pending
        (C, moved("s1", "c2", title="no status yet"), SAME),  # unknown and no status: not held
        (C, moved("s1", "c3", status="paused"), SAME),
        (C, idle("s1"), [closing("s1", "c1", "pending"), idle("s1")]),
    ], id="patch-semantics"),
    pytest.param([
        (C, moved("s1", "c1", status="in_progress"), SAME),
        (C, moved("s1", "c2", status="in_progress"), SAME),
        (C, idle("s1", background=[{"type": "tool_call", "toolCallId": "c1"}, {"type": "terminal", "terminalId": "t"}]),
         [closing("s1", "c2", "in_progress"),
          idle("s1", background=[{"type": "tool_call", "toolCallId": "c1"}, {"type": "terminal", "terminalId": "t"}])]),
        (C, idle("s1", background=[]), [closing("s1", "c1", "in_progress"), idle("s1", background=[])]),
    ], id="background-work-stays-open"),
    pytest.param([
        (C, moved("s1", "c1", status="in_progress"), SAME),
        (C, upd("s1", sessionUpdate="state_update", state="requires_action"), SAME),
        (C, upd("s2", sessionUpdate="state_update", state="idle"), SAME),
        (C, idle("s1"), [closing("s1", "c1", "in_progress"), idle("s1")]),
    ], id="only-its-own-idle"),
]


def play(version: int, steps: list[Step], bytewise: bool) -> None:
    relay = Relay([CloseToolCalls()], strict=True)
    relay.feed(A, line(example(f"v{version}-initialize-request-client-plain")))
    relay.feed(C, line(example(f"v{version}-initialize-response-agent-no-system-prompt")))
    for direction, data, expected in steps:
        pieces = [data[i:i + 1] for i in range(len(data))] if bytewise else [data]
        out = [f for piece in pieces for f in relay.feed(direction, piece)]
        if expected is SAME:
            assert [(f.data, f.verdict) for f in out] == [(data, Verdict.PASS)]
            continue
        assert [f.data for f in out] == expected
        *emitted, last = out
        assert last.data is last.raw  # the message that ends the turn goes on as it came
        assert [(f.verdict, f.rules, f.before) for f in emitted] == [(Verdict.EMIT, ("close-tool-calls",), True)] * len(emitted)


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("steps", V1_CASES)
def test_v1_the_prompt_response_closes_open_tool_calls(steps: list[Step], bytewise: bool) -> None:
    play(1, steps, bytewise)


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("steps", V2_CASES)
def test_v2_the_idle_update_closes_open_tool_calls(steps: list[Step], bytewise: bool) -> None:
    play(2, steps, bytewise)


def test_completed_calls_leave_nothing_behind() -> None:
    """A long session of calls that complete holds no memory; open ones are capped."""
    relay = Relay([CloseToolCalls()], strict=True)
    relay.feed(A, line(example("v1-initialize-request-client-plain")))
    relay.feed(C, line(example("v1-initialize-response-agent-no-system-prompt")))
    chunk = b"".join(call("s1", f"c{i}", "in_progress") + moved("s1", f"c{i}", status="completed")
                     for i in range(5000))
    out = relay.feed(C, chunk)  # one read, as the bulk path takes it: the triggers get them parsed
    assert b"".join(f.data for f in out) == chunk
    assert relay.session.existing_state(OpenToolCalls, "s1") is None and relay.session.session_count == 0
    relay.feed(A, prompt(2, "s1"))
    relay.feed(C, b"".join(call("s1", f"o{i}", "pending") for i in range(MAX_OPEN + 50)))
    state = relay.session.existing_state(OpenToolCalls, "s1")
    assert state is not None and len(state.calls) == MAX_OPEN
    closed = relay.feed(C, answer(2))
    assert len(closed) == MAX_OPEN + 1 and closed[-1].data == answer(2)
    assert orjson.loads(closed[0].data)["params"]["update"]["toolCallId"] == "o0"
    assert relay.session.session_count == 0


def test_open_calls_are_held_for_so_many_sessions_at_once() -> None:
    """The agent names the sessions: a call left open in each of a million must not cost a
    million entries. Past MAX_SESSIONS the session whose calls moved longest ago is let go
    (its calls are no longer closed); a session closed meanwhile frees its place."""
    relay = Relay([CloseToolCalls()], strict=True)
    relay.feed(A, line(example("v1-initialize-request-client-plain")))
    relay.feed(C, line(example("v1-initialize-response-agent-no-system-prompt")))
    relay.feed(C, b"".join(call(f"s{i}", "c", "in_progress") for i in range(MAX_SESSIONS + 10)))
    held = [f"s{i}" for i in range(MAX_SESSIONS + 10) if relay.session.existing_state(OpenToolCalls, f"s{i}")]
    assert held == [f"s{i}" for i in range(10, MAX_SESSIONS + 10)]
    assert relay.session.session_count == MAX_SESSIONS
    relay.feed(A, line({"jsonrpc": "2.0", "id": 9, "method": "session/close", "params": {"sessionId": "s10"}}))
    relay.feed(C, answer(9, "{}"))  # Connection forgets s10's state; the rule finds the key stale
    relay.feed(C, call("new", "c", "pending"))
    assert relay.session.existing_state(OpenToolCalls, "s11") is not None  # not let go: s10's place was free
    assert relay.session.existing_state(OpenToolCalls, "new") is not None
    relay.feed(A, prompt(3, "s11"))
    assert [f.data for f in relay.feed(C, answer(3))] == [closing("s11", "c", "in_progress"), answer(3)]
    # Ids beyond any real one's length are not kept: memory is bounded by count and size.
    relay.feed(A, prompt(4, "t"))
    relay.feed(C, call("t", "x" * (MAX_ID + 1), "pending"))
    assert [f.data for f in relay.feed(C, answer(4))] == [answer(4)]


def test_past_the_bound_the_session_used_longest_ago_is_let_go_not_the_busy_one() -> None:
    """A busy long-lived session (its turn runs on, its calls still moving) must not be let
    go before sessions idle since: the bound forgets the session used longest ago, as the
    other rules' (`session.HeldStates`) do. It forgot the one that had held calls longest,
    the busy one, whose turn then ended with its spinners left open."""
    relay = Relay([CloseToolCalls()], strict=True)
    relay.feed(A, line(example("v1-initialize-request-client-plain")))
    relay.feed(C, line(example("v1-initialize-response-agent-no-system-prompt")))
    relay.feed(A, prompt(2, "busy"))
    relay.feed(C, call("busy", "c0", "in_progress"))  # held first
    relay.feed(C, b"".join(call(f"s{i}", "c", "in_progress") for i in range(MAX_SESSIONS - 1)))
    relay.feed(C, moved("busy", "c0", status="in_progress") + call("busy", "c1", "pending"))  # used again
    relay.feed(C, call("new", "c", "pending"))  # one too many: s0 has been idle longest
    assert relay.session.existing_state(OpenToolCalls, "s0") is None
    assert relay.session.session_count == MAX_SESSIONS
    assert [f.data for f in relay.feed(C, answer(2))] == [
        closing("busy", "c0", "in_progress"), closing("busy", "c1", "pending"), answer(2)]


def test_nothing_is_closed_before_the_clients_initialize() -> None:
    relay = Relay([CloseToolCalls()], strict=True)
    relay.feed(A, prompt(2, "s1"))
    relay.feed(C, call("s1", "c1", "in_progress"))
    assert [f.data for f in relay.feed(C, answer(2))] == [answer(2)]


@pytest.mark.parametrize(("update", "known", "v2", "expected"), [
    ({"sessionUpdate": "tool_call"}, None, False, "pending"),
    ({"sessionUpdate": "tool_call", "status": None}, None, False, "pending"),
    ({"sessionUpdate": "tool_call", "status": "in_progress"}, None, False, "in_progress"),
    ({"sessionUpdate": "tool_call_update"}, "in_progress", False, "in_progress"),
    ({"sessionUpdate": "tool_call_update", "status": None}, "in_progress", False, "in_progress"),
    ({"sessionUpdate": "tool_call_update", "status": None}, "in_progress", True, "pending"),
    ({"sessionUpdate": "tool_call_update"}, None, True, None),
    ({"sessionUpdate": "tool_call_update", "status": "completed"}, "pending", True, "completed"),
    ({"sessionUpdate": "tool_call_update", "status": 3}, "pending", True, "pending"),
])
def test_reported_status(update: dict[str, Any], known: str | None, v2: bool, expected: str | None) -> None:
    assert reported_status(update, known, v2) == expected


@pytest.mark.parametrize(("close", "names"), [(False, ["suggestions", "commands-mirror"]),
                                               (True, ["suggestions", "commands-mirror", "close-tool-calls"])])
def test_off_by_default_and_on_by_config(close: bool, names: list[str]) -> None:
    assert [rule.name for rule in build_rewrites(Config(repair=RepairConfig(close_tool_calls=close)))] == names


def test_the_bridges_own_answer_to_a_prompt_ends_the_turn_too() -> None:
    """The agent dies mid-turn (or the bridge stops): the bridge's error answer to the
    prompt ends the turn, so the calls left open are closed before it, as the agent's own
    answer would have them; a second prompt of another session too, each before its answer."""
    relay = Relay([CloseToolCalls()], strict=True)
    relay.feed(A, line(example("v1-initialize-request-client-plain")))
    relay.feed(C, line(example("v1-initialize-response-agent-no-system-prompt")))
    relay.feed(A, prompt(2, "s1") + prompt(3, "s2") + line({"jsonrpc": "2.0", "id": 4, "method": "x"}))
    relay.feed(C, call("s1", "c1", "in_progress") + call("s1", "c2") + call("s2", "c9", "in_progress"))
    out = relay.fail_pending("agent died")
    gone = [b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"agent died"}}\n' % rid for rid in (2, 3, 4)]
    assert [f.data for f in out] == [closing("s1", "c1", "in_progress"), closing("s1", "c2", "pending"), gone[0],
                                     closing("s2", "c9", "in_progress"), gone[1], gone[2]]
    assert [(f.verdict, f.rules, f.before, f.direction) for f in out if f.request is None] == [
        (Verdict.EMIT, ("close-tool-calls",), True, C)] * 3
    assert [f.request.id for f in out if f.request is not None] == [2, 3, 4]


def test_a_failing_rule_on_the_bridges_own_answer_does_not_keep_it_back() -> None:
    """The bridge is stopping: a rule that raises on its answer is said, and the answer goes."""
    from tests.core.helpers import FailOnSecondAnswer

    relay = Relay([FailOnSecondAnswer()], strict=True)
    relay.feed(A, prompt(2, "s1"))
    assert [f.data for f in relay.fail_pending("gone")] == [
        b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"gone"}}\n']
