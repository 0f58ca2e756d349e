"""`acp-bridge run` with no agent: a component of an ACP proxy chain, under a conductor.

Owns: reading the conductor's first line and deciding the dialect (core/proxy_wire.py), the
two sides the relay sees made from the one connection (the conductor's lines, unwrapped,
become a client stream and an agent stream; what the relay writes toward each is wrapped or
not and goes out on the one stdout), and writing to that stdout a whole line at a time, so
that what goes toward the client and what goes toward the successor never interleave
within a line. Must never: write anything to stdout but protocol lines, or hold a line over
the parse limit whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import trio

from acp_bridge.core import Relay
from acp_bridge.core.lines import LineSplitter, Opaque
from acp_bridge.core.proxy_link import CONDUCTOR, FROM_AGENT, FROM_CLIENT, ProxyLink
from acp_bridge.core.proxy_wire import Dialect, Refusal, first_message
from acp_bridge.shell import posix
from acp_bridge.shell.bridge import STOP_TIMEOUT, AgentLife, Bridge, bridge_streams
from acp_bridge.shell.streams import stands_still

if TYPE_CHECKING:
    from acp_bridge.config import Config
    from acp_bridge.shell.observers import Observer

log = logging.getLogger("acp_bridge.chain")

EXIT_NO_CHAIN = 2
READ_SIZE = 1 << 20
INBOX = 16  # chunks a side's inbox holds before the conductor's stream waits for it


class Stdout:
    """The conductor's end of our stdout, shared by the client's side and the successor's:
    a writer that has begun a line keeps it until the line ends."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self.stream = stream
        self._owner: str | None = None  # the writer in the middle of a line
        self._free = trio.Event()
        self._lock = trio.StrictFIFOLock()  # one send_all at a time
        self.waiting = 0  # writes begun and not done
        self.moved = trio.current_time()  # when a write last went through

    async def write(self, who: str, data: bytes, *, ends_line: bool) -> None:
        if not self.waiting:
            self.moved = trio.current_time()  # the stdout stands still from now if this write does not go
        self.waiting += 1
        try:
            while self._owner not in (None, who):
                await self._free.wait()
            self._owner = who
            try:
                async with self._lock:
                    await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._release()  # the conductor is gone: the other side's write fails too, it must not wait
                raise
            self.moved = trio.current_time()
        finally:
            self.waiting -= 1
        if ends_line:
            self._release()

    @property
    def held_by(self) -> str | None:
        """The writer in the middle of a line, if any."""
        return self._owner

    def _release(self) -> None:
        self._owner = None
        self._free.set()
        self._free = trio.Event()


class Inbox(trio.abc.ReceiveStream):
    """One side's bytes, as the conductor's stream delivers them to it."""

    def __init__(self, channel: trio.MemoryReceiveChannel[bytes]) -> None:
        self.channel = channel

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        try:
            return await self.channel.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return b""

    async def aclose(self) -> None:
        await self.channel.aclose()


class ToClient(trio.abc.HalfCloseableStream):
    """What the relay sends toward the client: out plain, as it is (but for the sacp
    initialize answer, see `ProxyLink.to_client`)."""

    def __init__(self, stdout: Stdout, link: ProxyLink, inbox: Inbox) -> None:
        self.stdout, self.link, self.inbox = stdout, link, inbox
        self._ended_torn = False  # this side ended its torn last line itself

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        data = bytes(data)
        if self._ended_torn:  # the relay ends the torn line too, before its next message
            self._ended_torn, data = False, data.removeprefix(b"\n")
        data = self.link.to_client(data)
        await self.stdout.write("client", data, ends_line=data.endswith(b"\n"))

    async def end_torn_line(self) -> None:
        """The successor's side has ended inside a line: end it, so that the stdout is free
        for what the client's side still has to write."""
        if self.stdout.held_by == "client":
            await self.stdout.write("client", b"\n", ends_line=True)
            self._ended_torn = True

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def send_eof(self) -> None:
        await trio.lowlevel.checkpoint()  # the conductor's stream ends when the process does

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self.inbox.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inbox.aclose()


