"""Faults through the real CLI: no fault leaves the editor hanging, loses a message, or
orphans a process (bridge-rules.md section 5). The agent process's own faults (it cannot
start, crashes, ignores the end of its input or SIGTERM) are in tests/shell/test_agent.py.
What the log says of a banner and of the rules' work is checked with `run` in this process
(tests/cli_helpers.py), the agent a real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from acp_bridge.config import AgentConfig, Config, RelayConfig
from acp_bridge.core import Connection, Frame, Relay, Rule
from acp_bridge.core.chain import RuleError
from acp_bridge.core.rewrites.base import Outcome
from acp_bridge.shell.run import serve
from tests.cli_helpers import run_cli_in_process
from tests.conftest import agent_cmd, line


async def test_banner_on_agent_stdout_is_forwarded_and_flagged_once() -> None:
    result = await run_cli_in_process(["run", "--", *agent_cmd("banner", "Agent v1 ready")], b"plain text too\n{}\n")
    assert result.stdout == b"Agent v1 ready\nplain text too\n{}\n"
    assert result.stderr.count(b"not JSON-RPC") == 1
    assert b"'Agent v1 ready'" in result.stderr


async def test_a_huge_line_is_streamed_with_bounded_memory(tmp_path: Path) -> None:
    """A 256 MiB line with a 16 MiB parse limit: peak RSS stays far below the line."""
    size = 256 * 1024 * 1024
    # Count the bytes in a consumer that does not keep them, so only the bridge is measured.
    counter = (
        "import os, resource, subprocess, sys\n"
        "p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)\n"
        "n = 0\n"
        "while chunk := p.stdout.read1(1 << 20): n += len(chunk)\n"
        "p.wait()\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(n, peak, p.returncode)\n"
    )
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, "-c", counter, sys.executable, "-m", "acp_bridge", "run", "--",
             *agent_cmd("huge", str(size))], capture_stdout=True)
    count, peak_kib, rc = map(int, done.stdout.split())
    assert (count, rc) == (size + 1, 0)
    assert peak_kib < 150 * 1024, f"peak RSS {peak_kib} KiB"


class Boom(Rule):
    name = "boom"

    def request(self, frame: Frame, session: Connection) -> Outcome:
        raise ValueError("rule bug")


async def _serve_with(relay: Relay, data: bytes) -> tuple[int, bytes]:
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    config = Config(agent=AgentConfig(command=tuple(agent_cmd("echo"))), relay=RelayConfig(grace_seconds=1))
    got = b""
    status = -1
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            async def run() -> None:
                nonlocal status
                status = await serve(config, relay, client_bridge)
            nursery.start_soon(run)
            await client_ours.send_all(data)
            await client_ours.send_eof()
            while chunk := await client_ours.receive_some():
                got += chunk
    return status, got


async def test_a_rule_bug_forwards_the_original_message() -> None:
    data = b'{"jsonrpc":"2.0","id":0,"method":"x"}\n'
    status, got = await _serve_with(Relay([Boom()]), data + b'{"jsonrpc":"2.0","id":0,"result":{}}\n')
    assert status == 0
    assert got == data + b'{"jsonrpc":"2.0","id":0,"result":{}}\n'


async def test_a_rule_bug_is_fatal_under_strict() -> None:
    with pytest.RaisesGroup(pytest.RaisesExc(RuleError, match="^rule 'boom' failed: ValueError: rule bug$"),
                            flatten_subgroups=True):
        await _serve_with(Relay([Boom()], strict=True), b'{"jsonrpc":"2.0","id":0,"method":"x"}\n')




async def test_verbose_logs_what_the_rules_did(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[bridge]\nverbosity = 1\n")
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {"_meta": {"jetbrains": {"air": {}}}}}}
    result = await run_cli_in_process(["run", "-c", str(config), "--", *agent_cmd("answer")], line(init))
    assert b"acp-bridge: INFO: -> rewrite initialize id 0 by suggestions" in result.stderr


STEADY = 0.5  # seconds a blocked write must stay blocked to count as held back


async def held_back(progress: Path, total: int) -> int:
    """Wait until the flood-watch agent is held back; return the bytes it got out by then.

    Held back: its write has blocked, and still blocks `STEADY` seconds later, having got
    nothing more out. A bridge that kept reading would have let the write through by then
    (then it blocks again at another count, or the agent finishes: `total` comes back)."""
    seen = ""
    while True:
        now = progress.read_text() if progress.exists() else ""  # "" also while it is rewritten
        if now == str(total):
            return total
        if now.endswith(" blocked") and now == seen:
            return int(now.split()[0])
        if now.endswith(" blocked"):
            seen = now
            await trio.sleep(STEADY)
        else:
            await trio.sleep(0.02)  # polling a condition, with the caller's deadline


async def test_a_client_that_does_not_read_holds_the_agent_back(tmp_path: Path) -> None:
    """Backpressure through real pipes: the bridge buffers a few MiB at most, so an agent
    writing 64 MiB to a client that reads nothing is soon blocked, and nothing is lost. The
    agent says when its writes block, and the check waits for that: a slow start cannot make
    it pass before anything was written."""
    progress = tmp_path / "progress"
    lines = 64 * 1024
    size = len(b'{"jsonrpc":"2.0","method":"session/update","params":{"x":""}}\n') + 980  # fake_agent's line
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "acp_bridge", "run", "--", *agent_cmd("flood-watch", str(lines), str(progress))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        with trio.fail_after(60):
            held = await held_back(progress, lines * size)
            assert held < lines * size // 4, f"the agent wrote {held} of {lines * size} bytes unread"
            received = 0
            while chunk := await proc.stdout.receive_some(1 << 20):
                received += len(chunk)
                if received == lines * size:
                    await proc.stdin.aclose()
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert received == lines * size
    assert progress.read_text() == str(lines * size)
