"""Bench row 8: `acp-bridge replay` serving a 100k-message capture to a client.

    python -m bench.replay [MESSAGES]

A capture of one prompt turn whose answer follows MESSAGES - 6 streamed chunks is written,
then `acp-bridge replay` serves it to a client (this process) that sends the recorded
requests: the rate is the messages of the prompt's segment (the chunks and the answer)
divided by the time from sending the prompt to reading its answer. Goal (issue 14): at least
100,000 messages a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

GOAL = 100_000.0  # messages a second
SESSION = "sess_bench"


def _record(seq: int, direction: str, kind: str, method: str | None, msg: dict[str, Any], mono: float) -> bytes:
    raw = orjson.dumps(msg).decode() + "\n"
    return orjson.dumps({
        "type": "message", "seq": seq, "time": 1.7e9 + mono, "mono": mono, "direction": direction, "kind": kind,
        "verdict": "pass", "method": method, "id": msg.get("id"),
        "session": msg.get("params", {}).get("sessionId"), "rules": [], "size": len(raw), "raw": raw,
    }) + b"\n"


def write_capture(path: Path, messages: int) -> int:
    """A capture of `messages` messages; returns how many the prompt's segment holds."""
    def request(id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}

    def answer(id_: int, result: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": id_, "result": result}

    chunks = messages - 6  # and the prompt, and initialize and session/new with their answers
    with open(path, "wb") as out:
        out.write(orjson.dumps({"type": "header", "format": 1, "bridge": "bench", "time": 1.7e9, "mono": 0.0,
                                "redact": [], "include_system_prompt": False}) + b"\n")
        out.write(_record(1, "to-agent", "request", "initialize", request(0, "initialize", {"protocolVersion": 1}), 0.0))
        out.write(_record(2, "to-client", "response", "initialize", answer(0, {"protocolVersion": 1}), 0.001))
        out.write(_record(3, "to-agent", "request", "session/new", request(1, "session/new", {"cwd": "/"}), 0.002))
        out.write(_record(4, "to-client", "response", "session/new", answer(1, {"sessionId": SESSION}), 0.003))
        prompt = request(2, "session/prompt", {"sessionId": SESSION, "prompt": [{"type": "text", "text": "go"}]})
        out.write(_record(5, "to-agent", "request", "session/prompt", prompt, 0.004))
        batch = bytearray()
        for n in range(chunks):
            update = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"token {n} of the answer"}}}}
            batch += _record(6 + n, "to-client", "notification", "session/update", update, 0.005)
            if len(batch) > 1 << 20:
                out.write(batch)
                batch.clear()
        out.write(batch)
        out.write(_record(6 + chunks, "to-client", "response", "session/prompt", answer(2, {"stopReason": "end_turn"}),
                          0.006))
        out.write(orjson.dumps({"type": "end", "time": 1.7e9, "mono": 0.007, "records": messages}) + b"\n")
    return chunks + 1


def serve_rate(capture: Path, segment: int) -> tuple[float, float]:
    """(messages a second while serving the prompt, seconds from start to the last answer)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "acp_bridge", "replay", str(capture)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    fd = proc.stdout.fileno()
    try:
        for id_, method, params in ((0, "initialize", {"protocolVersion": 1}), (1, "session/new", {"cwd": "/"})):
            proc.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n")
            proc.stdin.flush()
            proc.stdout.readline()
        begin = time.perf_counter()
        proc.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                                       "params": {"sessionId": SESSION, "prompt": []}}) + b"\n")
        proc.stdin.flush()
        lines, tail = 0, b""
        while lines < segment:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise RuntimeError(f"replay closed its stdout after {lines} of {segment} lines")
            lines += chunk.count(b"\n")
            tail = (tail + chunk)[-200:]
        end = time.perf_counter()
        assert b'"stopReason":"end_turn"' in tail
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
    return segment / (end - begin), end - start


def replay_rows(tmp: Path, row: Callable[..., Any], messages: int = 100_000, repeat: int = 3) -> list[Any]:
    """The row (made by `row`, bench's Row), the best of `repeat` runs."""
    capture = tmp / "replay-capture.jsonl"
    segment = write_capture(capture, messages)
    rate, total = max((serve_rate(capture, segment) for _ in range(repeat)), key=lambda r: r[0])
    return [row(f"8. replay serves a {messages // 1000}k-message capture", round(rate), GOAL, "msg/s",
                round(rate / GOAL, 2), ">= 1.0 (100k msg/s)", rate >= GOAL,
                f"baseline = the goal; {total:.2f} s from start, reading the capture included")]


if __name__ == "__main__":
    import tempfile

    from bench.__main__ import Row, print_table

    with tempfile.TemporaryDirectory() as name:
        print_table(replay_rows(Path(name), Row, int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
