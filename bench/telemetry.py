"""Benchmark rows for telemetry (issue 16): the bridge with `--otlp` against the same bridge
without it, in the same run, exporting to a local OTLP/HTTP receiver that takes and discards
everything. Goals: throughput with telemetry >= 0.90 of without; round trips unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench import workloads as w
from bench.__main__ import BRIDGE, PY, Row, q, timed

PROMPT = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
          "params": {"sessionId": "sess_bench", "prompt": [{"type": "text", "text": "go"}]}}


@contextmanager
def receiver() -> Iterator[str]:
    """An OTLP/HTTP endpoint on 127.0.0.1 that answers 200 to every POST."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def telemetry_rows(tmp: Path, lines: int, repeat: int, pairs: int, rounds: int) -> list[Row]:
    chunks, to_agent, start = tmp / "t-chunks.jsonl", tmp / "t-to-agent.jsonl", tmp / "t-start.jsonl"
    w.write_lines(chunks, lines, w.chunk_line)
    w.write_lines(to_agent, lines, w.to_agent_line)
    # A turn that waits for its first chunk, as in a real reply: the chunks stream into it.
    start.write_bytes(json.dumps(w.INIT).encode() + b"\n" + json.dumps(PROMPT).encode() + b"\n")
    sink = [PY, "-c", "import sys,shutil; shutil.copyfileobj(sys.stdin.buffer, open('/dev/null','wb'), 1<<20)"]
    rows = []
    with receiver() as endpoint:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        try:
            # What telemetry costs once (importing the SDK, setting it up, the flush at exit),
            # apart from what it costs per line: the bridge started with nothing to relay.
            fixed = min(timed(q(BRIDGE + ["--", "true"]) + " < /dev/null") for _ in range(repeat))
            extra = min(timed(q(BRIDGE + ["--otlp", "--", "true"]) + " < /dev/null") for _ in range(repeat)) - fixed
            for label, feed, agent in (("to client", start, ["cat", str(chunks)]), ("to agent", to_agent, sink)):
                off = on = float("inf")
                for _ in range(repeat):  # alternated, best of each: noise on a shared machine only adds
                    off = min(off, timed(f"cat {feed} | {q(BRIDGE + ['--'] + agent)} > /dev/null"))
                    on = min(on, timed(f"cat {feed} | {q(BRIDGE + ['--otlp', '--'] + agent)} > /dev/null"))
                steady = (off - fixed) / max(on - fixed - extra, 1e-9)
                name, goal = (("10. to client, telemetry on vs off", ">= 0.90") if label == "to client" else
                              ("10b. to agent (a request or response per line), telemetry on vs off", "report"))
                rows.append(Row(name, round(on, 3), round(off, 3), "s", round(off / on, 3), goal,
                                goal == "report" or off / on >= 0.90,
                                f"baseline = the bridge without --otlp; local OTLP/HTTP receiver; {steady:.2f} "
                                f"without telemetry's {extra * 1000:.0f} ms of start-up and exit"))
            rows.extend(_latency(pairs, min(rounds, repeat)))
        finally:
            os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    return rows


def _latency(pairs: int, rounds: int) -> list[Row]:
    pong = [PY, "-c", w.PONG_AGENT]

    def run(cmd: list[str]) -> list[float]:
        out = subprocess.run([PY, "-c", w.PING_CLIENT, str(pairs), *cmd], check=True, capture_output=True).stdout
        return sorted(json.loads(out))

    def pct(values: list[float], p: float) -> float:
        return values[min(len(values) - 1, int(p * len(values)))]

    off: dict[float, float] = {}
    on: dict[float, float] = {}
    for _ in range(rounds):
        for times, cmd in ((off, BRIDGE + ["--"] + pong), (on, BRIDGE + ["--otlp", "--"] + pong)):
            values = run(cmd)
            for p in (0.50, 0.99):
                times[p] = min(times.get(p, float("inf")), pct(values, p))
    rows = []
    for label, p, goal in (("p50", 0.50, 10.0), ("p99", 0.99, 50.0)):
        added = (on[p] - off[p]) * 1e6
        rows.append(Row(f"11. round trip {label}, telemetry on vs off", round(on[p] * 1e6, 1), round(off[p] * 1e6, 1),
                        "us", round(added, 1), f"<= {goal:.0f} us added", added <= goal,
                        f"{pairs} pairs, best of {rounds} rounds; baseline = the bridge without --otlp"))
    return rows
