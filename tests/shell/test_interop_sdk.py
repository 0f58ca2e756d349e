"""Interop: the official Python SDK's client talks to an SDK agent through the bridge (and
ordinary SDK traffic gives no finding at warning level)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.conftest import TESTS, sdk
from tests.shell.sdk_client import RecordingClient


async def converse(capture: Path) -> tuple[Any, Any, list[Any], RecordingClient, int]:
    """Two turns through `run --capture`."""
    acp = sdk()
    client = RecordingClient()
    bridge = [sys.executable, "-m", "acp_bridge", "run", "--capture", str(capture), "--",
              sys.executable, "-u", str(TESTS / "agents" / "sdk_agent.py")]
    async with acp.spawn_agent_process(client, bridge[0], *bridge[1:]) as (conn, process):
        init = await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd="/tmp", mcp_servers=[]), 30)
        replies = [await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[acp.text_block(text)]), 30)
                   for text in ("hello bridge", "again")]
        try:
            await asyncio.wait_for(client.wait_for_updates(4), 10)  # the agent streams two chunks a turn
        except TimeoutError:
            pass  # the assertions show what did not come
    return init, session, replies, client, process.returncode


def test_sdk_client_and_agent_complete_a_turn_through_the_bridge_with_no_warning(tmp_path: Path) -> None:
    """Two turns; ordinary traffic gives no finding at warning level, live (in the capture)
    or afterwards (`check`)."""
    capture = tmp_path / "sdk.jsonl"
    init, session, replies, client, _ = asyncio.run(converse(capture))
    assert init.agent_info is not None and init.agent_info.name == "sdk-echo-agent"
    assert session.session_id == "sess_1"
    assert [reply.stop_reason for reply in replies] == ["end_turn", "end_turn"]
    texts = [update.content.text for sid, update in client.updates if sid == "sess_1"]
    assert texts == ["echo: ", "hello bridge", "echo: ", "again"]
    records: list[dict[str, Any]] = [orjson.loads(line) for line in capture.read_bytes().splitlines()]
    assert [r for r in records if r["type"] == "finding"] == []
    result = CliRunner().invoke(main, ["check", str(capture), "--json"])
    assert result.exit_code == 0, result.stdout
    report = orjson.loads(result.stdout)["captures"][0]
    assert report["findings"] == [] and report["messages"] == 12
    assert report["verdict"] == "nothing was rewritten: the bridge can be removed"


async def converse_open_tool(capture: Path) -> tuple[Any, RecordingClient]:
    acp = sdk()
    client = RecordingClient()
    bridge = [sys.executable, "-m", "acp_bridge", "run", "--close-tool-calls", "--capture", str(capture), "--",
              sys.executable, "-u", str(TESTS / "agents" / "sdk_open_tool_agent.py")]
    async with acp.spawn_agent_process(client, bridge[0], *bridge[1:]) as (conn, _):
        await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd="/tmp", mcp_servers=[]), 30)
        reply = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[acp.text_block("go")]), 30)
        try:
            await asyncio.wait_for(client.wait_for_updates(2), 10)
        except TimeoutError:
            pass  # the assertions show what did not come
    return reply, client


def test_sdk_agent_tool_call_left_open_is_closed_for_the_sdk_client(tmp_path: Path) -> None:
    """bridge-rules 6.2 against the SDK on both sides: the SDK client parses the bridge's
    update as a tool call update (its schema), failed, with the bridge's text; on the wire it
    came before the prompt's response."""
    capture = tmp_path / "c.jsonl"
    reply, client = asyncio.run(converse_open_tool(capture))
    assert reply.stop_reason == "end_turn"
    updates = [(sid, u.model_dump(mode="json", by_alias=True, exclude_none=True)) for sid, u in client.updates]
    assert updates == [
        ("sess_open", {"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "Run make",
                       "kind": "execute", "status": "in_progress"}),
        ("sess_open", {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "failed",
                       "content": [{"type": "content", "content": {
                           "type": "text",
                           "text": "Closed by acp-bridge: the turn ended while this tool call was still in_progress"}}]}),
    ]
    records = [orjson.loads(r) for r in capture.read_bytes().splitlines()]
    tail = [(r["verdict"], r["method"], r["rules"]) for r in records if r.get("type") == "message"][-3:]
    assert tail == [("pass", "session/update", []), ("emit", "session/update", ["close-tool-calls"]),
                    ("pass", "session/prompt", ["close-tool-calls"])]
