"""Faults through the real CLI: no fault leaves the editor hanging, loses a message, or
orphans a process (bridge-rules.md section 5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from acp_bridge.config import AgentConfig, Config, RelayConfig
from acp_bridge.core import Frame, Relay, Rewrite, Session
from acp_bridge.core.rewrites.base import Outcome
from acp_bridge.shell.run import serve
from acp_bridge.shell.stderr import StderrTail
from tests.conftest import SCRIPTED_AGENT, agent_cmd, line, run_cli, signal_running_bridge

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
NEW = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}
PROMPT = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
          "params": {"sessionId": "sess_1", "prompt": [{"type": "text", "text": "go"}]}}


def scripted(tmp_path: Path, on_prompt: list[dict[str, Any]]) -> list[str]:
    script = {
        "on": {
            "initialize": [{"respond": {"protocolVersion": 1, "agentCapabilities": {}}}],
            "session/new": [{"respond": {"sessionId": "sess_1"}}],
            "session/prompt": on_prompt,
        }
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return [sys.executable, "-u", str(SCRIPTED_AGENT), str(path)]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_agent_not_executable_is_answered_and_exits_127(tmp_path: Path) -> None:
    agent = tmp_path / "agent.sh"
    agent.write_text("#!/bin/sh\n")
    agent.chmod(0o644)
    result = await run_cli(["run", "--", str(agent)], line(INIT) + line(NEW))
    assert result.returncode == 127
    answers = [orjson.loads(x) for x in result.stdout.splitlines()]
    assert [a["id"] for a in answers] == [0, 1]
    assert answers[0]["error"]["message"] == f"cannot start agent {str(agent)!r}: Permission denied"
    assert result.stderr.count(b"cannot start agent") == 1


async def test_agent_crash_mid_prompt_answers_the_prompt_with_status_and_stderr(tmp_path: Path) -> None:
    agent = scripted(tmp_path, [{"stderr": "Traceback: model exploded"}, {"exit": 3}])
    result = await run_cli(["run", "--", *agent], line(INIT) + line(NEW) + line(PROMPT))
    assert result.returncode == 3
    received = [orjson.loads(x) for x in result.stdout.splitlines()]
    assert received[0]["id"] == 0 and received[1] == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "sess_1"}}
    assert received[2] == {
        "jsonrpc": "2.0", "id": 2,
        "error": {"code": -32603, "message": "agent exited with status 3 before answering",
                  "data": {"exitStatus": 3, "stderr": "Traceback: model exploded\n"}},
    }
    assert b"Traceback: model exploded\n" in result.stderr  # also passed through live


async def test_agent_killed_by_signal_mid_prompt(tmp_path: Path) -> None:
    script_agent = [sys.executable, "-u", "-c",
                    "import os,sys,signal\n"
                    "for l in sys.stdin:\n"
                    "    if 'session/prompt' in l: os.kill(os.getpid(), signal.SIGKILL)\n"]
    result = await run_cli(["run", "--", *script_agent], line(PROMPT))
    assert result.returncode == 128 + signal.SIGKILL
    (answer,) = [orjson.loads(x) for x in result.stdout.splitlines()]
    assert answer["error"]["message"] == "agent died of SIGKILL (status 137) before answering"
    assert answer["error"]["data"] == {"exitStatus": 137, "signal": "SIGKILL"}


async def test_agent_that_ignores_stdin_eof_gets_sigterm_after_the_grace(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[relay]\ngrace_seconds = 0.3\n")
    pidfile = tmp_path / "pid"
    start = trio.current_time()
    result = await run_cli(["run", "-c", str(config), "--", *agent_cmd("ignore-eof")], b'{"x":1}\n',
                           env={"FAKE_AGENT_PIDFILE": str(pidfile)}, timeout=20)
    assert result.returncode == 128 + signal.SIGTERM
    assert result.stdout == b'{"x":1}\n'
    assert b"sending SIGTERM" in result.stderr
    assert gone(int(pidfile.read_text()))
    assert trio.current_time() - start < 10


async def test_agent_that_ignores_sigterm_gets_sigkill(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[relay]\ngrace_seconds = 0.3\n")
    pidfile = tmp_path / "pid"
    result = await run_cli(["run", "-c", str(config), "--", *agent_cmd("ignore-term")], b"",
                           env={"FAKE_AGENT_PIDFILE": str(pidfile)}, timeout=20)
    assert result.returncode == 128 + signal.SIGKILL
    assert b"sending SIGKILL" in result.stderr
    assert gone(int(pidfile.read_text()))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
async def test_signals_to_the_bridge_reach_the_agent(tmp_path: Path, signum: int) -> None:
    """The signal is passed to the agent, the bridge exits with 128+N, and says so.

    The bridge installs its signal handlers before it reads the agent's stdout, so a line
    echoed back through it proves they are in place: only then is the signal sent. The grace
    is longer than the test may take, so the agent can only have died of the signal passed
    on, not of the shutdown ladder's SIGTERM."""
    config = tmp_path / "c.toml"
    config.write_text("[relay]\ngrace_seconds = 60\n")
    pidfile = tmp_path / "pid"
    status, err = await signal_running_bridge(["run", "-v", "-c", str(config), "--", *agent_cmd("echo")],
                                              signum, env={"FAKE_AGENT_PIDFILE": str(pidfile)})
    assert status == 128 + signum
    assert gone(int(pidfile.read_text()))
    assert f"INFO: received {signal.Signals(signum).name}".encode() in err  # ordinary: said at -v


