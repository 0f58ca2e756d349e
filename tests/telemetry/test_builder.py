"""The span builder on its own (pure: messages with their times in, spans out), and the
live observer fed by a real Relay with the bridge's rules."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.config import Config, RewriteConfig, SystemPromptConfig
from acp_bridge.core import Direction, Relay
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.core.rewrites.table import TableRule
from acp_bridge.telemetry import tree
from acp_bridge.telemetry.builder import TraceBuilder
from acp_bridge.telemetry.live import TelemetryObserver
from acp_bridge.telemetry.spans import Timed
from tests.conftest import example, line
from tests.telemetry.helpers import T0, A, C, ListSink, build, feeder, ok, req, shape, update

V2_TURN = [
    (0.0, A, req(1, "session/new", cwd="/w")),
    (0.5, C, ok(1, sessionId="s")),
    (1.0, A, req(2, "session/prompt", sessionId="s", prompt=[])),
    (1.1, C, ok(2, messageId="m1")),  # v2: only an acknowledgment
    (1.5, C, update("s", sessionUpdate="state_update", state="running")),
    (2.0, C, update("s", sessionUpdate="agent_message_chunk", messageId="m2", content={"type": "text", "text": "hi"})),
    (2.5, C, update("s", sessionUpdate="tool_call_update", toolCallId="t1", title="grep", kind="search",
                    status="in_progress")),
    (3.0, C, update("s", sessionUpdate="tool_call_update", toolCallId="t1", status="completed")),
    (4.0, C, update("s", sessionUpdate="state_update", state="idle", stopReason="end_turn")),
    (5.0, A, req(3, "session/close", sessionId="s")),
    (5.5, C, ok(3)),
]


def test_a_v2_turn_ends_with_the_idle_state_update_not_the_prompts_response() -> None:
    spans = build(V2_TURN)
    assert shape(spans) == [
        ("session/new", "session", 0.0, 0.5),
        ("execute_tool search", "invoke_agent", 2.5, 3.0),  # v2 creates tool calls by update
        ("invoke_agent", "session", 1.0, 4.0),
        ("session/close", "session", 5.0, 5.5),
        ("session", "", 0.0, 5.5),  # closed: not unfinished
    ]
    turn = spans[2].attributes
    assert (turn["gen_ai.response.finish_reasons"], turn["acp.turn.time_to_first_chunk"]) == (("end_turn",), 1.0)
    assert "acp.unfinished" not in spans[4].attributes


def test_an_unanswered_prompt_is_ended_by_the_next_one_and_errors_are_marked() -> None:
    spans = build([
        (0.0, A, req(1, "session/prompt", sessionId="s", prompt=[])),
        (1.0, A, req(2, "session/prompt", sessionId="s", prompt=[])),
        (1.5, A, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}),
        (2.0, C, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "boom: /home/me/secret"}}),
        (3.0, C, req("x", "fs/write_text_file", sessionId="s", path="/w/a", content="text")),
        (3.5, A, {"jsonrpc": "2.0", "id": "x", "error": {"code": -32000, "message": "denied"}}),
    ], end=9.0)
    assert shape(spans) == [
        ("invoke_agent", "session", 0.0, 1.0),
        ("invoke_agent", "session", 1.0, 2.0),
        ("fs/write_text_file", "session", 3.0, 3.5),
        ("session", "", 0.0, 9.0),
    ]
    first, second, write, session = spans
    assert first.attributes["acp.unfinished"] is True and first.error is None
    assert (second.error, second.attributes["rpc.jsonrpc.error_code"]) == ("JSON-RPC error -32603", -32603)
    assert [(name, at - T0) for name, at, _ in second.events] == [("session/cancel", 1.5)]
    assert "rpc.jsonrpc.error_message" not in second.attributes  # content: off by default
    assert (write.error, write.attributes["rpc.jsonrpc.error_code"], write.attributes["acp.direction"]) == (
        "JSON-RPC error -32000", -32000, "to-client")
    assert session.attributes["acp.unfinished"] is True


def test_ids_are_kept_apart_by_type_and_direction() -> None:
    """`1` and `"1"` are different ids, and an agent's request 1 is not the client's."""
    spans = build([
        (0.0, A, req(1, "a/one")),
        (0.1, C, req("1", "b/one")),
        (0.2, C, req(1, "c/one")),
        (1.0, C, ok(1)),  # answers the client's a/one
        (2.0, A, ok("1")),  # answers the agent's b/one
        (3.0, A, ok(1)),  # answers the agent's c/one
    ])
    assert shape(spans) == [("a/one", "", 0.0, 1.0), ("b/one", "", 0.1, 2.0), ("c/one", "", 0.2, 3.0)]


def test_a_reused_id_is_paired_as_the_relay_pairs_it() -> None:
    """A request with the id of one still in flight from the same side (a peer's bug): the
    relay's session answers them in order, and so the spans end: the first answer ends the
    older request, the second the newer (no pairing of the builder's own second-guesses it)."""
    spans = build([
        (0.0, A, req(1, "a/old")),
        (1.0, A, req(1, "b/new")),
        (2.0, C, ok(1)),
        (3.0, C, ok(1)),
        (4.0, C, ok(1)),  # answers nothing
    ])
    assert shape(spans) == [("a/old", "", 0.0, 2.0), ("b/new", "", 1.0, 3.0)]
    assert not any("acp.unfinished" in span.attributes for span in spans)


def test_the_agents_name_and_version_come_from_initialize_v1_and_v2() -> None:
    for result in ({"agentInfo": {"name": "a1", "version": "1.2"}}, {"info": {"name": "a1", "version": "1.2"}}):
        spans = build([(0.0, A, req(0, "initialize", protocolVersion=1)), (0.1, C, ok(0, **result)),
                       (1.0, A, req(1, "session/prompt", sessionId="s", prompt=[])),
                       (2.0, C, ok(1, stopReason="max_tokens", usage={"inputTokens": 5, "outputTokens": 7}))])
        turn = spans[1]
        assert turn.name == "invoke_agent a1"
        assert {k: v for k, v in turn.attributes.items() if k.startswith("gen_ai.")} == {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "s", "gen_ai.agent.name": "a1",
            "gen_ai.agent.version": "1.2", "gen_ai.response.finish_reasons": ("max_tokens",),
            "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 7}


def test_open_state_is_bounded_and_the_oldest_is_ended_first() -> None:
    builder = TraceBuilder(rng=random.Random(1))
    feed = feeder(builder)
    for i in range(tree.MAX_PENDING + 10):
        feed(T0 + i, A, req(i, "x/slow"))
    for i in range(tree.MAX_SESSIONS + 5):
        builder.feed(Timed(T0 + i, C, update(f"s{i}", sessionUpdate="tool_call", toolCallId="t", title="t")))
    spans = builder.take()[0]
    evicted = [span for span in spans if span.attributes.get("acp.evicted")]
    assert [span.attributes["rpc.jsonrpc.request_id"] for span in evicted if span.name == "x/slow"] == [
        str(i) for i in range(10)]
    assert sorted(span.attributes["gen_ai.conversation.id"] for span in evicted if span.name == "session") == sorted(
        f"s{i}" for i in range(5))
    assert builder.evicted == 15


def test_findings_become_events_on_their_sessions_span() -> None:
    builder = TraceBuilder(rng=random.Random(1))
    feeder(builder)(T0, A, req(1, "session/prompt", sessionId="s", prompt=[]))
    builder.finding(T0 + 1, "s", "unanswered-request", "warning", "details")
    builder.finding(T0 + 1, "unknown", "x", "error", "no span to hang it on")
    builder.finish(T0 + 2)
    turn = builder.take()[0][0]
    assert turn.events == [("acp_bridge.finding", T0 + 1, {
        "acp_bridge.finding.code": "unanswered-request", "acp_bridge.finding.level": "warning"})]


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)
KEYS = st.sampled_from(["s", "t", 1, None, [1], {"a": 1}])


def odd(*right: Any) -> st.SearchStrategy[Any]:
    """A field's right values, or one of the wrong type (a list, an object, a number...)."""
    return st.sampled_from(right) | st.sampled_from([["end_turn"], {"x": 1}, 2**70, -1, True, 1.5, ""]) | JSON


STATUS = odd("completed", "failed", "pending", "in_progress", None)
MESSAGES = st.one_of(
    st.builds(req, KEYS, st.sampled_from(["session/prompt", "session/new", "session/close", "x", "initialize",
                                          "session/request_permission"]),
              sessionId=KEYS, toolCall=st.fixed_dictionaries({"toolCallId": KEYS}) | JSON),
    st.builds(lambda i, r, stop: {"jsonrpc": "2.0", "id": i, "result": {**r, "stopReason": stop} if type(r) is dict else r},
              KEYS, st.dictionaries(st.sampled_from(["usage", "sessionId", "outcome"]), JSON, max_size=2) | JSON,
              odd("end_turn", "cancelled", None)),
    st.builds(lambda i, code, message: {"jsonrpc": "2.0", "id": i, "error": {"code": code, "message": message}},
              KEYS, odd(-32603, -32000, 2**64, -(2**63) - 1, 10**100), odd("m", None)),
    st.builds(lambda i, e: {"jsonrpc": "2.0", "id": i, "error": e}, KEYS, JSON),
    st.builds(lambda s, k, t, status, title, kind, stop: update(
        s, sessionUpdate=k, toolCallId=t, status=status, title=title, kind=kind, state="idle", stopReason=stop,
        content={"type": "text", "text": title}),
              KEYS, st.sampled_from(["tool_call", "tool_call_update", "agent_message_chunk", "state_update"]),
              odd("t", "u", 1) | KEYS, STATUS, odd("Run make"), odd("read", "execute"), odd("end_turn")),
    st.builds(lambda s: {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": s}}, KEYS),
    JSON,
)


@given(st.lists(st.tuples(st.sampled_from([A, C]), MESSAGES), max_size=30), st.booleans())
def test_any_traffic_builds_a_tree_of_ended_spans(script: list[tuple[str, Any]], content: bool) -> None:
    """Whatever comes (fields of the wrong type included), nothing raises, every span ends
    at or after its start, every parent is a span of the output in the same trace (no
    dangling links), and every child lies within its parent (it never outlives it)."""
    spans = build([(i, direction, msg) for i, (direction, msg) in enumerate(script)],
                  end=len(script), masked=(lambda msg: msg) if content else None)
    by_id = {span.span_id: span for span in spans}
    assert len(by_id) == len(spans)
    for span in spans:
        assert span.end is not None and span.end >= span.start
        if span.parent_id is not None:
            parent = by_id[span.parent_id]
            assert parent.trace_id == span.trace_id
            assert parent.end is not None and parent.start <= span.start and span.end <= parent.end, (
                span.name, parent.name)


def chunk(text: str) -> dict[str, Any]:
    return update("sess_abc123", sessionUpdate="agent_message_chunk", content={"type": "text", "text": text})


def test_the_bridges_work_becomes_span_events() -> None:
    """Through a real Relay with both rules: the system prompt's dialect on session/new and
    the session, a legacy suggestion converted, and the bridge's withdrawal on the next turn."""
    relay = Relay(build_rewrites(Config(system_prompt=SystemPromptConfig(text="Be brief."))), strict=True)
    sink = ListSink()
    observer = TelemetryObserver(TraceBuilder(rng=random.Random(3)), sink)
    prompt = example("v1-session-prompt-request")
    script = [
        (0.0, Direction.TO_AGENT, line(example("v1-initialize-request-client-with-suggestions"))),
        (0.1, Direction.TO_CLIENT, line(example("v1-initialize-response-agent-with-system-prompt"))),
        (0.2, Direction.TO_AGENT, line(example("v1-session-new-request-plain"))),
        (0.3, Direction.TO_CLIENT, line(example("v1-session-new-response"))),
        (1.0, Direction.TO_AGENT, line(prompt)),
        (1.5, Direction.TO_CLIENT, line(chunk("Looking.")) * 3),
        (2.0, Direction.TO_CLIENT, line(ok(prompt["id"], stopReason="end_turn"))),
        (2.1, Direction.TO_CLIENT, line(example("v1-session-update-legacy-prompt-suggestions"))),
        (3.0, Direction.TO_AGENT, line({**copy.deepcopy(prompt), "id": 6})),
    ]
    for at, direction, data in script:
        observer.record(T0 + at, at, relay.feed(direction, data, at))
    observer.close(T0 + 4.0, 4.0)
    events = {span.name: [(name, round(at - T0, 3), attrs) for name, at, attrs in span.events] for span in sink.records}
    assert events == {
        "initialize": [],
        "session/new": [("acp_bridge.system_prompt", 0.2, {"acp_bridge.system_prompt.dialect": "spec"})],
        "invoke_agent my-agent": [("acp_bridge.suggestion", 3.0, {"acp_bridge.action": "sent",
                                                                   "acp_bridge.suggestions": 0})],  # withdrawn
        "session": [("acp_bridge.suggestion", 2.1, {"acp_bridge.action": "converted", "acp_bridge.suggestions": 1})],
    }
    named = {span.name: span for span in sink.records}
    assert named["session"].attributes["acp_bridge.system_prompt.dialect"] == "spec"
    turns = [span for span in sink.records if span.name == "invoke_agent my-agent"]
    assert [t.attributes.get("acp.turn.time_to_first_chunk") for t in turns] == [0.5, None]
    messages = {o.attributes: o.value for o in sink.observations if o.instrument == "acp.messages"}
    # What went out: the legacy suggestion was dropped, its converted form and the withdrawal sent.
    assert messages == {(("acp.direction", "to-agent"),): 4, (("acp.direction", "to-client"),): 8}
    assert sink.closed_with == 2.0


def test_a_full_queue_drops_reads_and_counts_them() -> None:
    """`record` only appends, up to the queue's bound; what does not fit is dropped and
    counted, and the traffic's bytes are never held beyond the bound."""
    sink = ListSink()
    run = line(chunk("x" * 100)) * 3
    observer = TelemetryObserver(TraceBuilder(rng=random.Random(3)), sink, queue_bytes=2 * len(run) + 1)
    relay = Relay([], strict=True)
    for i in range(5):
        observer.record(T0 + i, float(i), relay.feed(Direction.TO_CLIENT, run, float(i)))
    assert observer.dropped == 3
    observer.close(T0 + 9, 9.0)
    messages = {o.attributes: o.value for o in sink.observations if o.instrument == "acp.messages"}
    assert messages == {(("acp.direction", "to-client"),): 6}
    observer.record(T0 + 10, 10.0, relay.feed(Direction.TO_CLIENT, run, 10.0))  # after close: dropped
    assert observer.dropped == 4


def test_what_a_hostile_peer_sends_is_bounded() -> None:
    """A megabyte title or method is cut to MAX_NAME characters, and a peer inventing method
    names cannot make the metrics keep a series for each (past a bound they are "other")."""
    from acp_bridge.telemetry.fields import MAX_METRIC_VALUES, MAX_NAME

    builder = TraceBuilder(rng=random.Random(2), masked=lambda msg: msg)  # titles are content
    feed = feeder(builder)
    feed(T0, C, update("s", sessionUpdate="tool_call", toolCallId="t", title="T" * 1_000_000,
                       kind="k" * 5000, status="completed"))
    feed(T0, A, req(1, "m" * 1_000_000))
    for i in range(MAX_METRIC_VALUES + 50):
        feed(T0 + 1, A, req(f"r{i}", f"x/{i}"))
        feed(T0 + 2, C, ok(f"r{i}"))
    builder.finish(T0 + 3)
    spans, observations = builder.take()
    tool, method = spans[0], next(span for span in spans if span.name.startswith("mmm"))
    assert len(tool.attributes["acp.tool_call.title"]) == len(tool.attributes["gen_ai.tool.name"]) == MAX_NAME
    assert len(method.name) == len(method.attributes["rpc.method"]) == MAX_NAME
    methods = {dict(o.attributes)["rpc.method"] for o in observations if o.instrument == "acp.requests"}
    assert len(methods) == MAX_METRIC_VALUES + 1 and "other" in methods


def test_a_user_rule_becomes_a_span_event_with_its_name() -> None:
    """Any rule but the two with events of their own (a `[[rewrite]]` table here): an
    `acp_bridge.rule` event on the turn, naming the rule and what it did."""
    table = TableRule(RewriteConfig(name="no-usage-updates", update="usage_update", drop=True))
    relay = Relay([*build_rewrites(Config()), table], strict=True)
    sink = ListSink()
    observer = TelemetryObserver(TraceBuilder(rng=random.Random(3)), sink)
    prompt = example("v1-session-prompt-request")
    script = [
        (0.0, Direction.TO_AGENT, line(example("v1-initialize-request-client-with-suggestions"))),
        (0.1, Direction.TO_CLIENT, line(example("v1-initialize-response-agent-with-system-prompt"))),
        (0.2, Direction.TO_AGENT, line(example("v1-session-new-request-plain"))),
        (0.3, Direction.TO_CLIENT, line(example("v1-session-new-response"))),
        (1.0, Direction.TO_AGENT, line(prompt)),
        (1.5, Direction.TO_CLIENT, line(update("sess_abc123", sessionUpdate="usage_update", used=1))),
        (2.0, Direction.TO_CLIENT, line(ok(prompt["id"], stopReason="end_turn"))),
    ]
    for at, direction, data in script:
        observer.record(T0 + at, at, relay.feed(direction, data, at))
    observer.close(T0 + 4.0, 4.0)
    events = {span.name: [(name, round(at - T0, 3), attrs) for name, at, attrs in span.events] for span in sink.records}
    assert events["invoke_agent my-agent"] == [
        ("acp_bridge.rule", 1.5, {"acp_bridge.rule.name": "no-usage-updates", "acp_bridge.rule.verdict": "drop"})]
