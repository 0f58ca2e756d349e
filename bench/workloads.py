"""Workload files and small helper programs for the benchmark (stdlib + orjson)."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {"session": {"promptSuggestions": {}}}}}


def chunk_line(i: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "sess_bench", "update": {"sessionUpdate": "agent_message_chunk",
                                              "content": {"type": "text", "text": f"token {i:08d} of the reply "}}}}) + b"\n"


PROXY_INIT = {"jsonrpc": "2.0", "id": 0, "method": "proxy/initialize", "params": INIT["params"]}


def wrapped_chunk_line(i: int) -> bytes:
    """`chunk_line(i)` as a conductor delivers it to a proxy: in a `proxy/successor` envelope."""
    inner = orjson.loads(chunk_line(i))
    return orjson.dumps({"jsonrpc": "2.0", "method": "proxy/successor",
                         "params": {"method": inner["method"], "params": inner["params"]}}) + b"\n"


def to_agent_line(i: int) -> bytes:
    if i % 2:
        return orjson.dumps({"jsonrpc": "2.0", "id": i, "result": {"content": f"file body {i}"}}) + b"\n"
    return orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "session/prompt", "params": {
        "sessionId": "sess_bench", "prompt": [{"type": "text", "text": f"prompt number {i}"}]}}) + b"\n"


def write_lines(path: Path, count: int, make: object) -> int:
    assert callable(make)
    size = 0
    with path.open("wb") as f:
        batch = []
        for i in range(count):
            batch.append(make(i))
            if len(batch) == 10000:
                data = b"".join(batch)
                size += len(data)
                f.write(data)
                batch = []
        data = b"".join(batch)
        size += len(data)
        f.write(data)
    return size


# A client that measures round trips: sends a request, waits for its response, N times.
PING_CLIENT = r'''
import json, os, subprocess, sys, time
n = int(sys.argv[1]); cmd = sys.argv[2:]
p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
out = p.stdout
buf = b""
times = []
for i in range(n):
    req = b'{"jsonrpc":"2.0","id":%d,"method":"_bench/ping","params":{}}\n' % i
    t = time.perf_counter()
    p.stdin.write(req)
    while b"\n" not in buf:
        buf += out.read1(65536) if hasattr(out, "read1") else os.read(out.fileno(), 65536)
    _, buf = buf.split(b"\n", 1)
    times.append(time.perf_counter() - t)
p.stdin.close(); p.wait()
print(json.dumps(times))
'''

# An agent that answers every request at once (for the latency run).
PONG_AGENT = r'''
import os, sys
buf = b""
while True:
    chunk = os.read(0, 65536)
    if not chunk: break
    buf += chunk
    *lines, buf = buf.split(b"\n")
    out = []
    for line in lines:
        i = line.index(b'"id":') + 5
        j = line.index(b",", i)
        out.append(b'{"jsonrpc":"2.0","id":' + line[i:j] + b',"result":{}}\n')
    if out: os.write(1, b"".join(out))
'''

# Runs a command with stdout counted and dropped; prints bytes and the peak RSS of children.
RSS_WRAPPER = r'''
import resource, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
n = 0
while chunk := p.stdout.read1(1 << 20): n += len(chunk)
p.wait()
print(n, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)
'''

HUGE_AGENT = r'''
import sys
size = int(sys.argv[1]); block = b"x" * 65536; out = sys.stdout.buffer
while size > 0:
    out.write(block[:size]); size -= min(size, len(block))
out.write(b"\n"); out.flush()
'''

if __name__ == "__main__":  # pragma: no cover
    sys.exit("run `python -m bench`")


# An agent that answers each session/prompt it reads, as a real agent does (so requests do
# not pile up in flight), and drops everything else: the sink of the to-agent run.
ANSWERING_AGENT = r'''
import os, sys
buf = b""
prompt = b'"method":"session/prompt"'
while True:
    chunk = os.read(0, 1 << 20)
    if not chunk: break
    buf += chunk
    *lines, buf = buf.split(b"\n")
    out = []
    for line in lines:
        if prompt in line:
            i = line.index(b'"id":') + 5
            out.append(b'{"jsonrpc":"2.0","id":' + line[i:line.index(b",", i)] + b',"result":{"stopReason":"end_turn"}}\n')
    if out: os.write(1, b"".join(out))
'''
