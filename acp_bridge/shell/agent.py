"""The agent process and the bridge's own stdio: start, relay, stop, exit status.

Owns: starting the agent with `trio.run_process` in its own process group, wiring stdio as
streams, passing the agent's stderr through live (keeping a bounded tail for error
reports), forwarding signals, the shutdown ladder (close stdin, wait for silence, SIGTERM,
SIGKILL), answering requests left in flight, and turning the agent's fate into the bridge's
exit status. Must never: write to stdout except through the relay's client outlet.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import select
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import FdStream

from acp_bridge.config import Config
from acp_bridge.core import MIB, Direction, Relay
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.shell.bridge import Bridge, Peer, bridge_streams
from acp_bridge.shell.streams import Outlet
from acp_bridge.shell.tuning import keep_heap as keep_heap  # bench/feed_ab.py imports it from here
from acp_bridge.shell.tuning import widen_pipe

if TYPE_CHECKING:
    from acp_bridge.shell.observers import Observer

log = logging.getLogger("acp_bridge.shell.agent")

EXIT_NOT_FOUND = 127
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STDERR_TAIL_BYTES = 4096
STDERR_LINGER = 1.0  # seconds to wait for the agent's last stderr bytes after it exits
STDOUT_LINGER = 1.0  # ... and for it to exit after its stdout's EOF
HANGUP_POLL = 0.5  # how often to look whether the client hung up while its pump is stuck


def exit_status(returncode: int) -> int:
    """The agent's exit status as a shell reports it: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def signal_name(signum: int) -> str:
    """SIGTERM, or "signal 40" for one Python has no name for (real-time signals)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"died of {signal_name(-returncode)} (status {exit_status(returncode)})"
    return f"exited with status {returncode}"


class StderrTail:
    """The last few KiB the agent wrote to stderr, for the errors the bridge answers with."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self.limit = limit
        self._data = bytearray()

    def add(self, chunk: bytes | bytearray) -> None:
        self._data += chunk
        if len(self._data) > 2 * self.limit:
            del self._data[: len(self._data) - self.limit]

    def text(self, private: str | None = None) -> str:
        """The tail, whole lines where possible, with secrets masked: it goes to the client."""
        if not self._data:  # nothing to mask: most agents end without a word on stderr, and
            return ""  # then a run does not load the masking (capture.text_redaction) at all
        data = bytes(self._data[-self.limit :])
        if len(self._data) > self.limit:
            cut = data.find(b"\n")
            data = data[cut + 1 :] if 0 <= cut < len(data) - 1 else data
        return mask_secrets(data.decode("utf-8", "replace"), private)


