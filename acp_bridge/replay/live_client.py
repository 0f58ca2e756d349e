"""The live client of a replay: the stream to the editor, read at all times.

Owns: reading the live client's lines at all times (requests queued in order, answers to
the agent's requests handed to whoever waits for them, notifications consumed, and any other
line answered with a JSON-RPC error), the wait for the client's answer to one agent request,
the buffer of lines going back to the client and its flush, and reporting on stderr (via
`report`, once per kind). What is served is `server`'s.
Must never: hang (a wait for the client's answer to an agent request ends when the client
sends another request or a stray answer instead, reported as a divergence), or interpret more
of a client line than its kind and id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from acp_bridge.core import shapes as read
from acp_bridge.core.id_scanner import MemberScanner
from acp_bridge.core.lines import MIB, LineSplitter, Opaque
from acp_bridge.core.literals import written_id
from acp_bridge.core.messages import Direction, Frame, Kind, classify, id_key
from acp_bridge.replay.script import AwaitAnswer
from acp_bridge.replay.wire import invalid_answer, show_json, too_long_answer, valid_id

MAX_LINE = 64 * MIB  # the longest client line read; a longer one is scanned for its id only
QUEUE_MAX = 1024  # live requests held while the replay is busy serving (the reader pauses
# then; never while an answer is awaited: a queued request ends that wait)
UNREAD = b"\0"  # an answer too long to read: it came, but cannot be compared


@dataclass(frozen=True, slots=True)
class Live:
    """A live client request: `id_out` is its id as written back (a Fragment for a number
    orjson would write otherwise)."""

    method: str
    session: Any
    id: Any
    id_out: Any


class LiveClient:
    """The client's side of `stream`: `_read()` takes its lines, `_next()` gives its
    requests in order, `_wait_answer()` its answer to one agent request."""

    def __init__(self, stream: trio.abc.HalfCloseableStream, report: Callable[[str], None], *,
                 max_line: int = MAX_LINE) -> None:
        self.stream = stream
        self.report = report
        self.max_line = max_line
        self.answers: dict[Any, bytes] = {}
        self.sent_requests: set[Any] = set()
        self.abandoned: set[Any] = set()  # agent requests whose answer is no longer awaited
        self.client_done = False
        self.unanswered = 0  # agent requests the client went on without answering
        self._reported: set[tuple[Any, ...]] = set()
        self._out = bytearray()
        self._queue: deque[Live | bytes] = deque()  # requests, and errors for lines already judged
        self._awaiting: Any = None  # the id key of the agent request whose answer is awaited
        self._stray: Any = None  # an answer to no request the replay sent, while one is awaited
        self._changed = trio.Event()

    def _failed(self) -> bool:
        """The replay is to end (the server's --strict)."""
        return False

    def _notified(self, method: Any, session: Any) -> None:
        """The client sent a notification (the server compares it with the recording)."""

    def _poke(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _next(self) -> Live | bytes | None:
        while not self._queue:
            if self.client_done or self._failed():
                return None
            await self._changed.wait()
        item = self._queue.popleft()
        self._poke()  # room for the reader
        return item

    async def _read(self) -> None:
        splitter = LineSplitter(self.max_line)
        scanner: MemberScanner | None = None
        try:
            while chunk := await self.stream.receive_some(1 << 20):
                for piece in splitter.feed(bytes(chunk)):
                    scanner = await self._piece(piece, scanner)
            for piece in splitter.feed_eof():
                scanner = await self._piece(piece, scanner)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.client_done = True
            self._poke()

    async def _piece(self, piece: bytes | Opaque, scanner: MemberScanner | None) -> MemberScanner | None:
        if isinstance(piece, bytes):
            await self._take(classify(Direction.TO_AGENT, piece))
            return None
        scanner = scanner or MemberScanner()
        scanner.feed(piece.data)
        if piece.end:
            await self._take_long(scanner.finish() if piece.data.endswith(b"\n") else [])
            return None
        return scanner

    async def _queue_item(self, item: Live | bytes) -> None:
        # Held back only while the replay is not waiting for the client: a wait ends when
        # something new arrives, so the client is always read while one is on.
        while len(self._queue) >= QUEUE_MAX and self._awaiting is None and not self.client_done:
            await self._changed.wait()
        self._queue.append(item)
        self._poke()

    async def _take(self, frame: Frame) -> None:
        msg = frame.msg
        if frame.kind is Kind.REQUEST and msg is not None and valid_id(frame.id):
            session = read.session_id_of(msg)
            await self._queue_item(Live(msg["method"], session, frame.id, written_id(frame.raw, frame.id)))
        elif frame.kind is Kind.RESPONSE or (msg is not None and "method" not in msg
                                             and id_key(msg.get("id")) in self.sent_requests):
            self._answered(id_key(frame.id), frame.raw, frame.id)
        elif frame.kind is Kind.NOTIFICATION:
            # session/cancel: consumed; the recording says what followed it
            self._notified(frame.method, None if msg is None else read.session_id_of(msg))
        elif frame.raw.endswith(b"\n"):  # (a torn last line: the client is gone, nobody to answer)
            answer, what = invalid_answer(frame)
            self._once(("invalid", what), f"the client sent {what}; answered with a JSON-RPC error")
            if answer is not None:
                await self._queue_item(answer)

    async def _take_long(self, found: list[Any]) -> None:
        """A line over `max_line`: answered with an error if it was a request, taken as an
        answer that cannot be compared if it answered one of the replay's."""
        limit = self.max_line // MIB
        for members in found:
            if members.is_response:
                try:
                    key = id_key(members.value("id"))
                except ValueError:
                    continue
                if key in self.sent_requests:
                    self._answered(key, UNREAD, None)
        answer = too_long_answer(found, limit)
        if answer is not None:
            self._once(("long",), f"the client sent a request longer than {limit} MiB; answered with a "
                                  "JSON-RPC error")
            await self._queue_item(answer)
        elif not any(m.is_response for m in found):
            self._once(("long-other",), f"the client sent a line longer than {limit} MiB that is not a "
                                        "request; ignored")

    def _answered(self, key: Any, line: bytes, id_: Any) -> None:
        if key in self.sent_requests:
            self.answers[key] = line
            self._poke()
        elif key in self.abandoned:
            self.abandoned.discard(key)  # a late answer: the divergence was reported already
        elif self._awaiting is not None:
            self._stray = id_
            self._poke()
        else:
            self._once(("unasked",), "the client answered a request the replay did not send; ignored")

    async def _wait_answer(self, step: AwaitAnswer) -> bytes | None:
        """The client's answer to the agent request `step` awaits; None when the client
        left, or went on without answering (a divergence, reported)."""
        key = step.key
        self._awaiting = key
        self._poke()  # the reader may go on past a full queue
        try:
            while key not in self.answers:
                if self.client_done:
                    return None
                while self._queue and isinstance(head := self._queue[0], bytes):  # errors for bad lines:
                    self._out += head  # not requests the recording answers, so sent now
                    self._queue.popleft()
                if self._out:
                    self._poke()  # room for the reader
                    await self._flush()
                    continue
                # A request waiting to be served (sent before or after the agent request: the
                # recorded client answered first) or a stray answer: the client went on.
                if self._queue or self._stray is not None:
                    self._unanswered(step)
                    return None
                await self._changed.wait()
            return self.answers.pop(key)
        finally:
            self._awaiting = self._stray = None

    def _unanswered(self, step: AwaitAnswer) -> None:
        self.unanswered += 1
        self.abandoned.add(step.key)
        what = (f"answered id {show_json(self._stray)}, which the replay did not send," if self._stray is not None
                else "sent another request")
        self._once(("unanswered", step.method), f"divergence: the client {what} before answering the replay's "
                   f"{step.method or 'request'}; going on without its answer")

    async def _flush(self) -> None:
        if self._out:
            data, self._out = bytes(self._out), bytearray()
            await self.stream.send_all(data)

    def _once(self, key: tuple[Any, ...], text: str) -> None:
        if key not in self._reported and len(self._reported) < 10_000:
            self._reported.add(key)
            self.report(text)
