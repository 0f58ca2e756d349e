"""Capture records the inspector's tests write: a header, a message, a chunk of the agent's reply."""

from __future__ import annotations

from typing import Any

import orjson


def header(time: float = 100.0, pid: int = 4242) -> bytes:
    return orjson.dumps({"type": "header", "format": 1, "time": time, "mono": 0, "pid": pid,
                         "bridge": "0.1.0", "started": "t0", "config": "c"}) + b"\n"


def message(seq: int, raw: str = '{"jsonrpc":"2.0","id":1,"method":"session/prompt"}\n', **extra: Any) -> bytes:
    record = {"type": "message", "seq": seq, "time": 100.0 + seq, "mono": float(seq), "direction": "to-agent",
              "kind": "request", "verdict": "pass", "method": "session/prompt", "id": seq, "session": None,
              "rules": [], "size": len(raw), "raw": raw, **extra}
    return orjson.dumps(record) + b"\n"


def chunk(seq: int, text: str) -> bytes:
    raw = orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}).decode() + "\n"
    return message(seq, raw, direction="to-client", kind="notification", method="session/update", id=None,
                   session="s1")
