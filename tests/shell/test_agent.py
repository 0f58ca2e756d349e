"""The agent as a process: its stop ladder on trio's mock clock, and its faults through the
real CLI (bridge-rules.md section 5: no fault leaves the editor hanging or orphans a process).

The ladder tests run `terminate` and `stop_when_told` against a fake process that records
each signal sent to its group and the virtual time it came at (shell/posix.py's senders are
replaced for it), so every grace is exact and no test waits real seconds for one. Faults
whose subject is the answer the client gets (an agent that cannot start, one killed
mid-prompt) run `run` in this process (tests/cli_helpers.py), the agent a real
process; the exit statuses as the process's are tests/commands/test_run.py's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
import trio
import trio.testing

from acp_bridge.shell import posix
from acp_bridge.shell.agent import describe_exit, exit_status, stop_when_told, terminate
from acp_bridge.shell.bridge import Bridge
from tests.cli_helpers import run_cli_in_process
from tests.conftest import SCRIPTED_AGENT, agent_cmd, line, run_cli, signal_running_bridge

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
NEW = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}
PROMPT = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
          "params": {"sessionId": "sess_1", "prompt": [{"type": "text", "text": "go"}]}}
GRACE = 5.0


class FakeAgent:
    """A process whose group receives signals: each is recorded with the (virtual) time it
    came at, and the process exits of the first one it `heeds`."""

    pid = -1  # never a real process group: posix's senders are replaced (see `signals`)

    def __init__(self, heeds: frozenset[str] = frozenset({"SIGTERM", "SIGKILL"})) -> None:
        self.heeds = heeds
        self.returncode: int | None = None
        self.received: list[tuple[str, float]] = []
        self._exited = trio.Event()

    def receive(self, name: str, signum: int) -> None:
        self.received.append((name, trio.current_time()))
        if name in self.heeds and self.returncode is None:
            self.exit(-signum)

    def exit(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode


@pytest.fixture
def signals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send shell/posix.py's group signals to a FakeAgent instead of a process group."""
    def terminate_group(proc: FakeAgent) -> None:
        proc.receive("SIGTERM", signal.SIGTERM)

    def kill_group(proc: FakeAgent, *, leftovers: bool = False) -> None:
        proc.receive("SIGKILL to leftovers" if leftovers else "SIGKILL", signal.SIGKILL)

    monkeypatch.setattr(posix, "terminate_group", terminate_group)
    monkeypatch.setattr(posix, "kill_group", kill_group)


def fake_bridge() -> Any:
    """What `stop_when_told` reads of the bridge: the client's close, the pumps' readers
    (none: nothing to poll for a hangup), and where to say that the agent spoke."""
    return SimpleNamespace(client_closed=trio.Event(), readers={}, on_agent_output=None)


@pytest.mark.usefixtures("signals")
async def test_terminate_sends_sigkill_a_grace_after_an_unheeded_sigterm(autojump_clock: trio.testing.MockClock) -> None:
    agent = FakeAgent(heeds=frozenset({"SIGKILL"}))
    start = trio.current_time()
    await terminate(cast(trio.Process, agent), grace=GRACE)
    assert agent.received == [("SIGTERM", start), ("SIGKILL", start + GRACE)]
    assert agent.returncode == -signal.SIGKILL


@pytest.mark.usefixtures("signals")
async def test_terminate_stops_at_a_heeded_sigterm_and_kills_the_leftovers(
        autojump_clock: trio.testing.MockClock) -> None:
    agent = FakeAgent()
    start = trio.current_time()
    await terminate(cast(trio.Process, agent), grace=GRACE)
    assert agent.received == [("SIGTERM", start), ("SIGKILL to leftovers", start)]
    assert agent.returncode == -signal.SIGTERM


async def _ladder(agent: FakeAgent, events: list[tuple[float, str]]) -> float:
    """Run the stop ladder beside `events` (at virtual seconds from the start: "close" the
    client, "signal" the bridge, the agent "speaks" or "exits"); return the start time."""
    bridge, stopping = fake_bridge(), trio.Event()
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stop_when_told, cast(Bridge, bridge), cast(trio.Process, agent), stopping, GRACE)
        for at, event in events:
            await trio.sleep_until(start + at)
            if event == "close":
                bridge.client_closed.set()
            elif event == "signal":
                stopping.set()
            elif event == "speaks":
                bridge.on_agent_output()
            else:
                agent.exit(0)
    return start