def mask_secrets(text: str, private: str | None = None) -> str:
    """Text that leaves the bridge (bridge-rules 5) masked as the capture masks it: secret-
    looking values and the configured system prompt (`capture.text_redaction.mask_text_secrets`)."""
    from acp_bridge.capture.text_redaction import mask_text_secrets  # as the agent ends, not at start-up

    return mask_text_secrets(text, private)


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
    stream = trio.StapledStream(FdStream(os.dup(stdout_fd)), FdStream(os.dup(stdin_fd)))
    try:
        yield stream
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def run_bridge(config: Config, *, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """Run the agent behind the bridge until the connection ends; return the exit status."""
    # Collect young garbage less often: the relay allocates a few objects per parsed line,
    # and they live until the chunk that carried them has been written (a 1 MiB read can
    # hold 10,000 lines). With the default threshold (700) the collector, not the relay, is
    # the main cost under load; at 50,000 it still traversed each chunk's objects before
    # they died (8% of the relay's time toward the agent). Little cyclic garbage is made,
    # so collecting it rarely holds little memory.
    gc.set_threshold(500_000, 10, 10)
    keep_heap()
    relay = Relay(build_rewrites(config), strict=config.strict,
                  max_line=config.relay.parse_limit_mib * MIB)
    from acp_bridge.shell.observers import observing

    if config.capture.path is None:
        async with observing(config, None, relay.session) as sink, open_stdio(stdin_fd, stdout_fd) as client:
            return await serve(config, relay, client, sink)
    from acp_bridge.shell.capture_file import (
        open_capture,  # only then: it costs start-up time
    )

    with open_capture(config) as capture:
        async with observing(config, capture, relay.session) as sink, open_stdio(stdin_fd, stdout_fd) as client:
            return await serve(config, relay, client, sink)


async def serve(
    config: Config,
    relay: Relay,
    client: trio.abc.HalfCloseableStream,
    observer: Observer | None = None,
    *,
    stderr_fd: int = 2,
) -> int:
    """Start the agent and relay between it and `client` until both are done."""
    command = list(config.agent.command)
    env = {**os.environ, **config.agent.env} if config.agent.env else None
    grace = config.relay.grace_seconds
    async with trio.open_nursery() as nursery:
        try:
            proc: trio.Process = await nursery.start(partial(
                trio.run_process, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, check=False, cwd=config.agent.cwd, env=env,
                process_group=0,  # so that stopping the agent stops what it started too
                deliver_cancel=partial(terminate, grace=grace),
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
            await _serve_unavailable(client, relay, observer, reason, why)
            return EXIT_NOT_FOUND
        log.info("agent started: pid %d: %s", proc.pid, " ".join(command))
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        for pipe in (proc.stdin, proc.stdout):
            if isinstance(pipe, FdStream):
                widen_pipe(pipe.fileno())
        peer = AgentProcess(proc, config, stderr_fd)
        agent = trio.StapledStream(proc.stdin, proc.stdout)
        await bridge_streams(client, agent, relay, observer, peer)
        assert peer.status is not None
        return peer.status


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


class AgentProcess(Peer):
    """The agent as a process: stderr passed through, signals forwarded, the stop ladder
    once the client has closed, and its exit status as the bridge's."""

    def __init__(self, proc: trio.Process, config: Config, stderr_fd: int) -> None:
        self.proc = proc
        self.config = config
        self.stderr_fd = stderr_fd
        self.grace = config.relay.grace_seconds
        self.tail = StderrTail()
        self.stderr_done = trio.Event()
        self.stopping = trio.Event()
        self.status: int | None = None

    async def start_beside(self, bridge: Bridge, nursery: trio.Nursery) -> None:
        assert self.proc.stderr is not None
        nursery.start_soon(_stop_when_told, bridge, self.proc, self.stopping, self.grace)
        nursery.start_soon(pass_stderr, self.proc.stderr, self.tail, self.stderr_fd, self.stderr_done)
        await nursery.start(_forward_signals, self.proc, self.stopping)

    async def wait_gone(self) -> None:
        await self.proc.wait()

    async def ended(self, bridge: Bridge) -> tuple[str, Any]:
        proc = self.proc
        with trio.move_on_after(STDOUT_LINGER):  # an EOF usually means it is exiting
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
        _signal_group(proc, signal.SIGKILL, quiet=True)  # leftovers holding our pipes
        with trio.move_on_after(STDERR_LINGER):
            await self.stderr_done.wait()
        self.status = exit_status(returncode)
        data: dict[str, Any] = {"exitStatus": self.status}
        if returncode < 0:
            data["signal"] = signal_name(-returncode)
        if stderr_text := self.tail.text(self.config.system_prompt.text):
            data["stderr"] = stderr_text
        return f"agent {describe_exit(returncode)} before answering", data


async def pass_stderr(source: trio.abc.ReceiveStream, tail: StderrTail, fd: int, done: trio.Event) -> None:
    """Copy the agent's stderr to ours as it comes, keeping its tail.

    The writes run in a thread: our stderr may be a terminal or a pipe that is slow to
    drain, and a blocking write must not stall the relay (FdStream would instead make the
    shared file description non-blocking for everyone else writing to it).
    """
    try:
        while chunk := await source.receive_some(65536):
            tail.add(chunk)
            try:
                await trio.to_thread.run_sync(write_all, fd, chunk)
            except OSError as exc:
                if exc.errno not in (errno.EPIPE, errno.EBADF):
                    raise
    finally:
        done.set()


def write_all(fd: int, data: bytes | bytearray) -> None:
    """Write all of `data` to a file descriptor that may be non-blocking (blocking call)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            # Our stderr can share a terminal's file description with the stdout that
            # FdStream made non-blocking: wait until it drains (we are in a thread).
            select.select([], [fd], [])


async def _stop_when_told(bridge: Bridge, proc: trio.Process, stopping: trio.Event, grace: float) -> None:
    """Once the client has closed (or a signal came): silence for `grace`, then the ladder."""
    async with trio.open_nursery() as nursery:
        async def client_closed() -> None:
            await bridge.client_closed.wait()
            stopping.set()

        async def client_hung_up() -> None:
            await _wait_client_hangup(bridge)
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


async def _wait_client_hangup(bridge: Bridge) -> None:
    """Return once the client has closed its end of our stdin while the pump that reads it
    is stuck writing to an agent that does not read: that pump would see the EOF only once
    the agent reads, which may be never (a hung agent), and the stop ladder would not start.
    A pipe reports the hangup (POLLHUP) even while unread bytes remain in it."""
    poll = select.poll()
    fd: int | None = None
    while True:
        await trio.sleep(HANGUP_POLL)  # a period, not an ordering: nothing else tells us
        reader = bridge.readers.get(Direction.TO_AGENT)
        if reader is None or reader.fd is None or reader.blocked or bridge.client_closed.is_set():
            continue  # not reading a pipe, or reading: it will see the EOF itself
        if fd != reader.fd:
            fd = reader.fd
            poll.register(fd, select.POLLHUP)
        if any(events & select.POLLHUP for _, events in poll.poll(0)):
            return


async def terminate(proc: trio.Process, *, grace: float) -> None:
    """SIGTERM, wait `grace`, SIGKILL: no agent (or anything it started) outlives the bridge."""
    if proc.returncode is None:
        _signal_group(proc, signal.SIGTERM)
        with trio.move_on_after(grace):
            await proc.wait()
    if proc.returncode is None:
        log.warning("agent ignored SIGTERM for %gs; sending SIGKILL", grace)
        _signal_group(proc, signal.SIGKILL)
        await proc.wait()
    else:
        _signal_group(proc, signal.SIGKILL, quiet=True)  # leftovers in its group


def _signal_group(proc: trio.Process, signum: int, *, quiet: bool = False) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:
        if not quiet and proc.returncode is None:
            proc.send_signal(signum)


async def _forward_signals(proc: trio.Process, stopping: trio.Event,
                           task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    with trio.open_signal_receiver(*FORWARDED_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            # Ordinary: SDK clients end every session with SIGTERM, a terminal sends SIGINT.
            log.info("received %s; passing it to the agent", signal_name(signum))
            if proc.returncode is None:
                _signal_group(proc, signum)
            stopping.set()


async def _serve_unavailable(client: trio.abc.HalfCloseableStream, relay: Relay,
                             observer: Observer | None,
                             reason: str, why: Any) -> None:
    """Answer every client request with the reason until the client closes."""
    relay = Relay(max_line=relay.max_line)
    relay.fail_pending(reason, why)  # none in flight yet: this answers every later one
    bridge = Bridge(relay, Outlet(_Discard(), "agent"), Outlet(client, "client"), observer)
    await bridge.pump(client, Direction.TO_AGENT)
    await bridge.to_client.send_eof()
