"""The trio shell around the relay: one pump per direction, one way into each stream.

Owns: reading from the client and the agent, feeding the relay, writing what it returns to
the right stream, end-of-stream handling, and handing every Forward to the observers (the
capture file first) before it is sent.
Must never: interpret messages (that is the core's job) or write anything to the client
that did not come out of the relay.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from trio.abc import HalfCloseableStream, ReceiveStream

from acp_bridge.core import Direction, Forward, Relay, Verdict
from acp_bridge.core.chain import RuleError
from acp_bridge.core.lines import Opaque
from acp_bridge.core.messages import TO_AGENT
from acp_bridge.core.rewrites import stray_output
from acp_bridge.core.rewrites.suggestions import stated_list_key
from acp_bridge.errors import BridgeError
from acp_bridge.shell import posix
from acp_bridge.shell.forward_log import log_forwards
from acp_bridge.shell.streams import Outlet, Reader

if TYPE_CHECKING:
    from acp_bridge.shell.observers import Observer

log = logging.getLogger("acp_bridge.shell.bridge")

READ_SIZE = 1024 * 1024  # matches the pipe size the bridge asks for
# Seconds to wait for the agent's output to end once it is gone, and for the client pump to
# read what the client had already written; at most the grace period (`AgentLife.linger`).
LINGER = 1.0
STOP_TIMEOUT = 5.0  # ... and for the client to take the answers when the bridge stops itself
# The most the bridge reads of what the client had written when it stops on a client line:
# the pipe size it asks for (a client still writing is not waited for).
UNREAD_LIMIT = 1024 * 1024
# The longest the bridge waits for a pump to read what its source had already written when
# it is held back (a busy machine): past the linger, only while there are bytes to read.
DRAIN_LIMIT = 5.0

_STRAY_VERDICTS = stray_output.VERDICTS


def answered(forwards: Sequence[Forward]) -> int:
    """How many requests `fail_pending`'s forwards answer (a rule may send updates ahead)."""
    return sum(1 for fwd in forwards if fwd.request is not None)