async def test_banner_on_agent_stdout_is_forwarded_and_flagged_once() -> None:
    result = await run_cli(["run", "--", *agent_cmd("banner", "Agent v1 ready")], b"plain text too\n{}\n")
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


class Boom(Rewrite):
    name = "boom"

    def request(self, frame: Frame, session: Session) -> Outcome:
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
    with pytest.RaisesGroup(ValueError, flatten_subgroups=True):
        await _serve_with(Relay([Boom()], strict=True), b'{"jsonrpc":"2.0","id":0,"method":"x"}\n')


def test_stderr_tail_keeps_whole_last_lines_within_the_bound() -> None:
    tail = StderrTail(limit=16)
    for i in range(10):
        tail.add(f"line {i}\n".encode())
    assert tail.text() == "line 8\nline 9\n"
    assert len(tail.text().encode()) <= 16


@pytest.mark.parametrize(("text", "masked"), [
    ("ANTHROPIC_API_KEY=sk-ant-123 failed", "ANTHROPIC_API_KEY=<redacted> failed"),
    ("Authorization: Bearer abc.def\n", "Authorization: Bearer <redacted>\n"),
    ('{"token": "xyz", "n": 1}', '{"token": "<redacted>", "n": 1}'),
    ("password=hunter2;", "password=<redacted>;"),
    ("a tokenizer error, no secret", "a tokenizer error, no secret"),
    ("the prompt was: be brief", "the prompt was: <system prompt>"),
])
def test_stderr_tail_is_redacted_before_it_reaches_the_client(text: str, masked: str) -> None:
    from acp_bridge.shell.stderr import mask_secrets

    assert mask_secrets(text, "be brief") == masked


@pytest.mark.parametrize("logged", [
    'TOP "SECRET" caf\u00e9',  # as written
    'TOP \\"SECRET\\" caf\\u00e9',  # as JSON writes it, ASCII only
    'TOP \\"SECRET\\" caf\u00e9',  # as JSON writes it, UTF-8
])
def test_the_system_prompt_is_masked_in_the_stderr_tail_however_the_agent_logged_it(logged: str) -> None:
    from acp_bridge.shell.stderr import mask_secrets

    assert mask_secrets(f"got systemPrompt {logged}!", 'TOP "SECRET" caf\u00e9') == "got systemPrompt <system prompt>!"


async def test_verbose_logs_what_the_rules_did(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[bridge]\nverbosity = 1\n")
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {"_meta": {"jetbrains": {"air": {}}}}}}
    result = await run_cli(["run", "-c", str(config), "--", *agent_cmd("answer")], line(init))
    assert b"acp-bridge: INFO: -> rewrite initialize #0 by suggestions" in result.stderr


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
