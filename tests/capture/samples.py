"""Records and lines the capture tests share: the fields every message record has, a few
lines of each kind, and a fixed capture covering every verdict."""

from __future__ import annotations

import re
from typing import Any

import orjson

WALL = 1_700_000_000.25  # 2023-11-14T22:13:20.250Z


def base(seq: int, direction: str, kind: str, verdict: str, mono: float = 0.0, **fields: Any) -> dict[str, Any]:
    record = {"type": "message", "seq": seq, "time": WALL + mono, "mono": mono, "direction": direction,
              "kind": kind, "verdict": verdict, "method": None, "id": None, "session": None, "rules": []}
    record.update(fields)
    return record


REQ = b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}\n'
RESP = b'{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}\n'
NOTE = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}}\n'
TAG = b'{"jsonrpc":"2.0","id":"t","method":"tag","params":{}}\r\n'
DROPPED = b'{"jsonrpc":"2.0","method":"drop","params":{"sessionId":"s2"}}\n'
PING = b'{"jsonrpc":"2.0","method":"ping"}\n'
# What begins every capture (readers that need a capture, such as `export`, check it).
HEADER: dict[str, Any] = {"type": "header", "format": 1, "bridge": "0.1.0", "started": "2026-12-01T00:00:00Z",
                          "time": 1_800_000_000.0, "mono": 0.0, "pid": 1, "argv": [], "config": "x", "redact": []}


FIXED = [
    base(1, "to-agent", "request", "pass", 0.0, method="session/prompt", id=7, session="s1", size=len(REQ),
         raw=REQ.decode()),
    base(2, "to-client", "notification", "pass", 0.1, method="session/update", session="s1", size=len(NOTE),
         raw=NOTE.decode()),
    base(3, "to-agent", "request", "rewrite", 0.2, method="tag", id="t", rules=["tagger"], size=len(TAG),
         raw=TAG.decode(), out='{"jsonrpc":"2.0","id":"t","method":"tag","params":{"tagged":true}}\r\n', out_size=68),
    base(4, "to-client", "notification", "drop", 0.3, method="drop", session="s2", rules=["tagger"],
         size=len(DROPPED), raw=DROPPED.decode(), out=None, out_size=0),
    base(5, "to-client", "notification", "emit", 0.3, method="pong", rules=["tagger"], size=0,
         out='{"jsonrpc":"2.0","method":"pong"}\n', out_size=34),
    base(6, "to-client", "response", "pass", 1.5, method="session/prompt", id=7, session="s1", size=len(RESP),
         latency=1.5, raw=RESP.decode()),
    base(7, "to-client", "other", "other", 1.6, size=6, raw="hello\n"),
    base(8, "to-agent", "request", "pass", 1.7, method="authenticate", id=9, size=60, raw="{}\n",
         redacted=["/params/token"]),
    base(9, "to-client", "other", "opaque", 1.8, size=99, raw="x" * 99),
]


def page_rows(page: str) -> list[dict[str, Any]]:
    """The rows an exported page carries (its JSON blocks, in order)."""
    rows: list[dict[str, Any]] = []
    for block in re.findall(r'<script type="application/json" class="rows">(.*?)</script>', page, re.S):
        rows.extend(orjson.loads(block))
    return rows


def update(what: str, /, **fields: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": "s1", "update": {"sessionUpdate": what, **fields}}}


def record(seq: int, msg: Any, direction: str = "to-client", *, mono: float | None = None,
           verdict: str = "pass", **extra: Any) -> dict[str, Any]:
    raw = orjson.dumps(msg).decode() + "\n"
    kind = "request" if "method" in msg and "id" in msg else "notification" if "method" in msg else "response"
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    return {"type": "message", "seq": seq, "time": 1e9 + seq, "mono": float(seq) if mono is None else mono,
            "direction": direction, "kind": kind, "verdict": verdict, "method": msg.get("method"),
            "id": msg.get("id"), "session": params.get("sessionId"), "rules": [], "size": len(raw), "raw": raw,
            **extra}
