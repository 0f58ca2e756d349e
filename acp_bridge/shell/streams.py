"""Stream plumbing for the trio shell: one ordered way into each stream, and reads that
know whether they had to wait.

Owns: `Outlet` (the write queue of one destination, its lock, the direct write when the
pipe has room, a queued piece replaced by a later one of the same key, end of stream,
abandoning a reader that is gone) and `Reader` (reading a source, straight from its file
descriptor when there is data). Must never: look at the bytes it moves (the core says which
pieces replace which, `core/rewrites/suggestions.py` `stated_list_key`).

Also `stands_still`: how a stopping bridge tells a reader that no longer reads (its write
has waited too long), the same in front of an agent and in a proxy chain.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence

import trio
from trio.abc import HalfCloseableStream, ReceiveStream, SendStream

from acp_bridge.shell import posix

log = logging.getLogger("acp_bridge.shell.bridge")


class Outlet:
    """The single way into one destination stream: writes in the order the relay decided
    them, and an explicit end of stream.

    Data is queued with `put` the moment the relay returns it (no await in between), so the
    queue's order is the order of the relay's decisions even when both pumps write here;
    `flush` writes the queue. The pump that owns this direction flushes and waits, which is
    what carries backpressure to the side it reads; the other pump only queues what it has
    for here (a withdrawal, an answer) and leaves the write to a background task, so that a
    reader who stalls on one side never stalls the traffic going the other way. What the
    other pump queues toward a reader that has stopped is bounded where it could grow: a
    piece put with a key replaces a queued, unsent one of the same key (`put_keyed`).
    """

    def __init__(self, stream: SendStream, name: str) -> None:
        self.stream = stream
        self.name = name
        self.broken = False  # the reader went away; later writes are dropped
        self._lock = trio.StrictFIFOLock()
        self._queue: list[bytes] = []
        self._keyed: dict[Hashable, int] = {}  # key -> where its piece is in the queue
        self._replaced = 0  # pieces emptied in the queue by a later one of their key
        self._closed = False
        self._flushing_soon = False
        self.stuck_since: float | None = None  # trio time: since when the write under way has waited
        target = stream.send_stream if isinstance(stream, trio.StapledStream) else stream
        self._fd = posix.fd_of(target)

    def __repr__(self) -> str:
        return f"<Outlet {self.name} queued={len(self._queue)} broken={self.broken} closed={self._closed}>"

    def put(self, data: bytes) -> None:
        """Queue `data` behind everything queued before it (never blocks)."""
        if data and not self.broken and not self._closed:
            self._queue.append(data)

    def put_all(self, pieces: list[bytes]) -> None:
        """`put` each of `pieces` (none of them empty), in order."""
        if not self.broken and not self._closed:
            self._queue.extend(pieces)

    def put_keyed(self, pieces: Sequence[tuple[bytes, Hashable | None]]) -> None:
        """`put_all`, where a piece with a key (not None) replaces the piece of the same key
        still queued: that one is not sent, and this one goes last, in its own place."""
        if self.broken or self._closed:
            return
        queue, keyed = self._queue, self._keyed
        for data, key in pieces:
            if key is not None:
                at = keyed.get(key)
                if at is not None:
                    queue[at] = b""
                    self._replaced += 1
                keyed[key] = len(queue)
            queue.append(data)
        if self._replaced > 64 and self._replaced * 2 > len(queue):  # the emptied places, let go
            kept = [(data, key) for data, key in zip(queue, self._keys_by_place(), strict=True) if data]
            self._queue, self._keyed, self._replaced = [data for data, _ in kept], {}, 0
            for at, (_, key) in enumerate(kept):
                if key is not None:
                    self._keyed[key] = at

    def _keys_by_place(self) -> list[Hashable | None]:
        places: list[Hashable | None] = [None] * len(self._queue)
        for key, at in self._keyed.items():
            places[at] = key
        return places

    @property
    def queued(self) -> int:
        """Bytes waiting to be written."""
        return sum(map(len, self._queue))

    async def flush(self, *, just_waited: bool = False) -> None:
        """Write everything queued, in order (including what is queued while writing).

        `just_waited`: the caller has just been through the scheduler (it waited for its
        input), so the write may go straight to the file descriptor when the pipe has room,
        without `send_all`'s own pass through the scheduler; this halves the passes per
        message, which shows in the round-trip latency. A pump that did not wait always goes
        through `send_all`, so no task can starve the others.
        """
        if not self._queue:
            return
        # Uncontended (the usual case), take the lock without the extra trip through the
        # scheduler that `async with` costs: it shows in the per-message latency.
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            await self._write_queue(just_waited)
        finally:
            self._lock.release()

    def flush_soon(self, nursery: trio.Nursery) -> None:
        """Have the queue written by a background task, without waiting for it."""
        if self._queue and not self._flushing_soon:
            self._flushing_soon = True
            nursery.start_soon(self._flush_in_background)

    async def _flush_in_background(self) -> None:
        try:
            await self.flush()
        finally:
            self._flushing_soon = False

    async def _write_queue(self, just_waited: bool) -> None:
        while self._queue:
            data = self._queue[0] if len(self._queue) == 1 else b"".join(self._queue)
            self._queue.clear()
            if self._keyed:  # what is being written can no longer be replaced
                self._keyed.clear()
            self._replaced = 0
            if self.broken or self._closed:
                return
            try:
                if just_waited and self._fd is not None:
                    just_waited = False
                    data = self._write_nowait(data)
                    if not data:
                        continue
                self.stuck_since = trio.current_time()
                try:
                    await self.stream.send_all(data)
                finally:
                    self.stuck_since = None
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                # The reader is gone; that ends this direction, it is not a crash.
                self.broken = True
                self._queue.clear()
                log.debug("%s: reader went away", self.name)

    def _write_nowait(self, data: bytes) -> bytes:
        """Write what the pipe takes at once; return the rest."""
        assert self._fd is not None
        try:
            written = posix.write_nowait(self._fd, data)
        except OSError as exc:  # EPIPE, EBADF: the reader is gone
            raise trio.BrokenResourceError(str(exc)) from exc
        return data[written:]

    async def abandon(self) -> None:
        """The reader is gone for good (the agent): drop what is queued and close the
        stream, which also ends a write blocked on it (the pump that made it reads on)."""
        self.broken = True
        self._queue.clear()
        self._keyed.clear()
        self._closed = True
        with trio.CancelScope(shield=True):
            try:
                await self.stream.aclose()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    async def send_eof(self) -> None:
        """Write what is queued, then end the stream."""
        async with self._lock:
            if self._closed:
                return
            await self._write_queue(False)
            self._closed = True
            try:
                if isinstance(self.stream, HalfCloseableStream):
                    await self.stream.send_eof()
                else:
                    await self.stream.aclose()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass


class Reader:
    """How a pump reads its source, and whether the last read went through the scheduler.

    `FdStream.receive_some` passes through the scheduler before every read, which shows in
    the per-message latency. Reading the file descriptor first and waiting only when it is
    empty is just as correct here: a read that did not wait is followed by a write through
    `send_all`, which does pass through the scheduler (see `Outlet.flush`).
    """

    def __init__(self, stream: ReceiveStream) -> None:
        if isinstance(stream, trio.StapledStream):
            stream = stream.receive_stream
        self.stream = stream
        self.fd = posix.fd_of(stream)
        self.waited = True  # receive_some always passes through the scheduler
        self.blocked = False  # waiting for input: everything written so far has been read
        self.reads = 0  # reads that returned data (file descriptors only)
        self.on_block: Callable[[], None] | None = None

    def wake(self) -> None:
        if self.on_block is not None:
            self.on_block()

    async def receive(self, max_bytes: int) -> bytes | bytearray:
        if self.fd is None:
            return await self.stream.receive_some(max_bytes)
        self.waited = False
        while True:
            try:
                data = posix.read_nowait(self.fd, max_bytes)
            except OSError as exc:  # closed under us (EBADF) or broken: the end of input
                raise trio.BrokenResourceError(str(exc)) from exc
            if data is not None:
                self.reads += 1
                return data
            self.waited = self.blocked = True
            self.wake()
            try:
                await posix.wait_readable(self.fd)
            finally:
                self.blocked = False


async def stands_still(stuck_since: Callable[[], float | None], timeout: float) -> None:
    """Return once a write has waited `timeout` without going through, counted from this
    call at the earliest (a write stuck before it has as long as any): `stuck_since()` is
    when the write under way began to wait (trio time), None while none waits. Used only
    once the bridge has been told to stop: a reader that stops reading for a while is
    otherwise only slow (a pager), and waited for."""
    begun = trio.current_time()
    while True:
        since = stuck_since()
        if since is None:
            await trio.sleep(timeout / 2)  # nothing waits now: look again (a period, not an ordering)
            continue
        deadline = max(begun, since) + timeout
        if trio.current_time() >= deadline:
            return
        await trio.sleep_until(deadline)
