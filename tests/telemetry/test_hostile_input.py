"""What a hostile or broken peer sends, and what the builder and the observer make of it:
wrong-typed fields left out (never a crash), open state capped across sessions, children
ended with their parent, content masked whole, reads built in bounded slices, and a
builder that raises anyway turning telemetry off with the traffic untouched."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import trio

from acp_bridge.capture.text_redaction import mask_text_secrets
from acp_bridge.core import Direction, Relay
from acp_bridge.telemetry import live as o
from acp_bridge.telemetry import tree
from acp_bridge.telemetry.builder import TraceBuilder
from acp_bridge.telemetry.live import TelemetryObserver
from acp_bridge.telemetry.spans import SpanRecord, Timed
from tests.conftest import line
from tests.telemetry.helpers import T0, A, C, ListSink, build, feeder, ok, req, shape, update

SECRET = "TOPSECRET-SYSTEM-PROMPT"


def test_wrong_typed_fields_are_left_out_and_never_raise() -> None:
    """The review's crash: a list as stopReason, a dict as a tool's status (unhashable in
    a set lookup), and the like: the turn and the tool still end, the field is left out."""
    spans = build([
        (0.0, A, req(1, "session/prompt", sessionId="s", prompt=[])),
        (1.0, C, update("s", sessionUpdate="tool_call", toolCallId="t", status={"x": 1}, title=7, kind=["k"])),
        (2.0, C, update("s", sessionUpdate="tool_call_update", toolCallId="t", status=["completed"])),
        (3.0, C, ok(1, stopReason=["end_turn"])),
        (4.0, A, req(2, "session/prompt", sessionId="s", prompt=[])),
        (5.0, C, {"jsonrpc": "2.0", "id": 2, "error": {"code": {"n": 1}, "message": ["m"]}}),
        (6.0, A, req(3, "x/big")),
        (7.0, C, {"jsonrpc": "2.0", "id": 3, "error": {"code": 10**30, "message": "m"}}),
        (8.0, C, update("s", sessionUpdate="tool_call", toolCallId={"id": [1]}, status="completed")),
    ], end=9.0)
    assert shape(spans) == [
        ("execute_tool", "invoke_agent", 1.0, 3.0),  # ended with its turn: its status never said done
        ("invoke_agent", "session", 0.0, 3.0),
        ("invoke_agent", "session", 4.0, 5.0),
        ("x/big", "", 6.0, 7.0),
        ("execute_tool", "session", 8.0, 8.0),
        ("session", "", 0.0, 9.0),
    ]
    tool, turn, second, big, odd_id, _ = spans
    assert tool.attributes == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "t",
                               "gen_ai.conversation.id": "s", "acp.unfinished": True}
    assert "gen_ai.response.finish_reasons" not in turn.attributes
    assert (second.error, "rpc.jsonrpc.error_code" in second.attributes) == ('JSON-RPC error {"n":1}', False)
    # Past 64 bits an OTLP attribute cannot hold it (the SDK would drop it without a word).
    assert (big.error, "rpc.jsonrpc.error_code" in big.attributes) == (f"JSON-RPC error {10**30}", False)
    assert odd_id.attributes["gen_ai.tool.call.id"] == '{"id":[1]}'


def test_open_tool_calls_are_capped_across_sessions() -> None:
    """1,024 tool calls per session are allowed, but not 1,024 sessions of them: past
    MAX_OPEN_TOOLS in all, the oldest (of any session) ends, marked evicted."""
    builder = TraceBuilder(rng=random.Random(4))
    for session in range(5):
        for tool in range(1000):
            builder.feed(Timed(T0 + session, C, update(f"s{session}", sessionUpdate="tool_call", toolCallId=tool)))
    spans = builder.take()[0]
    assert builder.open_spans == 5 + tree.MAX_OPEN_TOOLS
    assert len(spans) == builder.evicted == 5000 - tree.MAX_OPEN_TOOLS
    assert [(sp.attributes["gen_ai.conversation.id"], sp.attributes["gen_ai.tool.call.id"]) for sp in spans] == [
        (f"s{i // 1000}", str(i % 1000)) for i in range(5000 - tree.MAX_OPEN_TOOLS)]
    assert all(sp.attributes["acp.evicted"] for sp in spans)
    builder.feed(Timed(T0 + 9, C, update("s4", sessionUpdate="tool_call_update", toolCallId=999, status="completed")))
    builder.feed(Timed(T0 + 9, C, update("s5", sessionUpdate="tool_call", toolCallId=0)))  # room: nothing evicted
    assert builder.evicted == 5000 - tree.MAX_OPEN_TOOLS


def test_a_turn_ends_its_open_tool_calls_and_requests() -> None:
    """A cancelled turn whose tool never reported done: the tool and the permission request
    asked for it end with the turn (unfinished), not at session/close a minute later."""
    spans = build([
        (1.0, A, req(1, "session/prompt", sessionId="s", prompt=[])),
        (2.0, C, update("s", sessionUpdate="tool_call", toolCallId="t", kind="execute", status="pending")),
        (2.5, C, req(0, "session/request_permission", sessionId="s", toolCall={"toolCallId": "t"}, options=[])),
        (3.0, A, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}),
        (4.0, C, ok(1, stopReason="cancelled")),
        (5.0, A, ok(0, outcome={"outcome": "cancelled"})),  # too late: not paired again
        (101.0, A, req(2, "session/close", sessionId="s")),
        (101.5, C, ok(2)),
    ], end=200.0)
    assert shape(spans) == [
        ("session/request_permission", "execute_tool execute", 2.5, 4.0),
        ("execute_tool execute", "invoke_agent", 2.0, 4.0),
        ("invoke_agent", "session", 1.0, 4.0),
        ("session/close", "session", 101.0, 101.5),
        ("session", "", 1.0, 101.5),
    ]
    assert [sp.attributes.get("acp.unfinished") for sp in spans] == [True, True, None, None, None]


def masking(content: bool = True) -> TraceBuilder:
    identity = (lambda msg: msg) if content else None
    return TraceBuilder(identity, rng=random.Random(5), masked_text=lambda text: mask_text_secrets(text, SECRET))


def test_content_is_masked_as_it_is_sent_not_piece_by_piece() -> None:
    """The system prompt echoed over two chunks (neither holds it whole), in an error
    message and in a finding; a bearer token in a tool's title and its input."""
    builder = masking()
    feed = feeder(builder)
    title = "Run curl -H 'Authorization: Bearer sk-live-ABC123' https://x"
    for at, direction, msg in [
        (0.0, A, req(1, "session/prompt", sessionId="s", prompt=[{"type": "text", "text": "API_KEY=hunter2"}])),
        (1.0, C, update("s", sessionUpdate="agent_message_chunk", content={"type": "text", "text": SECRET[:10]})),
        (1.1, C, update("s", sessionUpdate="agent_message_chunk", content={"type": "text", "text": SECRET[10:]})),
        (1.5, C, update("s", sessionUpdate="tool_call", toolCallId="t", title=title, status="completed",
                        rawInput={"command": "export API_TOKEN=sk-live-ABC123"})),
        (2.0, C, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": f"bad: {SECRET}"}}),
    ]:
        feed(T0 + at, direction, msg)
    builder.finding(T0 + 2.5, "s", "x", "warning", f"saw {SECRET}")
    builder.finish(T0 + 3)
    tool, turn, session = builder.take()[0]
    assert (tool.attributes["acp.tool_call.title"], tool.attributes["gen_ai.tool.call.arguments"]) == (
        "Run curl -H 'Authorization: Bearer <redacted>' https://x", '{"command":"export API_TOKEN=<redacted>"}')
    assert turn.attributes["gen_ai.output.messages"] == (
        '[{"role":"assistant","parts":[{"type":"text","content":"<system prompt>"}]}]')
    assert turn.attributes["gen_ai.input.messages"] == (
        '[{"role":"user","parts":[{"type":"text","content":"API_KEY=<redacted>"}]}]')
    assert turn.attributes["rpc.jsonrpc.error_message"] == "bad: <system prompt>"
    assert session.events == [("acp_bridge.finding", T0 + 2.5, {
        "acp_bridge.finding.code": "x", "acp_bridge.finding.level": "warning",
        "acp_bridge.finding.message": "saw <system prompt>"})]


def test_without_content_a_tools_title_is_not_sent() -> None:
    """An agent writes the command it runs into the title: it is tool input, content."""
    builder = masking(content=False)
    builder.feed(Timed(T0, C, update("s", sessionUpdate="tool_call", toolCallId="t", title="Run make", kind="execute",
                                    status="completed")))
    assert builder.take()[0][0].attributes == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "t", "gen_ai.conversation.id": "s",
        "acp.tool_call.kind": "execute", "acp.tool_call.status": "completed", "gen_ai.tool.name": "execute"}


