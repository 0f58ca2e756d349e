"""A small fixed capture, as records, for the tests of the commands that read captures."""

from __future__ import annotations

from click.testing import CliRunner

from acp_bridge.capture.records import dumps, header_record
from acp_bridge.commands import main

WALL = 1_700_000_000.0


REQ = '{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}\n'


OUT = '{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}\n'


NOTE = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}}\n'


RESP = '{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n'


HEADER = dumps(header_record(wall=WALL, mono=0.0, argv=["acp-bridge", "run"], config_digest="abc", pid=7))


def rec(seq: int, mono: float, direction: str, kind: str, verdict: str, **fields: object) -> dict[str, object]:
    return {"type": "message", "seq": seq, "time": WALL + mono, "mono": mono, "direction": direction, "kind": kind,
            "verdict": verdict, "method": None, "id": None, "session": None, "rules": [], **fields}


RECORDS = [
    rec(1, 0.0, "to-agent", "request", "rewrite", method="session/prompt", id=1, session="s1", rules=["system-prompt"],
        size=len(REQ), raw=REQ, out=OUT, out_size=len(OUT)),
    rec(2, 0.5, "to-client", "notification", "pass", method="session/update", session="s1", size=len(NOTE), raw=NOTE),
    rec(3, 0.6, "to-client", "other", "other", size=4, raw="oops"),
    rec(4, 1.25, "to-client", "response", "pass", method="session/prompt", id=1, session="s1", size=len(RESP),
        latency=1.25, raw=RESP),
    rec(5, 2.0, "to-agent", "request", "pass", method="session/cancel", id=2, session="s2", size=10, raw="{}\n"),
]


def invoke(*args: str) -> list[str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()
