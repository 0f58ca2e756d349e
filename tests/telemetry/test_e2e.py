"""End to end: `acp-bridge run --otlp` between an SDK client and an SDK agent, and
`acp-bridge export CAPTURE --otlp`, against a real OTLP/HTTP receiver started here."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.capture.samples import HEADER
from tests.conftest import TESTS, sdk

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is in the test extra")

from tests.telemetry.collector import otel_env, running_collector


class ToolClient:
    """Allows the tool, and serves the one file the agent reads."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        acp = sdk()
        return acp.schema.RequestPermissionResponse(
            outcome=acp.schema.AllowedOutcome(outcome="selected", option_id="allow"))

    async def read_text_file(self, path: str, session_id: str, **kwargs: Any) -> Any:
        acp = sdk()
        return acp.schema.ReadTextFileResponse(content="the notes")

    def on_connect(self, conn: Any) -> None:
        pass


async def converse(env: dict[str, str], *options: str) -> tuple[Any, int]:
    acp = sdk()
    client = ToolClient()
    bridge = [sys.executable, "-m", "acp_bridge", "run", *options, "--",
              sys.executable, "-u", str(TESTS / "agents" / "tool_agent.py")]
    async with acp.spawn_agent_process(client, bridge[0], *bridge[1:], env=env) as (conn, process):
        await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd="/tmp", mcp_servers=[]), 30)
        reply = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[acp.text_block("read my notes")]), 30)
    await asyncio.wait_for(process.wait(), 30)
    return reply, process.returncode if process.returncode is not None else -1


def tree(spans: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(span name, its parent's name) for every span, sorted: the shape of the trace."""
    by_id = {span["id"]: span for span in spans}
    return sorted((span["name"], by_id[span["parent"]]["name"] if span["parent"] else "")
                  for span in spans)


TREE = [
    ("execute_tool execute", "invoke_agent tool-agent"),
    ("execute_tool read", "invoke_agent tool-agent"),
    ("fs/read_text_file", "invoke_agent tool-agent"),
    ("initialize", ""),
    ("invoke_agent tool-agent", "session"),
    ("session", ""),
    ("session/new", "session"),
    ("session/request_permission", "execute_tool read"),
]
RPC = {"rpc.system": "jsonrpc"}
SESSION = {"gen_ai.conversation.id": "sess_tools"}
AGENT = {"gen_ai.agent.name": "tool-agent", "gen_ai.agent.version": "2.5.0"}
ATTRIBUTES = {
    "initialize": {**RPC, "rpc.method": "initialize", "acp.direction": "to-agent", "rpc.jsonrpc.request_id": "0"},
    "session/new": {**RPC, "rpc.method": "session/new", "acp.direction": "to-agent", "rpc.jsonrpc.request_id": "1",
                    "acp.session.id": "sess_tools"},
    "session": {**SESSION, **AGENT, "acp.unfinished": True},
    "invoke_agent tool-agent": {
        **RPC, "rpc.method": "session/prompt", "acp.direction": "to-agent", "rpc.jsonrpc.request_id": "2",
        "gen_ai.operation.name": "invoke_agent", **SESSION, **AGENT, "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 34, "gen_ai.response.finish_reasons": ("end_turn",)},
    "execute_tool read": {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "call_1", **SESSION,
        "gen_ai.tool.name": "read", "acp.tool_call.kind": "read",
        "acp.tool_call.status": "completed"},
    "execute_tool execute": {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "call_2", **SESSION,
        "gen_ai.tool.name": "execute", "acp.tool_call.kind": "execute",
        "acp.tool_call.status": "failed"},
    "session/request_permission": {
        **RPC, "rpc.method": "session/request_permission", "acp.direction": "to-client",
        "rpc.jsonrpc.request_id": "0", "acp.session.id": "sess_tools", "acp.permission.outcome": "selected",
        "acp.permission.option_id": "allow", "acp.permission.option_kind": "allow_once",
        "gen_ai.tool.call.id": "call_1"},
    "fs/read_text_file": {**RPC, "rpc.method": "fs/read_text_file", "acp.direction": "to-client",
                          "rpc.jsonrpc.request_id": "1", "acp.session.id": "sess_tools"},
}
ERROR, UNSET, INTERNAL, CLIENT = 2, 0, 1, 3  # the OTLP enums


def by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    named = {span["name"]: span for span in spans}
    assert len(named) == len(spans), [span["name"] for span in spans]
    return named


def check_trace(spans: list[dict[str, Any]]) -> None:
    """The span tree, each span's attributes, kinds, statuses and times."""
    assert tree(spans) == TREE
    named = by_name(spans)
    turn = named["invoke_agent tool-agent"]
    ttfc = turn["attributes"].pop("acp.turn.time_to_first_chunk")
    assert 0 < ttfc * 1e9 <= turn["end"] - turn["start"]
    assert {name: span["attributes"] for name, span in named.items()} == ATTRIBUTES
    assert {name: span["status"] for name, span in named.items() if span["status"] != UNSET} == {
        "execute_tool execute": ERROR}
    assert {name for name, span in named.items() if span["kind"] == CLIENT} == {
        "initialize", "session/new", "invoke_agent tool-agent", "session/request_permission", "fs/read_text_file"}
    session = named["session"]
    assert {span["trace"] for span in spans if span["name"] != "initialize"} == {session["trace"]}
    assert named["initialize"]["trace"] != session["trace"]
    parents = {span["id"]: span for span in spans}
    for span in spans:
        assert span["start"] <= span["end"]
        if span["parent"]:
            parent = parents[span["parent"]]
            assert parent["start"] <= span["start"] and span["end"] <= parent["end"], span["name"]


# The attributes only content brings ([telemetry] content = true), per span (JSON text parsed).
CONTENT = {
    "invoke_agent tool-agent": {
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "read my notes"}]}],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "Reading it."}]}]},
    "execute_tool read": {
        "acp.tool_call.title": "Read notes.txt",
        "gen_ai.tool.call.arguments": {"path": "/tmp/notes.txt", "token": "<redacted>"},
        "gen_ai.tool.call.result": {"text": "the notes"}},
    "execute_tool execute": {"acp.tool_call.title": "Run make"},
}
CONTENT_JSON = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


