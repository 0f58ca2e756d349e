"""A collector that is down, silent or refusing costs the relay nothing: the traffic goes
through byte for byte, the failure is said once on stderr, and the bridge exits on time."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from tests.conftest import agent_cmd

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is in the test extra")

FLUSH = 0.5  # [telemetry] flush_seconds here (2 by default): the longest the exit waits
TRAFFIC = b"".join(
    b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}\n' % i
    for i in range(200)) + b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":' \
    b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}\n' * 2000
# What the client gets without telemetry: the traffic echoed, then the bridge's answer to
# each of its prompts, left in flight when the echoing agent exits.
WITHOUT_TELEMETRY = TRAFFIC + b"".join(
    b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"agent exited with status 0 before answering",'
    b'"data":{"exitStatus":0}}}\n' % i for i in range(200))


@contextmanager
def dead_endpoint(how: str) -> Iterator[str]:
    """`silent`: a port that takes connections and never answers; `refused`: nothing listens."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if how == "silent":
        sock.listen(16)
    else:
        sock.close()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        sock.close()


@pytest.mark.parametrize("how", ["silent", "refused"])
async def test_the_relay_is_unaffected_when_the_collector_is_unreachable(how: str, tmp_path: Path) -> None:
    """The echoing agent sends the client's requests back, and the bridge answers the
    client's own at the end (left in flight): the same bytes with telemetry as without
    (WITHOUT_TELEMETRY, spelled out rather than taken from a second bridge run)."""
    config = tmp_path / "c.toml"
    config.write_text(f"[telemetry]\nflush_seconds = {FLUSH}\n")
    with dead_endpoint(how) as endpoint:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        with trio.fail_after(30):
            start = time.monotonic()
            done = await trio.run_process(
                [sys.executable, "-m", "acp_bridge", "run", "-c", str(config), "--otlp", "--", *agent_cmd("echo")],
                stdin=TRAFFIC, capture_stdout=True, capture_stderr=True, check=False, env=env)
            elapsed = time.monotonic() - start
    assert done.returncode == 0
    assert done.stdout == WITHOUT_TELEMETRY
    said = done.stderr.decode()
    assert said.count("telemetry: cannot export to") == 1, said
    assert f"telemetry: cannot export to {endpoint}" in said
    assert "Traceback" not in said
    # Start-up, the relay, at most 0.1 s building what is left and FLUSH seconds of waiting
    # for the collector (which never answers, or refuses: its exporter would retry for 10 s).
    assert elapsed < FLUSH + 5, elapsed
