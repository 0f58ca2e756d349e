"""replay/client_side.py and replay/facts.py: what `drive` sends and answers, and the facts its
report compares."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.replay import facts
from acp_bridge.replay.client_side import Answers, ClientSide, Outgoing, Rewriter
from acp_bridge.replay.turns import Recorded
from tests.replay.drive import permission, rec

OPTIONS = [{"optionId": "ok-1", "kind": "allow_once"}, {"optionId": "no-1", "kind": "reject_once"}]


def answers(*pairs: tuple[dict[str, Any], dict[str, Any]]) -> Answers:
    out = Answers()
    for seq, (request, answer) in enumerate(pairs):
        out.add(rec(seq, "to-client", "request", request["method"], request), answer, [], seq)
    return out


def chosen(option: str) -> dict[str, Any]:
    return {"id": 9, "result": {"outcome": {"outcome": "selected", "optionId": option}}}


def read(id_: Any, path: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "fs/read_text_file", "params": {"sessionId": "s", "path": path}}


@pytest.mark.parametrize(("recorded", "live", "expected"), [
    pytest.param((permission(9, OPTIONS), chosen("no-1")),
                 permission("x", [{"optionId": "reject", "kind": "reject_once"}, {"optionId": "a", "kind": "allow_once"}]),
                 {"jsonrpc": "2.0", "id": "x", "result": {"outcome": {"outcome": "selected", "optionId": "reject"}}},
                 id="permission-by-kind"),
    pytest.param((permission(9, OPTIONS), {"id": 9, "result": {"outcome": {"outcome": "cancelled"}}}),
                 permission(3, []), {"jsonrpc": "2.0", "id": 3, "result": {"outcome": {"outcome": "cancelled"}}},
                 id="permission-cancelled"),
    pytest.param((permission(9, OPTIONS), chosen("ok-1")), permission(3, [{"optionId": "n", "kind": "reject_once"}]),
                 "the recorded choice was an option of kind 'allow_once', which this permission request does not "
                 "offer", id="permission-kind-not-offered"),
    pytest.param((read(1, "/w/a.py"), {"id": 1, "result": {"content": "A"}}), read(7, "/w/a.py"),
                 {"jsonrpc": "2.0", "id": 7, "result": {"content": "A"}}, id="file-by-path"),
    pytest.param((read(1, "/w/a.py"), {"id": 1, "result": {"content": "A"}}), read(7, "/w/b.py"),
                 "the recording has no answer to fs/read_text_file with these params", id="another-file"),
    pytest.param((read(1, "/w/a.py"), {"id": 1, "error": {"code": -32002, "message": "gone"}}), read(7, "/w/a.py"),
                 {"jsonrpc": "2.0", "id": 7, "error": {"code": -32002, "message": "gone"}}, id="a-recorded-error"),
    pytest.param(({"jsonrpc": "2.0", "id": 1, "method": "terminal/create",
                   "params": {"sessionId": "s", "command": "make", "args": ["test"]}},
                  {"id": 1, "result": {"terminalId": "t-1"}}),
                 {"id": 5, "method": "terminal/create", "params": {"sessionId": "live", "command": "make",
                                                                   "args": ["test"]}},
                 {"jsonrpc": "2.0", "id": 5, "result": {"terminalId": "t-1"}}, id="terminal-by-command"),
    # The capture masked the command line's secrets; the live one still has them.
    pytest.param(({"jsonrpc": "2.0", "id": 1, "method": "terminal/create",
                   "params": {"sessionId": "s", "command": "git", "args": ["log", "--author=<redacted>"]}},
                  {"id": 1, "result": {"terminalId": "t-1"}}),
                 {"id": 5, "method": "terminal/create", "params": {"sessionId": "live", "command": "git",
                                                                   "args": ["log", "--author=bob"]}},
                 {"jsonrpc": "2.0", "id": 5, "result": {"terminalId": "t-1"}}, id="terminal-by-masked-command"),
])
def test_answers(recorded: tuple[dict[str, Any], dict[str, Any]], live: dict[str, Any], expected: Any) -> None:
    answer, _, why = answers(recorded).answer(live)
    assert (answer if answer is not None else why) == expected


def test_answers_of_one_key_come_in_order_then_the_last_again() -> None:
    table = answers((read(1, "/a"), {"id": 1, "result": {"content": "1"}}),
                    (read(2, "/a"), {"id": 2, "result": {"content": "2"}}))
    got = [table.answer(read(n, "/a"))[0] for n in range(3)]
    assert [a["result"]["content"] for a in got if a is not None] == ["1", "2", "2"]


def test_a_path_under_cwd_is_found_under_each_recorded_cwd() -> None:
    table = answers((read(1, "/rec/src/a.py"), {"id": 1, "result": {"content": "A"}}),
                    (read(2, "/other/b.py"), {"id": 2, "result": {"content": "B"}}))
    rewriter = Rewriter("/live", ["/rec", "/other"])
    assert [table.answer(read(n, path), rewriter)[0] for n, path in enumerate(["/live/src/a.py", "/live/b.py"])] == [
        {"jsonrpc": "2.0", "id": 0, "result": {"content": "A"}}, {"jsonrpc": "2.0", "id": 1, "result": {"content": "B"}}]
    assert table.answer(read(3, "/elsewhere/a.py"), rewriter)[0] is None


def outgoing(raw: bytes) -> Outgoing:
    return Outgoing(1, raw, orjson.loads(raw), "request", "session/prompt", 1, 1, "session 1 turn 1")


@pytest.mark.parametrize(("raw", "sessions", "cwd", "expected"), [
    (b'{"id": 1, "params": {"sessionId": "old"}}\n', {}, None, None),
    (b'{"id": 1, "params": {"sessionId": "old"}}\n', {"other": "x"}, None, None),
    (b'{"id": 1, "params": {"sessionId": "old", "n": 1.50}}\n', {"old": "new"}, None,
     b'{"id":1,"params":{"sessionId":"new","n":1.50}}\n'),
    (b'{"id": 123456789012345678901234567890, "params": {"cwd": "/rec"}}\n', {}, "/live",
     b'{"id":123456789012345678901234567890,"params":{"cwd":"/live"}}\n'),
    (b'{"id": 1, "params": {"cwd": "/rec"}}\n', {}, "/rec", None),
], ids=["nothing-to-replace", "another-session", "session-id-numbers-as-written", "cwd-big-id", "same-cwd"])
def test_rewriter(raw: bytes, sessions: dict[str, str], cwd: str | None, expected: bytes | None) -> None:
    rewriter = Rewriter(cwd, ["/rec"])
    for old, new in sessions.items():
        rewriter.learn(old, new)
    line = outgoing(raw)
    sent = rewriter.line(line)
    if expected is None:
        assert sent is line.data  # the recorded bytes themselves
    else:
        assert sent == expected


def test_the_client_side_of_a_capture() -> None:
    records = [
        rec(1, "to-agent", "request", "session/new", {"id": 1, "method": "session/new", "params": {"cwd": "/w"}}),
        rec(2, "to-client", "response", "session/new", {"id": 1, "result": {"sessionId": "s"}}, "s"),
        rec(3, "to-agent", "request", "session/prompt", {"id": 2, "method": "session/prompt",
                                                          "params": {"sessionId": "s"}}, "s"),
        rec(4, "to-client", "notification", "session/update", {"method": "session/update"}, "s"),
        rec(5, "to-client", "request", "fs/read_text_file", read("r", "/w/a"), "s"),
        rec(6, "to-agent", "response", "fs/read_text_file", {"id": "r", "result": {"content": "A"}}, "s"),
        rec(7, "to-agent", "notification", "session/cancel", {"method": "session/cancel"}, "s"),
        rec(8, "to-agent", "request", "authenticate", {"id": 3}, None, raw="<redacted>", redacted="whole"),
        {"type": "message", "seq": 9, "direction": "to-agent", "kind": "notification", "verdict": "emit",
         "method": "x", "out": "{}\n"},
    ]
    side = ClientSide.from_records(records)
    assert [(line.seq, line.where, line.before, line.creates) for line in side.lines] == [
        (1, "session 1 setup", 0, "s"), (3, "session 1 turn 1", 1, None), (7, "session 1 turn 1", 2, None)]
    assert side.withheld == ["seq 8 authenticate (connection)"]
    assert side.cwds == ["/w"]
    assert side.answers.answer(read(5, "/w/a"))[0] == {"jsonrpc": "2.0", "id": 5, "result": {"content": "A"}}


def test_only_a_pointer_masked_in_what_the_client_sent_is_said_to_be_sent_as_the_placeholder() -> None:
    # The bridge put the system prompt in front of the prompt: `redacted` names it, but only
    # `out` holds it; the client's own line (`raw`), which drive sends, has nothing masked.
    prompt = {"id": 2, "method": "session/prompt", "params": {"sessionId": "s", "prompt": [{"text": "Hi"}]}}
    masked = {"id": 3, "method": "session/new",
              "params": {"cwd": "/w", "mcpServers": [{"args": ["--token <redacted>"]}]}}
    side = ClientSide.from_records([
        rec(1, "to-agent", "request", "session/prompt", prompt, "s", redacted=["/params/prompt/0/text"]),
        rec(2, "to-agent", "request", "session/new", masked, None,
            redacted=["/params/prompt/0/text", "/params/mcpServers/0/args/0", "no pointer"]),
    ])
    assert [line.redacted for line in side.lines] == [[], ["/params/mcpServers/0/args/0", "no pointer"]]


def update(which: str, seq: int = 1, **fields: Any) -> Recorded:
    msg = {"method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": which, **fields}}}
    return Recorded(seq, "to-client", "notification", "session/update", "s", None, msg)


def text(which: str, said: str, seq: int = 1) -> Recorded:
    return update(which, seq, content={"type": "text", "text": said})


TURN = [
    text("agent_message_chunk", "He", 1), text("agent_message_chunk", "llo", 2), text("agent_thought_chunk", "hm", 3),
    update("tool_call", 4, toolCallId="c", title="Read", kind="read", status="pending"),
    Recorded(5, "to-client", "request", "session/request_permission", "s", "p",
            {"id": "p", "method": "session/request_permission", "params": {"options": OPTIONS}}),
    Recorded(6, "to-agent", "response", "session/request_permission", "s", "p", {"id": "p", "result": {}}),
    update("tool_call_update", 7, toolCallId="c", status="completed"),
    update("state_update", 8, state="idle", stopReason="end_turn"),
    Recorded(9, "to-client", "response", "fs/read_text_file", "s", 4, {"id": 4, "error": {"code": 1, "message": "m"}}),
]


def test_structure_facts() -> None:
    assert [(m.seq, m.method, m.msg) for m in facts.structure(TURN)] == [
        (1, "update agent_message_chunk", {"update": "agent_message_chunk"}),
        (3, "update agent_thought_chunk", {"update": "agent_thought_chunk"}),
        (4, "update tool_call", {"update": "tool_call", "toolCall": {"kind": "read", "title": "Read",
                                                                     "status": "completed"}}),
        (5, "request session/request_permission", {"request": "session/request_permission",
                                                   "options": ["allow_once", "reject_once"]}),
        (7, "update tool_call_update", {"update": "tool_call_update"}),
        (8, "update state_update", {"update": "state_update", "state": "idle"}),
        (8, "stop reason", {"stopReason": "end_turn"}),
        (9, "error", {"error": {"method": "fs/read_text_file", "code": 1}}),
    ]


def test_text_facts_join_a_run_of_chunks() -> None:
    got = facts.text(TURN)
    assert got[0].msg == {"update": "agent_message_chunk", "text": "Hello"}
    assert got[-1].msg == {"error": {"method": "fs/read_text_file", "code": 1, "message": "m"}}


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(max_size=3), st.lists(st.integers(0, 1), max_size=2))
_BLOCK = st.fixed_dictionaries({}, optional={"type": st.sampled_from(["text", "image"]),
                                             "text": st.one_of(st.text(max_size=4), st.integers()), "data": _VALUES})
_UPDATE = st.one_of(_VALUES, st.fixed_dictionaries(
    {"sessionUpdate": st.sampled_from(["agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update",
                                       "state_update", "plan", "x_chunk"]) | _VALUES},
    optional={"content": st.one_of(_VALUES, _BLOCK, st.lists(st.one_of(_BLOCK, _VALUES), max_size=3)),
              "toolCallId": _VALUES, "kind": _VALUES, "title": _VALUES, "status": _VALUES,
              "state": st.sampled_from(["idle", "running"]) | _VALUES, "stopReason": _VALUES, "entries": _VALUES}))
_OPTIONS = st.one_of(_VALUES, st.lists(st.one_of(_VALUES, st.fixed_dictionaries(
    {}, optional={"kind": _VALUES, "optionId": _VALUES, "name": _VALUES})), max_size=3))
_ERROR = st.fixed_dictionaries({}, optional={"code": _VALUES, "message": _VALUES}) | _VALUES
_RESULT = st.fixed_dictionaries({}, optional={"stopReason": _VALUES, "other": _VALUES}) | _VALUES
# (kind, method, msg): the shapes the facts read, and anything at all
_SHAPE = st.one_of(
    st.tuples(st.just("notification"), st.just("session/update"), st.builds(lambda u: {"params": {"update": u}}, _UPDATE)),
    st.tuples(st.just("request"), st.sampled_from(["session/request_permission", "fs/read_text_file"]),
              st.builds(lambda o: {"params": {"options": o}}, _OPTIONS)),
    st.tuples(st.just("response"), st.sampled_from(["session/prompt", "fs/read_text_file"]),
              st.fixed_dictionaries({}, optional={"error": _ERROR, "result": _RESULT})),
    st.tuples(st.sampled_from(["notification", "request", "response", "other"]),
              st.sampled_from(["session/update", "session/prompt", "session/request_permission", None]), _VALUES))
_MESSAGE = st.builds(lambda shape, seq, direction, emitted: Recorded(seq, direction, shape[0], shape[1], None, None,
                                                                    shape[2], emitted=emitted),
                     _SHAPE, st.integers(0, 9), st.sampled_from(["to-client", "to-client", "to-agent"]),
                     st.sampled_from([False, False, True]))


@settings(max_examples=200, deadline=None)
@given(st.lists(_MESSAGE, max_size=8))
def test_a_turn_of_kept_messages_has_the_turn_s_facts(turn: list[Recorded]) -> None:
    """`facts.kept` holds only what the facts read of a message (`drive` keeps the live run's
    messages so, and held a long run of output whole before): the facts are the same."""
    assert facts.structure([facts.kept(m, with_text=False) for m in turn]) == facts.structure(turn)
    assert facts.text([facts.kept(m, with_text=True) for m in turn]) == facts.text(turn)


def test_kept_messages_of_a_turn_hold_no_more_than_their_facts_read() -> None:
    assert [facts.kept(m, with_text=False).msg for m in TURN[:2]] == [
        {"params": {"update": {"sessionUpdate": "agent_message_chunk"}}}] * 2
    assert facts.kept(TURN[0], with_text=True).msg == {"params": {"update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "He"}}}}
    assert facts.kept(TURN[5], with_text=True).msg is None  # the client's: no facts
    turn = [*TURN, Recorded(10, "to-client", "notification", "session/update", "s", None, {"params": {"update": {
        "sessionUpdate": "agent_message_chunk", "content": [{"type": "text", "text": "a"}, {"type": "image"},
                                                            {"type": "text", "text": "b"}]}}}),
            update("plan", 11, entries=[1], content={"type": "text", "text": "p"}),
            Recorded(12, "to-client", "response", "session/prompt", "s", 2, {"id": 2, "result": {"stopReason": "x"}})]
    assert facts.structure([facts.kept(m, with_text=False) for m in turn]) == facts.structure(turn)
    assert facts.text([facts.kept(m, with_text=True) for m in turn]) == facts.text(turn)
