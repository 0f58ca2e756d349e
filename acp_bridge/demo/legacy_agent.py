"""A small ACP v1 agent that behaves like the legacy agents of 2026 (stdlib only).

It speaks only the legacy suggestion channel (`session_info_update._meta.promptSuggestions`),
and, like claude-agent-acp 0.92+ and codex-acp 2.6, sends it only to clients that carry the
JetBrains AIR marker (`_meta.jetbrains.air`). It has no `systemPrompt` capability. Each prompt
is answered with a short streamed reply that says what the agent was given, then `end_turn`,
then one predicted next prompt. A new prompt clears a held prediction first, as the real
adapters do.

Run it as `python -m acp_bridge.demo.legacy_agent [--log FILE]`; with --log, every line it
receives and sends is appended to FILE as {"dir": "in"|"out", "msg": ...}.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

AGENT_INFO = {"name": "demo-legacy-agent", "title": "Demo legacy agent", "version": "1.0.0"}
PREDICTIONS = ["Now run the test suite", "Summarise what changed", "Open a pull request"]


class LegacyAgent:
    def __init__(self, out: TextIO, log: TextIO | None) -> None:
        self.out, self.log = out, log
        self.air_client = False
        self.sessions: dict[str, dict[str, Any]] = {}

    def send(self, msg: dict[str, Any]) -> None:
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()
        self.record("out", msg)

    def record(self, direction: str, msg: Any) -> None:
        if self.log is not None:
            self.log.write(json.dumps({"dir": direction, "msg": msg}) + "\n")
            self.log.flush()

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": "session/update",
                   "params": {"sessionId": session_id, "update": update}})

    def suggest(self, session_id: str, texts: list[str]) -> None:
        if not self.air_client:
            return  # the legacy channel is only for AIR, as in claude-agent-acp
        self.update(session_id, {"sessionUpdate": "session_info_update",
                                 "_meta": {"promptSuggestions": {"suggestions": [{"text": t} for t in texts]}}})

    def handle(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            caps = params.get("clientCapabilities") or {}
            self.air_client = isinstance((caps.get("_meta") or {}).get("jetbrains", {}).get("air"), dict)
            self.reply(msg, {"protocolVersion": 1, "agentInfo": AGENT_INFO,
                             "agentCapabilities": {"loadSession": False, "promptCapabilities": {},
                                                   "sessionCapabilities": {}},
                             "authMethods": []})
        elif method == "session/new":
            session_id = f"sess_{len(self.sessions) + 1}"
            self.sessions[session_id] = {"turns": 0, "holding": False}
            self.reply(msg, {"sessionId": session_id})
        elif method == "session/prompt":
            self.prompt(msg, params)
        elif "id" in msg:
            self.send({"jsonrpc": "2.0", "id": msg["id"],
                       "error": {"code": -32601, "message": f"Method not found: {method}"}})

    def prompt(self, msg: dict[str, Any], params: dict[str, Any]) -> None:
        session_id = params.get("sessionId", "")
        state = self.sessions.setdefault(session_id, {"turns": 0, "holding": False})
        if state["holding"]:
            self.suggest(session_id, [])  # the user moved on: clear the held prediction
            state["holding"] = False
        blocks = [b.get("text", "") for b in params.get("prompt", [])
                  if isinstance(b, dict) and b.get("type") == "text"]
        said = blocks[-1] if blocks else ""
        reply = f"You asked: {said!r}."
        if len(blocks) > 1:
            reply += f" I was also given, first: {blocks[0]!r}."
        self.update(session_id, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": reply}})
        self.reply(msg, {"stopReason": "end_turn"})
        self.suggest(session_id, [PREDICTIONS[state["turns"] % len(PREDICTIONS)]])
        state["holding"] = self.air_client
        state["turns"] += 1

    def reply(self, msg: dict[str, Any], result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


def main(argv: list[str]) -> int:
    if "--log" not in argv:
        serve(LegacyAgent(sys.stdout, None))
        return 0
    with open(argv[argv.index("--log") + 1], "a", encoding="utf-8") as log:
        serve(LegacyAgent(sys.stdout, log))
    return 0


def serve(agent: LegacyAgent) -> None:
    for raw in sys.stdin:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        agent.record("in", msg)
        if isinstance(msg, dict):
            agent.handle(msg)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
