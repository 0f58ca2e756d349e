"""The replay server: an exchange script served on a stream as the agent side of ACP.

Owns: serving each matched request's segment (ids made the live ones, as the client wrote
them; the recorded gaps with `timing="recorded"`), answering a request the recording has no
counterpart for with a JSON-RPC error naming what it expected next, comparing the client's
answers to the agent's requests with the recorded ones, and the summary of what diverged.
Reading the client is `live_client`'s.
Must never: hang (every request gets an answer), write anything but protocol lines to the
stream, or interpret more of a recorded line than its id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import trio

from acp_bridge.core import protocol as p
from acp_bridge.core.literals import splice_id
from acp_bridge.core.messages import Direction, Unencodable, classify, encode, id_key
from acp_bridge.replay.diff import compact_diff, showable, without_id
from acp_bridge.replay.live_client import MAX_LINE, UNREAD, Live, LiveClient
from acp_bridge.replay.script import AwaitAnswer, Matcher, RecordedRequest, Script, Send, Step
from acp_bridge.replay.wire import error_line, show

EXIT_DIVERGED = 1


@dataclass(frozen=True)
class ReplayOptions:
    timing: str = "fast"  # "fast": as fast as causality allows; "recorded": the recorded gaps
    max_gap: float = 2.0  # seconds: the longest recorded gap kept
    strict: bool = False  # the first divergence ends the replay (exit 1)


class ReplayServer(LiveClient):
    """Serve `script` to the client on `stream`; `run()` returns the exit status."""

    def __init__(self, script: Script, options: ReplayOptions, stream: trio.abc.HalfCloseableStream,
                 report: Callable[[str], None], *, max_line: int = MAX_LINE) -> None:
        super().__init__(stream, report, max_line=max_line)
        self.script = script
        self.options = options
        self.matcher = Matcher(script.requests)
        self.live: dict[int, Live] = {}  # recorded request index -> the live request it answers
        self.served: set[int] = set()  # recorded requests whose answer has gone out
        self.divergences = 0  # live requests with no recorded counterpart
        self.mismatches = 0
        self.notifications = dict(script.notifications)  # the recorded ones not yet matched
        self.extra_notifications = 0  # live notifications the recording has no counterpart for

    def __repr__(self) -> str:
        return (f"<ReplayServer requests={len(self.script.requests)} divergences={self.divergences} "
                f"unanswered={self.unanswered} client_done={self.client_done}>")

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
            if self.extra_notifications:
                n = self.extra_notifications
                lines.append(f"{n} notification{'s' if n != 1 else ''} of the client had no counterpart in the "
                             "recording")
            if self.unanswered:
                lines.append(f"{self.unanswered} request{'s' if self.unanswered != 1 else ''} of the replay "
                             "went unanswered by the client")
        if self.mismatches > 1:
            lines.append(f"{self.mismatches} answers of the client differed from the recording "
                         "(the first for each method is shown)")
        return lines

    def _failed(self) -> bool:
        return self.options.strict and bool(self.divergences or self.unanswered or self.extra_notifications)

    def _notified(self, method: Any, session: Any) -> None:
        """A live notification: matched to one the recorded client sent (same method and
        session), else a divergence, said once per method and session (the recorded turn goes
        on: the replay cannot make the agent heed a cancel it never got)."""
        key = (method, id_key(session))
        left = self.notifications.get(key, 0)
        if left:
            self.notifications[key] = left - 1
            return
        self.extra_notifications += 1
        where = "" if session is None else f" (session {show(session)})"
        self._once(("notification", show(method), where),
                   f"divergence: the client sent {show(method)}{where}, which the recording does not have; "
                   "the replay goes on as recorded")
        self._poke()  # with --strict, the replay ends

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
        if answer is UNREAD:
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