def take_content(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Remove the content attributes from `spans`; return them by span."""
    taken: dict[str, dict[str, Any]] = {}
    for span in spans:
        for key in [k for k in span["attributes"] if k in CONTENT_JSON or k == "acp.tool_call.title"]:
            value = span["attributes"].pop(key)
            taken.setdefault(span["name"], {})[key] = orjson.loads(value) if key in CONTENT_JSON else value
    return taken


def test_run_otlp_sends_the_span_tree_and_content_and_export_sends_the_same(tmp_path: Path) -> None:
    """One turn with two tool calls, a permission request and a file read, through a real
    `acp-bridge run` with telemetry and content turned on in its config file: the prompt,
    the reply and the tools' input and output are sent, with the capture's redaction
    ([capture] redact) applied first. Then the capture of that run through `export --otlp`:
    the same spans, attributes and times, without content, which it was not asked for (only
    the ids are new, and the session ends at the capture's end). (Without content, live:
    test_hostile_e2e.py's test_without_content_no_title_and_no_secret_leave_the_machine.)"""
    capture = tmp_path / "c.jsonl"
    config = tmp_path / "bridge.toml"
    config.write_text('[telemetry]\nenabled = true\ncontent = true\n'
                      '[capture]\nredact = ["/params/update/rawInput/token"]\n')
    with running_collector() as collector:
        reply, status = asyncio.run(converse(otel_env(collector), "-c", str(config), "--capture", str(capture)))
        spans = collector.wait_spans(len(TREE))
        metrics = dict(collector.metrics)
        resources = list(collector.resources)
    assert reply.stop_reason == "end_turn" and status == 0
    assert "s3cr3t" not in repr(spans)
    assert take_content(spans) == CONTENT
    check_trace(spans)
    assert {r["service.name"] for r in resources} == {"bridge-under-test"}
    records = [orjson.loads(line) for line in capture.read_bytes().splitlines()]
    messages = [r for r in records if r["type"] == "message"]
    assert metrics["acp.messages"] == [({"acp.direction": d}, sum(r["direction"] == d for r in messages))
                                       for d in ("to-agent", "to-client")]
    assert metrics["acp.bytes"] == [({"acp.direction": d}, sum(r["size"] for r in messages if r["direction"] == d))
                                    for d in ("to-agent", "to-client")]
    assert sorted((a["rpc.method"], a["acp.outcome"], n) for a, n in metrics["acp.requests"]) == [
        ("fs/read_text_file", "ok", 1), ("initialize", "ok", 1), ("session/new", "ok", 1),
        ("session/prompt", "ok", 1), ("session/request_permission", "ok", 1)]
    assert metrics["acp.turn.duration"] == [({**AGENT, "gen_ai.response.finish_reasons": "end_turn"}, 1)]
    assert sorted(metrics["acp.tool_call.duration"], key=str) == [
        ({"acp.tool_call.kind": "execute", "acp.tool_call.status": "failed"}, 1),
        ({"acp.tool_call.kind": "read", "acp.tool_call.status": "completed"}, 1)]

    with running_collector() as collector:
        env = otel_env(collector)
        done = subprocess.run([sys.executable, "-m", "acp_bridge", "export", str(capture), "--otlp"],
                              env=env, capture_output=True, timeout=60, check=False)
        exported = collector.wait_spans(len(TREE))
        assert collector.metrics == {}
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode() == f"acp-bridge: {capture}: sent {len(TREE)} spans to {env['OTEL_EXPORTER_OTLP_ENDPOINT']}\n"
    check_trace(exported)  # exactly ATTRIBUTES: no content
    live, again = by_name(spans), by_name(exported)
    for name in live:
        if name != "session":
            assert (again[name]["start"], again[name]["end"]) == (live[name]["start"], live[name]["end"]), name
    assert again["session"]["start"] == live["session"]["start"]
    assert again["session"]["end"] == int(records[-1]["time"] * 1e9)


async def demo_turns(env: dict[str, str]) -> int:
    acp = sdk()
    client = ToolClient()
    bridge = [sys.executable, "-m", "acp_bridge", "run", "--otlp", "--unlock-legacy-agent",
              "--system-prompt", "Be brief.", "--", sys.executable, "-m", "acp_bridge.demo.legacy_agent"]
    async with acp.spawn_agent_process(client, bridge[0], *bridge[1:], env=env) as (conn, process):
        await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd="/tmp", mcp_servers=[]), 30)
        for text in ("first", "second"):
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[acp.text_block(text)]), 30)
    await asyncio.wait_for(process.wait(), 30)
    return process.returncode if process.returncode is not None else -1


