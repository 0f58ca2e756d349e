"""The demo's agent (acp_bridge/demo/legacy_agent.py), in this process: what a legacy agent of
2026 sends for each conversation, line for line (the `demo` command's own runs are in
tests/commands/test_demo.py)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from acp_bridge.demo.legacy_agent import AGENT_INFO, LegacyAgent

AIR: dict[str, Any] = {"_meta": {"jetbrains": {"air": {}}}}


def init(caps: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": caps}}


NEW = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}


def prompt(n: int, *texts: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "session/prompt",
            "params": {"sessionId": "sess_1", "prompt": [{"type": "text", "text": t} for t in texts]}}


def update(upd: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess_1", "update": upd}}


def chunk(text: str) -> dict[str, Any]:
    return update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})


def suggestions(*texts: str) -> dict[str, Any]:
    return update({"sessionUpdate": "session_info_update",
                   "_meta": {"promptSuggestions": {"suggestions": [{"text": t} for t in texts]}}})


def answer(n: int, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "result": result}


INIT_ANSWER = answer(0, {"protocolVersion": 1, "agentInfo": AGENT_INFO,
                         "agentCapabilities": {"loadSession": False, "promptCapabilities": {}, "sessionCapabilities": {}},
                         "authMethods": []})
END = {"stopReason": "end_turn"}


@pytest.mark.parametrize(("received", "sent"), [
    pytest.param([init(AIR), NEW, prompt(2, "hi"), prompt(3, "Be brief.", "and?")], [
        INIT_ANSWER, answer(1, {"sessionId": "sess_1"}),
        chunk("You asked: 'hi'."), answer(2, END), suggestions("Now run the test suite"),
        suggestions(),  # the held prediction cleared before the next turn
        chunk("You asked: 'and?'. I was also given, first: 'Be brief.'."), answer(3, END),
        suggestions("Summarise what changed")], id="air-client"),
    pytest.param([init({}), NEW, prompt(2, "hi"), prompt(3, "and?")], [
        INIT_ANSWER, answer(1, {"sessionId": "sess_1"}),
        chunk("You asked: 'hi'."), answer(2, END), chunk("You asked: 'and?'."), answer(3, END)],
        id="other-client-no-suggestions"),
    pytest.param([init({"_meta": {"jetbrains": {"air": True}}}), NEW, prompt(2)], [
        INIT_ANSWER, answer(1, {"sessionId": "sess_1"}), chunk("You asked: ''."), answer(2, END)],
        id="air-marker-not-an-object"),
    pytest.param([{"jsonrpc": "2.0", "id": 9, "method": "fs/nope"}, {"jsonrpc": "2.0", "method": "note"}], [
        {"jsonrpc": "2.0", "id": 9, "error": {"code": -32601, "message": "Method not found: fs/nope"}}],
        id="unknown-request-answered-notification-not"),
])
def test_what_the_agent_sends(received: list[dict[str, Any]], sent: list[dict[str, Any]]) -> None:
    out, log = io.StringIO(), io.StringIO()
    agent = LegacyAgent(out, log)
    for msg in received:
        agent.record("in", msg)
        agent.handle(msg)
    assert out.getvalue() == "".join(json.dumps(msg) + "\n" for msg in sent)
    logged = [json.loads(entry) for entry in log.getvalue().splitlines()]
    assert [entry["msg"] for entry in logged if entry["dir"] == "out"] == sent
    assert [entry["msg"] for entry in logged if entry["dir"] == "in"] == received