TOOL_CALL = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":' \
            b'{"sessionUpdate":"tool_call","toolCallId":"t%d","status":"pending"}}}\n'


def test_a_slice_stops_inside_one_read_of_many_lines() -> None:
    """1,000 tool calls in one read are one Forward: a slice that has run out of time
    stops after the line it is on and queues the rest (the review measured 38 ms)."""
    sink = ListSink()
    observer = TelemetryObserver(TraceBuilder(rng=random.Random(6)), sink)
    run = b"".join(TOOL_CALL % i for i in range(1000))
    forwards = Relay([], strict=True).feed(Direction.TO_CLIENT, run, 0.0)
    assert len(forwards) == 1
    observer.record(T0, 0.0, forwards)
    observer.drain(0.0)  # out of time at once: one line built
    assert observer.builder.open_spans == 2  # the session and its first tool call
    observer.drain()
    assert observer.builder.open_spans == 1001
    observer.close(T0 + 1, 1.0)
    messages = [ob.value for ob in sink.observations if ob.instrument == "acp.messages"]
    assert (messages, len(sink.records)) == ([1000], 1001)  # counted once, not again for the rest


def test_a_read_larger_than_the_queue_is_taken_when_nothing_waits() -> None:
    """A 5 MB file's content is one message, bigger than the queue's whole bound: taken
    when the queue is empty (its request span ends), dropped only behind other reads."""
    sink = ListSink()
    observer = TelemetryObserver(TraceBuilder(rng=random.Random(7)), sink, queue_bytes=1000)
    relay = Relay([], strict=True)
    big = line(ok(1, content="a" * 5000))
    observer.record(T0, 0.0, relay.feed(Direction.TO_CLIENT, line(req(1, "fs/read_text_file", path="/x")), 0.0))
    observer.drain()
    observer.record(T0 + 1, 1.0, relay.feed(Direction.TO_AGENT, big, 1.0))
    observer.record(T0 + 1, 1.0, relay.feed(Direction.TO_AGENT, big, 1.0))  # behind the first: dropped
    observer.close(T0 + 2, 2.0)
    assert [(sp.name, sp.end, sp.attributes.get("acp.unfinished")) for sp in sink.records] == [
        ("fs/read_text_file", T0 + 1, None)]
    assert observer.dropped == 1