def test_the_demo_agent_through_run_otlp_shows_the_bridges_work_as_events() -> None:
    """The bundled legacy agent behind `run --otlp` with a system prompt, and an SDK client:
    the dialect that carried the prompt (the first prompt's, as the agent has no capability)
    is an event on that turn (with the watchdog's finding about it) and an attribute of the
    session. (The SDK cannot advertise
    prompt suggestions, so the demo agent sends none here; test_builder shows those events.)"""
    with running_collector() as collector:
        status = asyncio.run(demo_turns(otel_env(collector)))
        spans = collector.wait_spans(5)
    assert status == 0
    demo = "invoke_agent demo-legacy-agent"
    assert tree(spans) == [("initialize", ""), (demo, "session"), (demo, "session"), ("session", ""),
                           ("session/new", "session")]
    turns = [span for span in spans if span["name"] == demo]
    assert [span["events"] for span in turns] == [
        [("acp_bridge.system_prompt", {"acp_bridge.system_prompt.dialect": "first-prompt"}),
         # the watchdog's finding about that prompt names its session, so it hangs on the turn
         ("acp_bridge.finding", {"acp_bridge.finding.code": "system-prompt-fallback",
                                 "acp_bridge.finding.level": "info"})], []]
    assert [span["attributes"]["rpc.jsonrpc.request_id"] for span in turns] == ["2", "3"]
    session = by_name([span for span in spans if span["name"] != demo])["session"]
    assert session["attributes"] == {"gen_ai.conversation.id": "sess_1", "gen_ai.agent.name": "demo-legacy-agent",
                                     "gen_ai.agent.version": "1.0.0", "acp.unfinished": True,
                                     "acp_bridge.system_prompt.dialect": "first-prompt"}


def test_export_sends_a_capture_larger_than_the_sdks_queue(tmp_path: Path) -> None:
    """1,000 answered requests: more spans than the SDK's batch queue holds (200 here); every
    one arrives, each with the duration the capture recorded."""
    capture = tmp_path / "big.jsonl"
    lines = []
    for i in range(1000):
        for offset, direction, msg in ((0.0, "to-agent", {"jsonrpc": "2.0", "id": i, "method": "x/ping"}),
                                       (0.25, "to-client", {"jsonrpc": "2.0", "id": i, "result": {}})):
            lines.append(orjson.dumps({"type": "message", "time": 1_800_000_000 + i + offset, "direction": direction,
                                       "verdict": "pass", "raw": orjson.dumps(msg).decode() + "\n"}))
    capture.write_bytes(orjson.dumps(HEADER) + b"\n" + b"\n".join(lines) + b"\n")
    with running_collector() as collector:
        done = subprocess.run([sys.executable, "-m", "acp_bridge", "export", str(capture), "--otlp"],
                              env={**otel_env(collector), "OTEL_BSP_MAX_QUEUE_SIZE": "200",
                                   "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100"},
                              capture_output=True, timeout=120, check=False)
        spans = collector.wait_spans(1000)
    assert done.returncode == 0, done.stderr
    assert len(spans) == 1000
    assert all(abs(span["end"] - span["start"] - 250_000_000) < 1000 for span in spans)  # float seconds: ~0.1 us
    assert sorted(int(span["attributes"]["rpc.jsonrpc.request_id"]) for span in spans) == list(range(1000))