@dataclass
class Bridge:
    """Both pumps of one connection, with the relay between them."""

    relay: Relay
    to_agent: Outlet
    to_client: Outlet
    observer: Observer | None = None  # the capture file, or every observer (`observers.Observers`)
    on_agent_output: Callable[[], None] | None = None  # called whenever the agent writes
    client_closed: trio.Event = field(default_factory=trio.Event)
    agent_closed: trio.Event = field(default_factory=trio.Event)
    background: trio.Nursery | None = None  # where writes for the other side run
    readers: dict[Direction, Reader] = field(default_factory=dict)
    stopped: str | None = None  # why the bridge stops itself (`stop`); nothing is sent after
    client_mid_line: bool = False  # the last bytes queued toward the client end inside a line
    linger: float = LINGER  # the agent's (`AgentLife.linger`)

    # Where a diverted line of the agent's stdout goes (`[relay] stray_output = "stderr"`),
    # as the text `StrayOutput.said` makes of it; None: the log, as a warning.
    on_stray: Callable[[str], None] | None = None

    def outlet(self, direction: Direction) -> Outlet:
        return self.to_agent if direction is Direction.TO_AGENT else self.to_client

    async def deliver(self, forwards: Sequence[Forward], wall: float, mono: float,
                      *, pump: Direction | None = None, just_waited: bool = False) -> None:
        """Queue each forward's bytes on its destination, in order, then write them.

        `pump`: the direction of the pump that calls; what it has for its own destination is
        written before it returns (backpressure), what it has for the other side is left to
        a background task (see `Outlet`). Without `pump`, everything is written before
        returning. `just_waited`: see `Outlet.flush`.
        """
        if self.stopped is not None:  # the client has had its answers: the bridge is going
            await trio.sleep_forever()  # until the task that stopped it has raised
        if self.observer is not None and forwards:
            # On disk before anything is sent: a SIGKILL loses at most what was not yet read.
            try:
                self.observer.record(wall, mono, forwards)
            except BridgeError as exc:  # CaptureError: a required capture cannot be written
                await self.stop(str(exc), forwards)
                raise
        to_agent, to_client = self._queue(forwards, pump)
        others = bool(to_agent or to_client) if pump is None else bool(to_client if pump is TO_AGENT else to_agent)
        if pump is not None:
            await self.outlet(pump).flush(just_waited=just_waited)
        if others:
            for outlet in (self.to_agent, self.to_client):
                if pump is not None and outlet is self.outlet(pump):
                    continue
                if pump is not None and self.background is not None:
                    outlet.flush_soon(self.background)
                else:
                    await outlet.flush()
        if log.isEnabledFor(logging.INFO):
            log_forwards(forwards)

    def _queue(self, forwards: Sequence[Forward], pump: Direction | None = None) -> tuple[list[bytes], list[bytes]]:
        """Queue each forward's bytes on its destination; return what went to each. `pump`:
        as for `deliver` (what the client's pump queues toward the client is coalesced)."""
        # Each destination's data in the relay's order, queued at once: no await comes
        # between, so nothing the other pump queues can land in the middle. (One `put` per
        # forward cost an Enum lookup and two calls for every parsed line.)
        to_agent: list[bytes] = []
        to_client: list[bytes] = []
        for fwd in forwards:
            if fwd.verdict in _STRAY_VERDICTS:
                self._stray(fwd)
            if fwd.data:
                (to_agent if fwd.direction is TO_AGENT else to_client).append(fwd.data)
        if to_agent:
            self.to_agent.put_all(to_agent)
        if to_client:
            if pump is TO_AGENT:
                # Written in the background, maybe toward a client that reads nothing: a
                # later statement of a session's suggestions replaces one still unsent.
                self.to_client.put_keyed([(fwd.data, stated_list_key(fwd)) for fwd in forwards
                                          if fwd.data and fwd.direction is not TO_AGENT])
            else:
                self.to_client.put_all(to_client)
            self.client_mid_line = not to_client[-1].endswith(b"\n")
        return to_agent, to_client

    def _stray(self, fwd: Forward) -> None:
        """Say what the relay's stray-output repair has to say of `fwd` (a diverted line goes
        to `on_stray`), if anything."""
        said = self.relay.stray.said(fwd)
        if said is None:
            return
        diverted, text = said
        if diverted and self.on_stray is not None:
            self.on_stray(text)
        else:
            log.warning("%s", text)

    async def pump(self, source: ReceiveStream, direction: Direction, *, close: bool = True) -> None:
        """Move bytes travelling `direction` from `source` through the relay until EOF.

        With `close`, the destination is half-closed afterwards; without it the caller does
        that, after it has written whatever must still go out (answers to pending requests).
        """
        done = self.client_closed if direction is Direction.TO_AGENT else self.agent_closed
        reader = self.readers[direction] = Reader(source)
        try:
            while True:
                try:
                    chunk = await reader.receive(READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    chunk = b""
                wall, mono = time.time(), time.monotonic()
                if direction is Direction.TO_CLIENT and self.on_agent_output is not None:
                    self.on_agent_output()
                if not isinstance(chunk, bytes):  # FdStream gives bytes; other streams may not
                    chunk = bytes(chunk)
                try:
                    forwards = (self.relay.feed(direction, chunk, mono) if chunk
                                else self.relay.feed_eof(direction, mono))
                except Exception as exc:  # under strict, a rule failed (the relay fails open otherwise)
                    if isinstance(exc, RuleError):  # it names the rule and what it raised
                        # The read's lines before the failing one go out first, as they
                        # would have one line at a time; the client's requests after it
                        # are answered as the bridge stops.
                        await self.stop(f"{exc} (strict is set)", sent_first=exc.sent_first,
                                        rest=exc.rest if direction is TO_AGENT else None)
                    else:
                        await self.stop(f"internal error: {type(exc).__name__}: {exc}")
                    raise
                await self.deliver(forwards, wall, mono, pump=direction, just_waited=bool(chunk) and reader.waited)
                if not chunk:
                    break
        finally:
            done.set()
            reader.wake()
        if close:
            await self.outlet(direction).send_eof()

    async def answer_in_flight(self, message: str, data: Any) -> None:
        """The agent is gone: answer every client request in flight with an error, including
        what the client wrote and the bridge has not read yet (its pump may have been
        blocked writing to the agent), and every later one."""
        await self.to_agent.abandon()
        await self.wait_input_drained(Direction.TO_AGENT, self.linger)
        forwards = self.relay.fail_pending(message, data)
        if forwards:
            log.warning("%s: answered %d request(s) left in flight", message, answered(forwards))
            await self.deliver(forwards, time.time(), time.monotonic())

    async def stop(self, why: str, unsent: Sequence[Forward] = (), *, sent_first: Sequence[Forward] = (),
                   rest: Sequence[bytes | Opaque] | None = None) -> None:
        """The bridge stops itself (a required capture failed, a rule failed under strict):
        answer every client request in flight with `why`, as for a gone agent, before the
        caller raises. `unsent`: the forwards that made it stop, not sent. `sent_first`:
        forwards to send (and record) ahead of the answers, the lines the read that made
        it stop held before the failing one; unsent if they cannot be recorded. `rest`: the
        client's lines that read held after the failing one (None: the bridge did not stop on
        a client line): none is sent, and each request among them is answered too
        (`Relay.refuse_rest`), after those in flight; so is each in what the client had
        written and the bridge had not read yet (`_refuse_unread`). All of it
        is offered to each side for `STOP_TIMEOUT` at most. Nothing else reaches either side
        after this; once only."""
        if self.stopped is not None:
            return
        self.stopped = why
        if sent_first and self.observer is not None:
            try:
                self.observer.record(time.time(), time.monotonic(), sent_first)
            except BridgeError:  # a required capture: what it cannot record is not sent
                unsent, sent_first = [*sent_first, *unsent], ()
        to_agent, _ = self._queue(sent_first)
        answers = self.relay.fail_pending(f"acp-bridge stopped before the agent answered: {why}",
                                          unsent=unsent, cut=self.client_mid_line)
        count = answered(answers)
        if rest is not None:
            refused = self.relay.refuse_rest(rest, time.monotonic()) + self._refuse_unread()
            count += sum(1 for fwd in refused if fwd.verdict is Verdict.EMIT)
            answers += refused
        if answers:
            log.warning("stopping: answered %d client request(s) left in flight", count)
            if self.observer is not None:
                try:
                    self.observer.record(time.time(), time.monotonic(), answers)
                except BridgeError:  # the bridge is stopping for that already: answer anyway
                    pass
            self.to_client.put_all([answer.data for answer in answers])
        elif not sent_first:
            return
        with trio.move_on_after(STOP_TIMEOUT):
            await self.to_client.flush()
        if to_agent:
            with trio.move_on_after(STOP_TIMEOUT):
                await self.to_agent.flush()

    def _refuse_unread(self) -> list[Forward]:
        """The bridge stops on a client line: read what the client had written and the
        bridge had not read yet (what comes without waiting, UNREAD_LIMIT bytes at most: a
        pipe's worth; only a file descriptor can tell), and answer each request in it. The
        pump that stopped is the one that reads the client: nothing else reads it meanwhile."""
        reader = self.readers.get(TO_AGENT)
        if reader is None or reader.fd is None:
            return []
        refused: list[Forward] = []
        left = UNREAD_LIMIT
        while left > 0:
            try:
                chunk = posix.read_nowait(reader.fd, min(READ_SIZE, left))
            except OSError:  # closed under us or broken: the end of what there is
                break
            if chunk is None:  # all that was written has been read
                break
            refused += self.relay.refuse_unread(chunk, time.monotonic())
            if not chunk:
                break
            left -= len(chunk)
        return refused

    async def wait_input_drained(self, direction: Direction, timeout: float) -> None:
        """Wait until the pump reading `direction` has read all that its source had written
        so far (it waits for more, or has reached EOF), or `timeout` has passed.

        Used before answering for a gone agent, so that requests already written by the
        client, but not yet read, are answered too. Only a pump reading a file descriptor
        can tell; for other streams this returns at once.
        """
        reader = self.readers.get(direction)
        done = self.client_closed if direction is Direction.TO_AGENT else self.agent_closed
        if reader is None or reader.fd is None or done.is_set() or reader.blocked:
            return
        event = trio.Event()
        reader.on_block = event.set
        give_up = trio.current_time() + max(timeout, DRAIN_LIMIT)
        try:
            while True:
                with trio.move_on_after(timeout):
                    await event.wait()
                    return
                # Bytes the source wrote before are still unread: the pump was held back
                # (a busy machine can keep it from running for that long); wait on for
                # them, as long as there are some, up to DRAIN_LIMIT.
                if trio.current_time() >= give_up or not posix.has_input(reader.fd):
                    return
        finally:
            reader.on_block = None


class AgentLife:
    """What the wiring needs to know about the agent beyond its two streams: the tasks
    that run beside it, when it is gone, and what the end of its output means. This base
    is a bare stream (tests, replay): nothing runs beside it, it is gone when its output
    ends, and requests still in flight then are answered as unanswerable. `AgentProcess`
    (shell/agent.py) is the real agent: a process that can exit while its stdout stays open, with signals,
    a stop ladder and an exit status."""

    linger = LINGER  # how long to wait for what a gone agent may still have in its pipes

    async def start_tasks(self, bridge: Bridge, nursery: trio.Nursery) -> None:
        """Start what runs beside the two pumps (in `nursery`, cancelled at the end)."""

    async def wait_gone(self) -> None:
        """Return once the agent is gone even if its output is still open."""
        await trio.sleep_forever()

    async def after_output_ends(self, bridge: Bridge) -> tuple[str, Any]:
        """Its output has ended: settle its fate; return the error message and data with
        which the bridge answers the requests still in flight."""
        return "agent closed its output before answering", None


async def bridge_streams(
    client: HalfCloseableStream,
    agent: HalfCloseableStream,
    relay: Relay,
    observer: Observer | None = None,
    life: AgentLife | None = None,
    on_stray: Callable[[str], None] | None = None,
) -> Bridge:
    """Relay between the client and the agent until the agent side has ended; the one wiring
    of both pumps, for the real agent process and for any pair of streams.

    Client EOF half-closes the agent's input and keeps the agent's output flowing. When the
    agent's output ends (or the agent is gone and its output stays open: `life.wait_gone`),
    every client request still in flight is answered with an error (`life.after_output_ends`
    says which), the client's side is closed, and the client is no longer read.
    """
    life = life if life is not None else AgentLife()
    bridge = Bridge(relay, Outlet(agent, "agent"), Outlet(client, "client"), observer, linger=life.linger,
                    on_stray=on_stray)
    async with trio.open_nursery() as nursery:
        bridge.background = nursery
        nursery.start_soon(bridge.pump, client, Direction.TO_AGENT)
        await life.start_tasks(bridge, nursery)
        if not await _read_agent(bridge, agent, life):
            # The agent is gone but its output stayed open: something it started holds the
            # pipe. Nothing more is waited for; a line it left torn goes on as it is.
            log.warning("agent exited but its stdout stayed open (a process it started "
                        "holds it); not waiting for it")
            await bridge.deliver(relay.feed_eof(Direction.TO_CLIENT, time.monotonic()),
                                 time.time(), time.monotonic())
        message, data = await life.after_output_ends(bridge)
        await bridge.answer_in_flight(message, data)
        await bridge.to_client.send_eof()
        nursery.cancel_scope.cancel()
    return bridge


async def _read_agent(bridge: Bridge, agent: ReceiveStream, life: AgentLife) -> bool:
    """Relay the agent's output until its EOF (True), or until the agent is gone and its
    output has stayed open and silent for `life.linger` (False: reading stops). Silent
    means no bytes to read: a pump still writing to a slow client is not silent."""
    async with trio.open_nursery() as nursery:
        async def gone() -> None:
            await life.wait_gone()
            while True:
                await bridge.wait_input_drained(Direction.TO_CLIENT, math.inf)
                reader = bridge.readers.get(Direction.TO_CLIENT)
                reads = reader.reads if reader is not None else 0
                await trio.sleep(life.linger)  # a timeout, not an ordering: its last output
                if reader is None or reader.fd is None or (reader.blocked and reader.reads == reads):
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(gone)
        await bridge.pump(agent, Direction.TO_CLIENT, close=False)
        nursery.cancel_scope.cancel()
        return True
    return False