class Exploding(TraceBuilder):
    def feed(self, timed: Timed) -> None:
        if type(timed.msg) is dict and "boom" in timed.msg:
            raise TypeError("a defect")
        super().feed(timed)


def test_an_exception_in_building_turns_telemetry_off_once(caplog: pytest.LogCaptureFixture) -> None:
    sink = ListSink()
    observer = TelemetryObserver(Exploding(rng=random.Random(8)), sink)
    relay = Relay([], strict=True)
    observer.record(T0, 0.0, relay.feed(Direction.TO_AGENT, line(req(1, "x/a")), 0.0))
    observer.record(T0, 0.0, relay.feed(Direction.TO_AGENT, b'{"id":9,"boom":true}\n', 0.0))
    with caplog.at_level(logging.ERROR, "acp_bridge.telemetry"):
        observer.close(T0 + 1, 1.0)  # raises nothing
    assert sink.closed_with == 2.0  # the SDK is still shut down (what was handed on is flushed)
    assert (observer.failed, sink.records) == (True, [])
    observer.record(T0 + 2, 2.0, relay.feed(Direction.TO_AGENT, line(req(2, "x/b")), 2.0))
    assert observer.dropped == 1
    assert [r.getMessage() for r in caplog.records] == [
        "telemetry: building spans failed; telemetry is off for the rest of this connection, the relay goes on"]


async def test_an_exception_while_running_stops_the_task_not_the_bridge() -> None:
    observer = TelemetryObserver(Exploding(rng=random.Random(9)), ListSink())
    observer.record(T0, 0.0, Relay([], strict=True).feed(Direction.TO_AGENT, b'{"id":9,"boom":true}\n', 0.0))
    with trio.fail_after(10):
        await observer.run()  # returns: nothing more to build
    assert observer.failed


def test_closing_hands_the_open_spans_on_within_its_budget(monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """Out of time at the end: a first batch goes (the sessions first, the roots of their
    traces), the rest is said and left."""
    monkeypatch.setattr(o, "FINISH_SECONDS", 0.0)
    sink = ListSink()
    builder = TraceBuilder(rng=random.Random(10))
    for i in range(600):
        builder.feed(Timed(T0, C, update(f"s{i % 3}", sessionUpdate="tool_call", toolCallId=i)))
    observer = TelemetryObserver(builder, sink)
    with caplog.at_level(logging.WARNING, "acp_bridge.telemetry"):
        observer.close(T0 + 1, 1.0)
    assert len(sink.records) == o.FINISH_BATCH
    assert [sp.name for sp in sink.records[:4]] == ["session", "session", "session", "execute_tool"]
    assert caplog.records[-1].getMessage() == (
        f"telemetry: {603 - o.FINISH_BATCH} spans still open at exit were not sent (no time left)")


def test_a_v2_idle_update_before_the_prompts_acknowledgment_ends_the_turn_live() -> None:
    """Live, the observer parses state_update lines only while they can end a turn: from
    the prompt on, not only after its acknowledgment (as export, which parses everything)."""
    sink = ListSink()
    observer = TelemetryObserver(TraceBuilder(rng=random.Random(11)), sink)
    relay = Relay([], strict=True)
    idle = update("s", sessionUpdate="state_update", state="idle", stopReason="end_turn")
    script: list[tuple[float, Direction, Any]] = [
        (0.0, Direction.TO_AGENT, req(1, "session/prompt", sessionId="s", prompt=[])),
        (1.0, Direction.TO_CLIENT, idle),
        (2.0, Direction.TO_CLIENT, ok(1, messageId="m")),
    ]
    for at, direction, msg in script:
        observer.record(T0 + at, at, relay.feed(direction, line(msg), at))
        observer.drain()
    observer.close(T0 + 5, 5.0)
    turn: SpanRecord = sink.records[0]
    assert (turn.name, turn.end, turn.attributes["gen_ai.response.finish_reasons"]) == (
        "invoke_agent", T0 + 1.0, ("end_turn",))
