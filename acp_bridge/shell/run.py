"""A run of the bridge: from a `Config` to the agent started, relayed to, and its status.

Owns: `run_bridge` (the tuning, the relay, the capture and observers, the bridge's own
stdio), `serve` (starting the agent in a process group of its own with its stdio as
streams, and relaying until both sides are done), and what the bridge does when the agent
cannot start (every request answered with why, with a hint, exit 127). Must never: write
to stdout except through the relay's client outlet.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from acp_bridge.config import Config
from acp_bridge.core import MIB, Direction, Relay
from acp_bridge.core.proxy_wire import Dialect, chain_facts
from acp_bridge.core.rewrites import Rule, build_rewrites, stray_output
from acp_bridge.shell import posix
from acp_bridge.shell.agent import AgentProcess, terminate
from acp_bridge.shell.bridge import Bridge, bridge_streams
from acp_bridge.shell.logs import writer_for
from acp_bridge.shell.streams import Outlet
from acp_bridge.shell.tuning import collect_rarely, keep_heap, widen_pipe

if TYPE_CHECKING:
    from acp_bridge.shell.observers import Observer

log = logging.getLogger("acp_bridge.shell.agent")

EXIT_NOT_FOUND = 127


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
    for fd in (stdin_fd, stdout_fd):
        widen_pipe(fd)
    stream = trio.StapledStream(posix.open_fd_stream(stdout_fd), posix.open_fd_stream(stdin_fd))
    try:
        yield stream
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def run_bridge(config: Config, rules: Sequence[Rule] | None = None, *, stdin_fd: int = 0,
                     stdout_fd: int = 1) -> int:
    """Run the agent behind the bridge until the connection ends; return the exit status.
    `rules`: the rules to run, in order (`config/rules.py` loads them); None: the built-ins."""
    collect_rarely()
    keep_heap()
    relay = Relay(build_rewrites(config) if rules is None else rules, strict=config.strict,
                  max_line=config.relay.parse_limit_mib * MIB,
                  divert_stray=stray_output.DECLARED.is_on(config))
    from acp_bridge.shell.observers import observing

    if not config.agent.command:  # a component of a proxy chain: its conductor is on stdio
        from acp_bridge.shell.chain import serve_chain

        @asynccontextmanager
        async def open_observer(dialect: Dialect) -> AsyncIterator[Observer | None]:
            from acp_bridge.shell.capture_file import open_capture_for_writing

            with open_capture_for_writing(config, chain=chain_facts(dialect)) as capture:
                async with observing(config, capture, relay.session) as sink:
                    yield sink

        async with open_stdio(stdin_fd, stdout_fd) as stdio:
            return await serve_chain(config, relay, stdio, open_observer)
    if config.capture.path is None:
        async with observing(config, None, relay.session) as sink, open_stdio(stdin_fd, stdout_fd) as client:
            return await serve(config, relay, client, sink)
    from acp_bridge.shell.capture_file import (
        open_capture_for_writing,  # only then: it costs start-up time
    )

    with open_capture_for_writing(config) as capture:
        async with observing(config, capture, relay.session) as sink, open_stdio(stdin_fd, stdout_fd) as client:
            return await serve(config, relay, client, sink)


async def serve(
    config: Config,
    relay: Relay,
    client: trio.abc.HalfCloseableStream,
    observer: Observer | None = None,
    *,
    stderr_fd: int = 2,
    unavailable: Callable[[str], None] | None = None,
) -> int:
    """Start the agent and relay between it and `client` until both are done.

    `unavailable`: told why when the agent cannot start, in place of answering the client's
    requests with it (`drive`, whose client is in this process)."""
    command = list(config.agent.command)
    env = {**os.environ, **config.agent.env} if config.agent.env else None
    grace = config.relay.grace_seconds
    async with trio.open_nursery() as nursery:
        try:
            proc: trio.Process = await nursery.start(partial(
                trio.run_process, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, check=False, cwd=config.agent.cwd, env=env,
                deliver_cancel=partial(terminate, grace=grace), **posix.OWN_PROCESS_GROUP,
            ))
        except OSError as exc:
            reason = f"cannot start agent {command[0]!r}: {exc.strerror or exc}"
            why: dict[str, Any] = {"command": command, "reason": exc.strerror or str(exc), "errno": exc.errno}
            hint = start_hint(command[0], exc, (env or os.environ).get("PATH"), config.agent.cwd)
            if hint:
                why["hint"] = hint
                log.error("%s. %s.", reason, hint)
            else:
                log.error("%s", reason)
            if unavailable is not None:
                unavailable(reason)
            else:
                await _serve_unavailable(client, relay, observer, reason, why)
            return EXIT_NOT_FOUND
        log.info("agent started: pid %d: %s", proc.pid, " ".join(command))
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        for pipe in (proc.stdin, proc.stdout):
            if (fd := posix.fd_of(pipe)) is not None:
                widen_pipe(fd)
        stderr = writer_for(stderr_fd)  # never waits: see shell/logs.py
        process = AgentProcess(proc, config, stderr)
        agent = trio.StapledStream(proc.stdin, proc.stdout)

        def divert(text: str) -> None:
            stderr.write((text + "\n").encode("utf-8", "replace"))

        await bridge_streams(client, agent, relay, observer, process, on_stray=divert)
        assert process.status is not None
        return process.status


def start_hint(program: str, exc: OSError, path: str | None, cwd: str | None) -> str | None:
    """What usually makes an agent fail to start, for the error's `data.hint` and stderr."""
    if exc.errno == errno.ENOENT:
        if cwd is not None and exc.filename == cwd:
            return f"the agent's working folder {cwd} ([agent] cwd) does not exist"
        if "/" not in program:
            import shutil

            if shutil.which(program, path=path):
                return f"{program!r} is on the PATH, but the interpreter on its #! line is missing"
            return (f"{program!r} is not in any folder on the PATH the bridge was given; editors start agents "
                    f"with their own PATH, often not your shell's: give the agent's full path "
                    f"(`command -v {program}` in your shell prints it)")
        where = program if os.path.isabs(program) or cwd is None else os.path.normpath(os.path.join(cwd, program))
        if os.path.exists(where):
            return f"{where} exists, but the interpreter on its #! line is missing"
        return f"there is no file at {where}"
    if exc.errno == errno.EACCES:
        return "the file is not executable (chmod +x), or a folder on its path cannot be entered"
    return None


async def _serve_unavailable(client: trio.abc.HalfCloseableStream, relay: Relay,
                             observer: Observer | None,
                             reason: str, why: Any) -> None:
    """Answer every client request with the reason until the client closes."""
    relay = Relay(max_line=relay.max_line)
    relay.fail_pending(reason, why)  # none in flight yet: this answers every later one
    bridge = Bridge(relay, Outlet(_Discard(), "agent"), Outlet(client, "client"), observer)
    await bridge.pump(client, Direction.TO_AGENT)
    await bridge.to_client.send_eof()
