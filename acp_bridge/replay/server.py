"""The replay server: an exchange script served on a stream as the agent side of ACP.

Owns: reading the live client's lines at all times (requests queued in order, answers to
the agent's requests handed to whoever waits for them, notifications consumed, and any other
line answered with a JSON-RPC error), serving each matched request's segment (ids made the
live ones, as the client wrote them; the recorded gaps with `timing="recorded"`), answering
a request the recording has no counterpart for with a JSON-RPC error naming what it
expected next, and reporting on stderr (via `report`, once per kind).
Must never: hang (every request gets an answer: a wait for the client's answer to an agent
request ends when the client sends another request or a stray answer instead, reported as a
divergence), write anything but protocol lines to the stream, or interpret more of a recorded
line than its id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import trio

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.id_scanner import MemberScanner
from acp_bridge.core.lines import MIB, LineSplitter, Opaque
from acp_bridge.core.literals import splice_id, written_id
from acp_bridge.core.messages import Direction, Frame, Kind, Unencodable, classify, encode, id_key
from acp_bridge.replay.diff import compact_diff, showable, without_id
from acp_bridge.replay.script import AwaitAnswer, Matcher, RecordedRequest, Script, Send, Step
from acp_bridge.replay.wire import (
    error_line,
    invalid_answer,
    show,
    show_json,
    too_long_answer,
    valid_id,
)

EXIT_DIVERGED = 1
MAX_LINE = 64 * MIB  # the longest client line read; a longer one is scanned for its id only
QUEUE_MAX = 1024  # live requests held while the replay is busy serving (the reader pauses
# then; never while an answer is awaited: a queued request ends that wait)
_UNREAD = b"\0"  # an answer too long to read: it came, but cannot be compared


@dataclass(frozen=True)
class ReplayOptions:
    timing: str = "fast"  # "fast": as fast as causality allows; "recorded": the recorded gaps
    max_gap: float = 2.0  # seconds: the longest recorded gap kept
    strict: bool = False  # the first divergence ends the replay (exit 1)


@dataclass(frozen=True, slots=True)
class Live:
    """A live client request: `id_out` is its id as written back (a Fragment for a number
    orjson would write otherwise)."""

    method: str
    session: Any
    id: Any
    id_out: Any


class ReplayServer:
    """Serve `script` to the client on `stream`; `run()` returns the exit status."""

    def __init__(self, script: Script, options: ReplayOptions, stream: trio.abc.HalfCloseableStream,
                 report: Callable[[str], None], *, max_line: int = MAX_LINE) -> None:
        self.script = script
        self.options = options
        self.stream = stream
        self.report = report
        self.max_line = max_line
        self.matcher = Matcher(script.requests)
        self.live: dict[int, Live] = {}  # recorded request index -> the live request it answers
        self.served: set[int] = set()  # recorded requests whose answer has gone out
        self.answers: dict[Any, bytes] = {}
        self.sent_requests: set[Any] = set()
        self.abandoned: set[Any] = set()  # agent requests whose answer is no longer awaited
        self.client_done = False
        self.divergences = 0  # live requests with no recorded counterpart
        self.unanswered = 0  # agent requests the client went on without answering
        self.mismatches = 0
        self._reported: set[tuple[Any, ...]] = set()
        self._out = bytearray()
        self._queue: deque[Live | bytes] = deque()  # requests, and errors for lines already judged
        self._awaiting: Any = None  # the id key of the agent request whose answer is awaited
        self._stray: Any = None  # an answer to no request the replay sent, while one is awaited
        self._changed = trio.Event()

    def __repr__(self) -> str:
        return (f"<ReplayServer requests={len(self.script.requests)} divergences={self.divergences} "
                f"unanswered={self.unanswered} client_done={self.client_done}>")

    def _poke(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def run(self) -> int:
        status = 0
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read)
                await self._serve(self.script.opening, self.script.opening_mono)
                while not self._failed():
                    item = await self._next()
                    if item is None:
                        break
                    if isinstance(item, bytes):
                        self._out += item
                        await self._flush()
                    else:
                        await self._answer(item)
                if self._failed():
                    status = EXIT_DIVERGED
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away: nobody is left to serve
        return status

    def summary(self) -> list[str]:
        """The report's last lines, once `run()` is done: what diverged, in numbers (said
        after every other report line, however many of those were left out)."""
        lines = []
        if not self.options.strict:  # with --strict, the first divergence was the end
            if self.divergences:
                lines.append(f"{self.divergences} request{'s' if self.divergences != 1 else ''} had no "
                             "counterpart in the recording")
            if self.unanswered:
                lines.append(f"{self.unanswered} request{'s' if self.unanswered != 1 else ''} of the replay "
                             "went unanswered by the client")
        if self.mismatches > 1:
            lines.append(f"{self.mismatches} answers of the client differed from the recording "
                         "(the first for each method is shown)")
        return lines

    def _failed(self) -> bool:
        return self.options.strict and bool(self.divergences or self.unanswered)

    async def _next(self) -> Live | bytes | None:
        while not self._queue:
            if self.client_done:
                return None
            await self._changed.wait()
        item = self._queue.popleft()
        self._poke()  # room for the reader
        return item

    # -- the live client ----------------------------------------------------------------------

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
            pass  # session/cancel: consumed; the recording says what followed it
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
                    self._answered(key, _UNREAD, None)
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

    # -- serving ---------------------------------------------------------------------------------

    async def _answer(self, live: Live) -> None:
        """Serve one live request."""
        request = self.matcher.match(live.method, live.session)
        if request is None:
            self._diverged(live)
            await self._flush()
            return
        self.live[request.index] = live
        await self._serve(request.steps, request.mono)
        if not request.answered:
            self._error(live.id_out, "acp-bridge replay: the recording ends before the agent answered this "
                                     f"request ({request.describe()})")
        elif request.index not in self.served:
            self._owed(request)
        await self._flush()

    def _owed(self, request: RecordedRequest) -> None:
        """The request's answer was recorded in a later request's segment (the client sent
        that one before this was answered): it comes with that segment if the client has sent
        that request too, else now."""
        if request.answer_in < 0:
            return
        owner = self.script.requests[request.answer_in]
        if not self.matcher.matched(owner.index) and any(
                isinstance(item, Live) and self.matcher.peek(item.method, item.session) == owner.index
                for item in self._queue):
            return
        for step in owner.steps:
            if isinstance(step, Send) and step.answers == request.index:
                self._send(step)
        if not self.matcher.matched(owner.index):
            self._once(("owed",), f"the answer to {request.describe()} was recorded after {owner.describe()}, "
                                  "which the client has not sent: answered without it")

    async def _serve(self, steps: list[Step], since: float) -> None:
        recorded = self.options.timing == "recorded"
        for step in steps:
            if recorded:  # the wait for a client's answer takes its own time: no pause before it
                gap = min(step.mono - since, self.options.max_gap) if isinstance(step, Send) else 0.0
                since = step.mono
                if gap > 0:
                    await self._flush()
                    await trio.sleep(gap)
            if isinstance(step, Send):
                if step.answers is None and step.request is None:
                    self._out += step.data  # most lines: inline (a call each is 8% of serving)
                else:
                    self._send(step)
            elif isinstance(step, AwaitAnswer) and step.key in self.sent_requests:
                await self._flush()
                self._check_answer(step, await self._wait_answer(step))
                self.sent_requests.discard(step.key)
                if self._failed():
                    return
        await self._flush()

    def _send(self, step: Send) -> None:
        if step.answers is None:
            self._out += step.data
            if step.request is not None:
                self.sent_requests.add(step.request)
                self.abandoned.discard(step.request)
        elif step.answers in self.live and step.answers not in self.served:  # asked, not yet answered
            self.served.add(step.answers)
            self._out += self._with_live_id(step, self.live[step.answers])

    async def _flush(self) -> None:
        if self._out:
            data, self._out = bytes(self._out), bytearray()
            await self.stream.send_all(data)

    def _with_live_id(self, step: Send, live: Live) -> bytes:
        assert step.answers is not None
        recorded = self.script.requests[step.answers].id
        if live.id_out is live.id and id_key(live.id) == id_key(recorded):
            return step.data
        frame = classify(Direction.TO_CLIENT, step.data)
        if frame.msg is None:
            return step.data
        try:
            return encode({**frame.msg, "id": live.id_out}, frame.terminator or b"\n", source=frame)
        except Unencodable:  # nested past what can be written: the id put into the text
            spliced = splice_id(step.data, orjson.dumps(live.id_out))
            if spliced is None:
                self._once(("id",), f"the recorded answer to {self.script.requests[step.answers].describe()} "
                                    "has no id the replay can replace; sent as recorded")
            return step.data if spliced is None else spliced

    def _error(self, id_out: Any, message: str, data: Any = None) -> None:
        self._out += error_line(id_out, p.INTERNAL_ERROR, message, data)

    def _diverged(self, live: Live) -> None:
        self.divergences += 1
        expected: RecordedRequest | None = self.matcher.expected_next()
        where = "" if live.session is None else f" (session {show(live.session)})"
        nxt = "nothing more: every recorded request has been served" if expected is None else expected.describe()
        method = show(live.method)
        message = (f"acp-bridge replay: no recorded {method}{where} left to answer it with; "
                   f"the recording expected next: {nxt}")
        data = {"expected": None if expected is None else
                {"method": expected.method, "sessionId": expected.session}}
        self._error(live.id_out, message, data)
        self._once(("diverged", method, where, None if expected is None else expected.index),
                   f"divergence: the client sent {method}{where}; the recording expected next: {nxt}")

    def _check_answer(self, step: AwaitAnswer, answer: bytes | None) -> None:
        if answer is None or step.expected is None:
            return
        if answer is _UNREAD:
            self._once(("unread",), f"the client's answer to {step.method} is longer than the replay reads; "
                                    "not compared")
            return
        was, now = without_id(step.expected), without_id(answer)
        diff = compact_diff(was, now)
        if diff:
            self.mismatches += 1
            body = orjson.dumps(showable(diff), option=orjson.OPT_NON_STR_KEYS).decode()
            self._once(("mismatch", step.method),
                       f"the client's answer to {step.method} differs from the recording: {body}")

    def _once(self, key: tuple[Any, ...], text: str) -> None:
        if key not in self._reported and len(self._reported) < 10_000:
            self._reported.add(key)
            self.report(text)

