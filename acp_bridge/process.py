"""The agent process and the bridge's own stdio: start, relay, stop, exit status.

Owns: starting the agent with `trio.run_process`, wiring stdio as streams, forwarding
signals, the shutdown ladder (close stdin, wait for silence, SIGTERM, SIGKILL), answering
requests left in flight, and turning the agent's fate into the bridge's exit status.
Must never: write to stdout except through the relay's client outlet.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio
from trio.lowlevel import FdStream

from acp_bridge.bridge import Bridge, CaptureBatch, Outlet
from acp_bridge.config import Config
from acp_bridge.core import MIB, Direction, Relay
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.core.rewrites.unavailable import AgentUnavailable

log = logging.getLogger("acp_bridge.process")

EXIT_NOT_FOUND = 127
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_status(returncode: int) -> int:
    """The agent's exit status as a shell reports it: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class _Discard(trio.abc.SendStream):
    """Where bytes for an agent that never started go."""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


@asynccontextmanager
async def open_stdio(stdin_fd: int = 0, stdout_fd: int = 1) -> AsyncIterator[trio.StapledStream[Any, Any]]:
    """The client side: our stdout to write, our stdin to read, as one stream."""
    stream = trio.StapledStream(FdStream(os.dup(stdout_fd)), FdStream(os.dup(stdin_fd)))
    try:
        yield stream
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def run_bridge(
    config: Config,
    *,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
) -> int:
    """Run the agent behind the bridge until the connection ends; return the exit status."""
    from acp_bridge.capture_writer import open_capture

    relay = Relay(build_rewrites(config), strict=config.strict,
                  max_line=config.relay.parse_limit_mib * MIB)
    async with open_capture(config) as capture, open_stdio(stdin_fd, stdout_fd) as client:
        return await serve(config, relay, client, capture)


async def serve(
    config: Config,
    relay: Relay,
    client: trio.abc.HalfCloseableStream,
    capture: trio.MemorySendChannel[CaptureBatch] | None = None,
) -> int:
    command = list(config.agent.command)
    env = {**os.environ, **config.agent.env} if config.agent.env else None
    grace = config.relay.grace_seconds
    async with trio.open_nursery() as nursery:
        try:
            proc: trio.Process = await nursery.start(partial(
                trio.run_process, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                check=False, cwd=config.agent.cwd, env=env,
                deliver_cancel=partial(_terminate, grace=grace),
            ))
        except OSError as exc:
            reason = f"cannot start agent {command[0]!r}: {exc.strerror or exc}"
            log.error("%s", reason)
            await _serve_unavailable(client, relay, capture, reason, command, exc)
            return EXIT_NOT_FOUND
        log.info("agent started: pid %d: %s", proc.pid, " ".join(command))
        assert proc.stdin is not None and proc.stdout is not None
        bridge = Bridge(relay, Outlet(proc.stdin, "agent"), Outlet(client, "client"), capture)
        stopping = trio.Event()

        async with trio.open_nursery() as pumps:
            pumps.start_soon(bridge.pump, client, Direction.TO_AGENT)
            pumps.start_soon(_stop_when_told, bridge, proc, stopping, grace)
            await pumps.start(_forward_signals, proc, stopping)
            await bridge.pump(proc.stdout, Direction.TO_CLIENT, close=False)
            # The agent closed its stdout: it is done with us. Wait for its status.
            await proc.wait()
            status = exit_status(proc.returncode)
            # Nothing can answer requests still in flight now: answer them ourselves.
            if not bridge.client_closed.is_set() or relay.session.pending(Direction.TO_AGENT):
                forwards = relay.fail_pending(
                    f"agent exited with {_describe(proc.returncode)} before answering",
                    {"exitStatus": status},
                )
                await bridge.deliver(forwards, time.time(), time.monotonic())
            await bridge.to_client.send_eof()
            pumps.cancel_scope.cancel()
        return status


async def _stop_when_told(bridge: Bridge, proc: trio.Process, stopping: trio.Event, grace: float) -> None:
    """Once the client has closed (or a signal came): silence for `grace`, then the ladder."""
    async with trio.open_nursery() as nursery:
        async def client_closed() -> None:
            await bridge.client_closed.wait()
            stopping.set()
        nursery.start_soon(client_closed)
        await stopping.wait()
        nursery.cancel_scope.cancel()
    silence = trio.CancelScope(deadline=trio.current_time() + grace)

    def heard_from_agent() -> None:
        silence.deadline = trio.current_time() + grace

    bridge.on_agent_output = heard_from_agent
    with silence:
        await proc.wait()
    if proc.returncode is None:
        log.warning("agent silent for %ss after the client closed; stopping it", grace)
        await _terminate(proc, grace=grace)


async def _terminate(proc: trio.Process, *, grace: float) -> None:
    """SIGTERM, wait `grace`, SIGKILL: no agent outlives the bridge."""
    if proc.returncode is None:
        proc.terminate()
        with trio.move_on_after(grace):
            await proc.wait()
    if proc.returncode is None:
        log.warning("agent ignored SIGTERM for %ss; killing it", grace)
        proc.kill()
        await proc.wait()


async def _forward_signals(proc: trio.Process, stopping: trio.Event,
                           task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    with trio.open_signal_receiver(*FORWARDED_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            log.warning("received %s; passing it to the agent", signal.Signals(signum).name)
            if proc.returncode is None:
                proc.send_signal(signum)
            stopping.set()


async def _serve_unavailable(client: trio.abc.HalfCloseableStream, relay: Relay,
                             capture: trio.MemorySendChannel[CaptureBatch] | None,
                             reason: str, command: list[str], exc: OSError) -> None:
    """Answer every client request with the reason until the client closes."""
    data = {"command": command, "reason": exc.strerror or str(exc), "errno": exc.errno}
    relay.rewrites = (AgentUnavailable(reason, data),)
    bridge = Bridge(relay, Outlet(_Discard(), "agent"), Outlet(client, "client"), capture)
    await bridge.pump(client, Direction.TO_AGENT)
    await bridge.to_client.send_eof()


def _describe(returncode: int | None) -> str:
    if returncode is None:
        return "no status"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"{name} (status {exit_status(returncode)})"
    return f"status {returncode}"
