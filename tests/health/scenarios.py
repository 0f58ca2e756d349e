"""Scripted agents and client lines that provoke every finding through the real bridge.

`BROKEN_V1` makes one v1 connection provoke every finding the watchdog can see live but
`v1-shape-on-v2` (which needs a v2 connection: `BROKEN_V2`); `LONG_TURN` is ordinary
traffic: a long turn with tool calls, a permission request and many chunks.
"""

from __future__ import annotations

from typing import Any

import orjson


def msg(**fields: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", **fields}


def update(session: Any, **fields: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"update": fields}
    if session is not None:
        params["sessionId"] = session
    return msg(method="session/update", params=params)


def chunk(session: Any, text: str) -> dict[str, Any]:
    return update(session, sessionUpdate="agent_message_chunk", content={"type": "text", "text": text})


def wire(*messages: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(m) + b"\n" for m in messages)


AGENT_V1_INIT = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "scripted", "version": "1"}}
AIR_ONLY = {"protocolVersion": 1, "clientCapabilities": {"_meta": {"jetbrains": {"air": {"version": 1}}}},
            "clientInfo": {"name": "air-like", "version": "1"}}
NEW_CLIENT = {"protocolVersion": 1, "clientCapabilities": {"session": {"promptSuggestions": {}},
                                                            "fs": {"readTextFile": True}},
              "clientInfo": {"name": "new-client", "version": "1"}}
LEGACY = update("s1", sessionUpdate="session_info_update",
                _meta={"promptSuggestions": {"suggestions": [{"text": "Run the tests"}]}})
NEW_FORM = update("s1", sessionUpdate="prompt_suggestions_update",
                  suggestions=[{"prompt": [{"type": "text", "text": "Run the tests"}]}])

BROKEN_V1: dict[str, Any] = {"on": {
    "initialize": [{"respond": AGENT_V1_INIT}],
    "session/new": [
        {"send": chunk("ghost", "boo")},  # update-unknown-session (sent while session/new is in flight)
        {"respond": {"sessionId": "s1"}},
        {"send": update(None, sessionUpdate="agent_message_chunk")},  # update-malformed
        {"send": msg(id=999, result={})},  # response-unknown-id
        {"send": LEGACY},  # legacy-suggestions
        {"send": NEW_FORM},  # suggestions-unadvertised (the client is AIR only)
        {"send": msg(id=7, method="fs/read_text_file", params={"sessionId": "s1", "path": "/a"})},
        {"send": msg(id=7, method="fs/read_text_file", params={"sessionId": "s1", "path": "/b"})},  # id reused
    ],
    "session/prompt": [],  # never answered: prompt 6 stalls; prompt 2 is answered on cancel
    "session/cancel": [  # cancel-ignored, then response-duplicate
        {"send": msg(id=2, result={"stopReason": "end_turn"})},
        {"send": msg(id=2, result={"stopReason": "end_turn"})},
    ],
    "session/close": [{"respond": {}}, {"send": chunk("s1", "late")}],  # update-closed-session
    "x/slow": [],  # request-unanswered
    "x/both": [{"send": msg(id=5, result={}, error={"code": 1, "message": "both"})}],  # response-result-and-error
}}

# The client's side of BROKEN_V1, in order; each waits for what the line before provokes.
BROKEN_V1_CLIENT: list[tuple[dict[str, Any], bytes | None]] = [
    (msg(id=0, method="initialize", params=AIR_ONLY), b'"id": 0'),  # air-only-client
    (msg(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []}), b'"id": 7'),
    (msg(id=2, method="session/prompt", params={"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}),
     None),  # system-prompt-fallback (first-prompt: the agent lacks the capability)
    (msg(method="session/cancel", params={"sessionId": "s1"}), b'"end_turn"'),
    (msg(id=5, method="x/both", params={}), b'"both"'),
    (msg(id=6, method="session/prompt", params={"sessionId": "s1", "prompt": [{"type": "text", "text": "again"}]}),
     None),
    (msg(id=3, method="session/close", params={"sessionId": "s1"}), b'"late"'),
    (msg(id=4, method="x/slow", params={}), None),
]

BROKEN_V1_CODES = {
    "air-only-client", "update-unknown-session", "update-malformed", "response-unknown-id", "legacy-suggestions",
    "suggestions-unadvertised", "request-id-reused", "client-request-unanswered", "system-prompt-fallback",
    "cancel-ignored", "response-duplicate", "response-result-and-error", "prompt-stalled",
    "update-closed-session", "request-unanswered",
}

BROKEN_V2: dict[str, Any] = {"on": {
    "initialize": [{"respond": {"protocolVersion": 2, "agentCapabilities": {}, "info": {"name": "half", "version": "2"}}}],
}}
V2_CLIENT_INIT = msg(id=0, method="initialize", params={"protocolVersion": 2, "capabilities": {},
                                                       "info": {"name": "c", "version": "2"}})

# Ordinary traffic: a long turn with a tool call, a permission request the client answers,
# many chunks (they reach the bridge in runs), a legacy suggestion, and the turn's end.
LONG_TURN: dict[str, Any] = {"on": {
    "initialize": [{"respond": {**AGENT_V1_INIT, "agentCapabilities": {
        "sessionCapabilities": {"systemPrompt": {}}}}}],
    "session/new": [{"respond": {"sessionId": "s1"}},
                    {"send": update("s1", sessionUpdate="available_commands_update", availableCommands=[])}],
    "session/prompt": [
        {"send": update("s1", sessionUpdate="tool_call", toolCallId="t1", title="Read", status="pending")},
        {"send": msg(id="p1", method="session/request_permission", params={
            "sessionId": "s1", "toolCall": {"toolCallId": "t1"},
            "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]})},
        *[{"send": chunk("s1", f"token {i} of a long answer ")} for i in range(400)],
        {"send": update("s1", sessionUpdate="tool_call_update", toolCallId="t1", status="completed")},
        {"send": LEGACY},
        {"respond": {"stopReason": "end_turn"}},
    ],
}}