@pytest.mark.usefixtures("signals")
@pytest.mark.parametrize(("heeds", "events", "received"), [
    # The client closes at 10: silence for the grace, SIGTERM, another grace, SIGKILL.
    ({"SIGKILL"}, [(10, "close")], [("SIGTERM", 15), ("SIGKILL", 20)]),
    # An agent that heeds SIGTERM: its leftovers are killed at once.
    ({"SIGTERM", "SIGKILL"}, [(10, "close")], [("SIGTERM", 15), ("SIGKILL to leftovers", 15)]),
    # Output during the grace starts the silence anew.
    ({"SIGKILL"}, [(0, "close"), (3, "speaks"), (7, "speaks")], [("SIGTERM", 12), ("SIGKILL", 17)]),
    # A signal to the bridge starts the ladder as the client's close does.
    ({"SIGKILL"}, [(1, "signal")], [("SIGTERM", 6), ("SIGKILL", 11)]),
    # An agent that exits within the grace gets no signal.
    ({"SIGKILL"}, [(0, "close"), (4.5, "exits")], []),
    # Nor one that exits before the client closes.
    ({"SIGKILL"}, [(2, "exits"), (3, "close")], []),
])
async def test_the_stop_ladder_grace_sigterm_grace_sigkill(
        autojump_clock: trio.testing.MockClock, heeds: set[str], events: list[tuple[float, str]],
        received: list[tuple[str, float]]) -> None:
    agent = FakeAgent(frozenset(heeds))
    start = await _ladder(agent, events)
    assert [(name, at - start) for name, at in agent.received] == received
    assert agent.returncode is not None


@pytest.mark.parametrize(("returncode", "status", "said"), [
    (0, 0, "exited with status 0"),
    (3, 3, "exited with status 3"),
    (-signal.SIGTERM, 143, "died of SIGTERM (status 143)"),
    (-signal.SIGKILL, 137, "died of SIGKILL (status 137)"),
    (-40, 168, "died of signal 40 (status 168)"),
])
def test_exit_status_is_the_shells(returncode: int, status: int, said: str) -> None:
    assert (exit_status(returncode), describe_exit(returncode)) == (status, said)



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
    result = await run_cli_in_process(["run", "--", str(agent)], line(INIT) + line(NEW))
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
    result = await run_cli_in_process(["run", "--", *script_agent], line(PROMPT))
    assert result.returncode == 128 + signal.SIGKILL
    (answer,) = [orjson.loads(x) for x in result.stdout.splitlines()]
    assert answer["error"]["message"] == "agent died of SIGKILL (status 137) before answering"
    assert answer["error"]["data"] == {"exitStatus": 137, "signal": "SIGKILL"}


async def closed_once_echoed(config: Path, mode: str, pidfile: Path) -> tuple[int, bytes, bytes]:
    """`run` in front of the fake agent in `mode`; the client closes only once a line has
    come back through it, so the agent has done what its mode does first (ignore SIGTERM)
    by then. Closing at once raced the agent's start against the 0.3 s grace: on a busy
    machine the ladder's SIGTERM came first. Returns the status, stdout and stderr."""
    import subprocess

    from tests.conftest import BridgeProcess

    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "acp_bridge", "run", "-c", str(config), "--", *agent_cmd(mode)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "FAKE_AGENT_PIDFILE": str(pidfile)})
    err = b""
    try:
        with trio.fail_after(20):
            bridge = BridgeProcess(proc)
            await bridge.send(b'{"x":1}\n')
            await bridge.read_until(b'{"x":1}\n')
            await bridge.close_stdin()
            assert proc.stderr is not None
            while chunk := await proc.stderr.receive_some():
                err += chunk
            out = await bridge.read_all()
            return await proc.wait(), out, err
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()


async def test_agent_that_ignores_stdin_eof_gets_sigterm_after_the_grace(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[relay]\ngrace_seconds = 0.3\n")
    pidfile = tmp_path / "pid"
    start = trio.current_time()
    status, out, err = await closed_once_echoed(config, "ignore-eof", pidfile)
    assert (status, out) == (128 + signal.SIGTERM, b'{"x":1}\n')
    assert b"sending SIGTERM" in err
    assert gone(int(pidfile.read_text()))
    assert trio.current_time() - start < 10


async def test_agent_that_ignores_sigterm_gets_sigkill(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[relay]\ngrace_seconds = 0.3\n")
    pidfile = tmp_path / "pid"
    status, out, err = await closed_once_echoed(config, "ignore-term", pidfile)
    assert (status, out) == (128 + signal.SIGKILL, b'{"x":1}\n')
    assert b"sending SIGKILL" in err
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


@pytest.mark.parametrize(("grace", "linger"), [(5.0, 1.0), (1.0, 1.0), (0.3, 0.3), (0.0, 0.0)])
def test_a_gone_agents_last_output_is_waited_for_a_second_or_the_grace_if_shorter(grace: float, linger: float) -> None:
    from acp_bridge.config import Config
    from acp_bridge.shell.agent import AgentProcess
    from acp_bridge.shell.logs import stderr_writer

    config = Config()
    config = dataclasses.replace(config, relay=dataclasses.replace(config.relay, grace_seconds=grace))
    assert AgentProcess(cast(trio.Process, None), config, stderr_writer()).linger == linger