class ToSuccessor(ToClient):
    """What the relay sends toward the agent: each line wrapped for the conductor."""

    def __init__(self, stdout: Stdout, link: ProxyLink, inbox: Inbox, max_line: int) -> None:
        super().__init__(stdout, link, inbox)
        self.lines = LineSplitter(max_line)
        self._begun = False  # bytes of a line not yet ended went out

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        out: list[bytes] = []
        ends_line = True
        for piece in self.lines.feed(bytes(data)):
            out.append(self.link.to_successor(piece))
            ends_line = not isinstance(piece, Opaque) or piece.end
        if not self.lines.idle:
            ends_line = False
        self._begun = not ends_line and (self._begun or bool(out and out[-1]))
        wrapped = b"".join(out)
        if wrapped or not ends_line:
            await self.stdout.write("successor", wrapped, ends_line=ends_line)

    async def send_eof(self) -> None:
        await self._end_line()

    async def aclose(self) -> None:
        await self._end_line()  # the bridge gives up on the agent side (`Outlet.abandon`)
        await super().aclose()

    async def _end_line(self) -> None:
        """No more comes toward the agent: a torn last line the relay left goes on wrapped,
        ended, since the client's side writes its lines to the same stdout after it."""
        if self.lines.idle:
            await trio.lowlevel.checkpoint()
            return
        wrapped = b"".join(self.link.to_successor(piece) for piece in self.lines.feed_eof())
        if (wrapped or self._begun) and not wrapped.endswith(b"\n"):  # none of a line not sent: no blank line
            wrapped += b"\n"
        self._begun = False
        await self.stdout.write("successor", wrapped, ends_line=True)


class ConductorLife(AgentLife):
    """The agent side is the conductor's stream: it is gone when that stream ends, or when
    a signal (SIGTERM, SIGINT, SIGHUP) tells the bridge to stop; with no agent of its own
    to pass it to, the bridge stops itself."""

    stop_timeout = STOP_TIMEOUT  # after a signal: how long the stdout may stand still under a write

    def __init__(self) -> None:
        self.signal: int | None = None
        self._reading = trio.CancelScope()  # the read of the conductor's stream under way
        self.stopping = trio.CancelScope()  # the bridge: given up on when the conductor stops reading after a signal
        self.stdout: Stdout | None = None
        self.client: ToClient | None = None

    async def listen(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """From before the conductor's first line to the end (`serve_chain` runs it): a
        signal stops the reading, and later what the bridge still writes, if it stands still."""
        with posix.forwarded_signals() as signals:
            task_status.started()
            async for signum in signals:
                log.info("received %s; stopping", posix.signal_name(signum))
                self.signal = signum
                self._reading.cancel()
                break
        await self._give_up_on_an_unread_stdout()  # a second signal has its default action

    async def _give_up_on_an_unread_stdout(self) -> None:
        """Stopping after a signal, the bridge still writes what it read and its answers: a
        conductor that no longer reads its stdout would keep it waiting for ever. Once a
        write has stood still for `stop_timeout`, the bridge stops without the rest."""
        def stuck_since() -> float | None:
            stdout = self.stdout  # None until the relay begins
            return stdout.moved if stdout is not None and stdout.waiting else None

        await stands_still(stuck_since, self.stop_timeout)
        log.warning("the conductor has not read the bridge's stdout for %gs after %s; not waiting for it",
                    self.stop_timeout, posix.signal_name(self.signal or 0))
        self.stopping.cancel()

    async def receive(self, stream: trio.abc.ReceiveStream) -> bytes:
        """The conductor's next bytes; b"" at its EOF, and once a signal has stopped the
        reading, so that both sides end as they do at its EOF, with all that was read
        before relayed (a read is stopped, never what it read)."""
        with trio.CancelScope() as self._reading:
            if self.signal is None:
                return await _receive(stream)
        return b""

    async def wait_gone(self) -> None:
        """Never before the successor's side ends: a signal ends it as the conductor's EOF
        does (the reading stops), and what it still writes goes on, to a slow conductor too
        (`listen` gives up on one that stopped reading). Cut off after the linger, a write
        in the middle of a line left it torn, with the answers after it."""
        await trio.sleep_forever()

    async def after_output_ends(self, bridge: Bridge) -> tuple[str, Any]:
        """The conductor's stream has ended (its EOF, or a signal stopped the reading), and
        the client's side ends with it: what it still has to pass on goes on whole before
        the requests in flight are answered (that gives up on the successor's side, which
        cut a long line short and left the requests after it unanswered)."""
        if self.client is not None:
            await self.client.end_torn_line()
        await bridge.client_closed.wait()
        if self.signal is not None:
            return f"acp-bridge received {posix.signal_name(self.signal)} before the successor answered", None
        return "the conductor closed the connection before the successor answered", None

    @property
    def status(self) -> int:
        """The exit status: 0, or 128+N after signal N, as a shell reports it."""
        return 0 if self.signal is None else 128 + self.signal


async def read_first_line(life: ConductorLife, stdin: trio.abc.ReceiveStream,
                          lines: LineSplitter) -> tuple[bytes | None, list[Any]]:
    """The conductor's first complete line and the pieces read after it; None and the
    pieces read when it is over the parse limit; None and nothing at EOF (or a signal)."""
    while True:
        chunk = await life.receive(stdin)
        pieces = lines.feed(chunk) if chunk else lines.feed_eof()
        if pieces:
            first = pieces[0]
            return (None, pieces) if isinstance(first, Opaque) else (first, pieces[1:])
        if not chunk:
            return None, []


async def serve_chain(config: Config, relay: Relay, stdio: trio.StapledStream[Any, Any],
                      open_observer: Callable[[Dialect], Any]) -> int:
    """Be a proxy under the conductor on `stdio` until it closes the connection.

    `open_observer(dialect)`: an async context manager giving the observer (the capture,
    health, telemetry) once the chain's dialect is known, for the capture's header."""
    life = ConductorLife()
    async with trio.open_nursery() as nursery:
        await nursery.start(life.listen)  # a signal from now on stops the bridge with 128+N
        status = await _serve(config, relay, stdio, open_observer, life)
        nursery.cancel_scope.cancel()
    return status


async def _serve(config: Config, relay: Relay, stdio: trio.StapledStream[Any, Any],
                 open_observer: Callable[[Dialect], Any], life: ConductorLife) -> int:
    max_line = config.relay.parse_limit_mib * 1024 * 1024
    lines = LineSplitter(max_line)
    first, rest = await read_first_line(life, stdio.receive_stream, lines)
    if life.signal is not None:  # before the first line: not by the signal's default action
        return life.status
    if first is None:
        log.error("%s", "no agent command, and stdin ended before a conductor's first message: give the agent's "
                  "command after `--` (acp-bridge run -- AGENT), or start it as a proxy under an ACP conductor"
                  if not rest else "the conductor's first message is over the parse limit: no proxy/initialize")
        return EXIT_NO_CHAIN
    decided = first_message(first)
    if isinstance(decided, Refusal):
        if decided.answer is not None:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):  # nobody reads: stderr says it
                await stdio.send_stream.send_all(decided.answer)
        log.error("%s", decided.reason)
        return EXIT_NO_CHAIN
    dialect, as_client = decided
    log.info("chain: a proxy in the %s dialect", dialect.name)
    link = ProxyLink.started(dialect, first, max_line)
    relay.as_chain_link(link.head)  # it reads a long line's head as the link does
    async with open_observer(dialect) as observer:
        await _relay(link, relay, stdio, as_client, rest, lines, observer, life)
    return life.status


