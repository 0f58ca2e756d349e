"""The agent as a process: its stop ladder, the signals passed on to it, and its fate.

Owns: `AgentProcess` (the `AgentLife` the bridge runs beside: stderr passed through, signals
forwarded, the stop ladder once the client has closed, a client that stopped reading given
up on after a signal, the exit status as the bridge's),
the ladder itself (close stdin, wait for silence, SIGTERM, wait, SIGKILL) and the exit
status as a shell reports it. The signals are sent through shell/posix.py. Must never:
write to stdout except through the relay's client outlet, or leave the agent (or anything
it started) running after the bridge.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from acp_bridge.config import Config
from acp_bridge.core import Direction
from acp_bridge.shell import posix
from acp_bridge.shell.bridge import LINGER, STOP_TIMEOUT, AgentLife, Bridge
from acp_bridge.shell.logs import FdWriter
from acp_bridge.shell.stderr import StderrTail, pass_stderr
from acp_bridge.shell.streams import stands_still

log = logging.getLogger("acp_bridge.shell.agent")

HANGUP_POLL = 0.5  # how often to look whether the client hung up while its pump is stuck


def exit_status(returncode: int) -> int:
    """The agent's exit status as a shell reports it: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"died of {posix.signal_name(-returncode)} (status {exit_status(returncode)})"
    return f"exited with status {returncode}"


class AgentProcess(AgentLife):
    """The agent as a process: stderr passed through, signals forwarded, the stop ladder
    once the client has closed, and its exit status as the bridge's."""

    stop_timeout = STOP_TIMEOUT  # after a signal: how long a write to the client may stand still

    def __init__(self, proc: trio.Process, config: Config, stderr: FdWriter) -> None:
        self.proc = proc
        self.config = config
        self.stderr = stderr  # our stderr's writer, which never waits
        self.grace = config.relay.grace_seconds
        # Waiting for a gone agent's last output (and its stderr, and its exit after its
        # stdout's EOF) never outlasts the patience the user gave it.
        self.linger = min(LINGER, self.grace)
        self.tail = StderrTail()
        self.stderr_done = trio.Event()
        self.stopping = trio.Event()
        self.signalled = trio.Event()
        self.status: int | None = None

    async def start_tasks(self, bridge: Bridge, nursery: trio.Nursery) -> None:
        assert self.proc.stderr is not None
        nursery.start_soon(stop_when_told, bridge, self.proc, self.stopping, self.grace)
        nursery.start_soon(pass_stderr, self.proc.stderr, self.tail, self.stderr, self.stderr_done)
        nursery.start_soon(self._give_up_on_a_client_that_stopped_reading, bridge)
        await nursery.start(forward_signals, self.proc, self.stopping, self.signalled)

    async def _give_up_on_a_client_that_stopped_reading(self, bridge: Bridge) -> None:
        """After a signal the bridge still writes the agent's last output and the answers
        to what is in flight: a client that no longer reads the bridge's stdout kept it
        waiting for ever, SIGTERM or not. Once a write has stood still for `stop_timeout`,
        the client's side is given up (what is left for it is dropped). Not without a
        signal: a client that closed its side may still read, slowly (a pager)."""
        await self.signalled.wait()
        await stands_still(lambda: bridge.to_client.stuck_since, self.stop_timeout)
        log.warning("the client has not read the bridge's stdout for %gs while stopping; not waiting for it",
                    self.stop_timeout)
        await bridge.to_client.abandon()

    async def wait_gone(self) -> None:
        await self.proc.wait()

    async def after_output_ends(self, bridge: Bridge) -> tuple[str, Any]:
        proc = self.proc
        with trio.move_on_after(self.linger):  # an EOF usually means it is exiting
            await proc.wait()
        if proc.returncode is None:
            # It closed its stdout and runs on: no answer can come from it any more.
            await bridge.answer_in_flight("agent closed its stdout before answering",
                                          {"reason": "the agent closed its stdout and kept running"})
            await bridge.to_client.send_eof()
            with trio.move_on_after(self.grace):
                await proc.wait()
            if proc.returncode is None:
                log.warning("agent still running %gs after closing its stdout; sending SIGTERM", self.grace)
                await terminate(proc, grace=self.grace)
        assert proc.returncode is not None
        returncode = proc.returncode
        posix.kill_group(proc, leftovers=True)  # leftovers holding our pipes
        with trio.move_on_after(self.linger):
            await self.stderr_done.wait()
        self.status = exit_status(returncode)
        data: dict[str, Any] = {"exitStatus": self.status}
        if returncode < 0:
            data["signal"] = posix.signal_name(-returncode)
        if stderr_text := self.tail.text(self.config.system_prompt.text):
            data["stderr"] = stderr_text
        return f"agent {describe_exit(returncode)} before answering", data


async def stop_when_told(bridge: Bridge, proc: trio.Process, stopping: trio.Event, grace: float) -> None:
    """Once the client has closed (or a signal came): silence for `grace`, then the ladder."""
    async with trio.open_nursery() as nursery:
        async def client_closed() -> None:
            await bridge.client_closed.wait()
            stopping.set()

        async def client_hung_up() -> None:
            await wait_client_hangup(bridge)
            log.info("the client closed its side while the agent was not reading its input")
            stopping.set()

        nursery.start_soon(client_closed)
        nursery.start_soon(client_hung_up)
        await stopping.wait()
        nursery.cancel_scope.cancel()
    silence = trio.CancelScope(deadline=trio.current_time() + grace)

    def heard_from_agent() -> None:
        silence.deadline = trio.current_time() + grace

    bridge.on_agent_output = heard_from_agent
    with silence:
        await proc.wait()
    if proc.returncode is None:
        log.warning("agent still running %gs after the client closed; sending SIGTERM", grace)
        await terminate(proc, grace=grace)


async def wait_client_hangup(bridge: Bridge) -> None:
    """Return once the client has closed its end of our stdin while the pump that reads it
    is stuck writing to an agent that does not read: that pump would see the EOF only once
    the agent reads, which may be never (a hung agent), and the stop ladder would not start."""
    while True:
        await trio.sleep(HANGUP_POLL)  # a period, not an ordering: nothing else tells us
        reader = bridge.readers.get(Direction.TO_AGENT)
        if reader is None or reader.fd is None or reader.blocked or bridge.client_closed.is_set():
            continue  # not reading a pipe, or reading: it will see the EOF itself
        if posix.hung_up(reader.fd):
            return


async def terminate(proc: trio.Process, *, grace: float) -> None:
    """SIGTERM, wait `grace`, SIGKILL: no agent (or anything it started) outlives the bridge."""
    if proc.returncode is None:
        posix.terminate_group(proc)
        with trio.move_on_after(grace):
            await proc.wait()
    if proc.returncode is None:
        log.warning("agent ignored SIGTERM for %gs; sending SIGKILL", grace)
        posix.kill_group(proc)
        await proc.wait()
    else:
        posix.kill_group(proc, leftovers=True)  # leftovers in its group


async def forward_signals(proc: trio.Process, stopping: trio.Event, signalled: trio.Event,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Pass the signals the bridge receives on to the agent, and start the stop ladder."""
    with posix.forwarded_signals() as signals:
        task_status.started()
        async for signum in signals:
            # Ordinary: SDK clients end every session with SIGTERM, a terminal sends SIGINT.
            log.info("received %s; passing it to the agent", posix.signal_name(signum))
            if proc.returncode is None:
                posix.pass_signal(proc, signum)
            signalled.set()
            stopping.set()