async def _relay(link: ProxyLink, relay: Relay, stdio: trio.StapledStream[Any, Any], first: bytes,
                 rest: list[Any], lines: LineSplitter, observer: Observer | None, life: ConductorLife) -> None:
    stdout = life.stdout = Stdout(stdio.send_stream)
    to_client_tx, to_client_rx = trio.open_memory_channel[bytes](INBOX)
    to_agent_tx, to_agent_rx = trio.open_memory_channel[bytes](INBOX)
    client = life.client = ToClient(stdout, link, Inbox(to_client_rx))
    agent = ToSuccessor(stdout, link, Inbox(to_agent_rx), relay.max_line)
    senders = {FROM_CLIENT: to_client_tx, FROM_AGENT: to_agent_tx}

    async def route(pieces: list[Any]) -> None:
        # What one read holds goes to each side as one chunk per run of that side's lines
        # (its pump then takes the relay's bulk path), in the order it came: a pump in the
        # middle of a line holds the stdout until the line ends, so the rest of that line
        # must reach it before anything that waits for the stdout or for the other pump
        # (an answer of the link's own, a send to an inbox that pump left full).
        run: list[bytes] = []
        side = FROM_CLIENT
        for piece in pieces:
            for where, data in link.from_conductor(piece):
                if not data:
                    continue
                if where != side and run:
                    await send(side, run)
                    run = []
                if where == CONDUCTOR:
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):  # it stopped reading
                        await stdout.write("link", data, ends_line=True)
                else:
                    side = where
                    run.append(data)
        if run:
            await send(side, run)

    async def send(where: str, run: list[bytes]) -> None:
        try:
            await senders[where].send(b"".join(run))
        except trio.BrokenResourceError:
            pass  # that side is no longer read (a signal stopped the bridge): nothing waits for it

    async def read_conductor() -> None:
        async with to_client_tx, to_agent_tx:
            await to_client_tx.send(first)
            await route(rest)
            while chunk := await life.receive(stdio.receive_stream):
                await route(lines.feed(chunk))
            await route(lines.feed_eof())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_conductor)
        with life.stopping:
            await bridge_streams(client, agent, relay, observer, life)
        nursery.cancel_scope.cancel()


async def _receive(stream: trio.abc.ReceiveStream) -> bytes:
    try:
        return bytes(await stream.receive_some(READ_SIZE))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b""
