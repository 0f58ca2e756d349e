"""The replay server: an exchange script served on a stream as the agent side of ACP.

Owns: reading the live client's lines (requests queued in order, answers to the agent's
requests handed to whoever waits for them, notifications consumed), serving each matched
request's segment (ids made the live ones, the recorded gaps with `timing="recorded"`),
answering a request the recording has no counterpart for with a JSON-RPC error naming
what it expected next, and reporting on stderr (via `report`).
Must never: hang on a divergence (every request gets an answer), write anything but
protocol lines to the stream, or interpret more of a recorded line than its id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import trio

from acp_bridge.core import protocol as p
from acp_bridge.core.frames import Direction, classify, encode, id_key
from acp_bridge.core.framing import MIB, LineSplitter
from acp_bridge.replay.diff import compact_diff
from acp_bridge.replay.script import AwaitAnswer, Matcher, RecordedRequest, Script, Send, Step

EXIT_DIVERGED = 1
_MISSING = object()


@dataclass(frozen=True)
class ReplayOptions:
    timing: str = "fast"  # "fast": as fast as causality allows; "recorded": the recorded gaps
    max_gap: float = 2.0  # seconds: the longest recorded gap kept
    strict: bool = False  # the first divergence ends the replay (exit 1)


class ReplayServer:
    """Serve `script` to the client on `stream`; `run()` returns the exit status."""

    def __init__(self, script: Script, options: ReplayOptions, stream: trio.abc.HalfCloseableStream,
                 report: Callable[[str], None]) -> None:
        self.script = script
        self.options = options
        self.stream = stream
        self.report = report
        self.matcher = Matcher(script.requests)
        self.live_ids: dict[int, Any] = {}
        self.answers: dict[Any, bytes] = {}
        self.waiting: dict[Any, trio.Event] = {}
        self.sent_requests: set[Any] = set()
        self.client_done = False
        self.divergences = 0
        self.mismatches = 0
        self._reported: set[tuple[Any, ...]] = set()
        self._out = bytearray()
        self._send, self._requests = trio.open_memory_channel[tuple[Any, Any, Any]](1024)

    def __repr__(self) -> str:
        return (f"<ReplayServer requests={len(self.script.requests)} divergences={self.divergences} "
                f"client_done={self.client_done}>")

    async def run(self) -> int:
        status = 0
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read)
                await self._serve(self.script.opening, self.script.opening_mono)
                async for method, session, id_ in self._requests:
                    if not await self._answer(method, session, id_):
                        status = EXIT_DIVERGED
                        break
                nursery.cancel_scope.cancel()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away: nobody is left to serve
        if self.divergences and not self.options.strict:
            self.report(f"{self.divergences} request{'s' if self.divergences != 1 else ''} had no "
                        "counterpart in the recording")
        return status

    # -- the live client ----------------------------------------------------------------------

    async def _read(self) -> None:
        splitter = LineSplitter(64 * MIB)
        try:
            async with self._send:
                while chunk := await self.stream.receive_some(1 << 20):
                    for line in splitter.feed(bytes(chunk)):
                        if isinstance(line, bytes):
                            await self._take(line)
                for line in splitter.feed_eof():
                    if isinstance(line, bytes):
                        await self._take(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.client_done = True
            for event in self.waiting.values():
                event.set()

    async def _take(self, line: bytes) -> None:
        frame = classify(Direction.TO_AGENT, line)
        msg = frame.msg
        if msg is None:
            self._once(("other",), "the client sent a line that is not one JSON-RPC message; ignored")
            return
        if "method" in msg and "id" in msg:
            params = msg.get("params")
            session = params.get("sessionId") if isinstance(params, dict) else None
            await self._send.send((msg.get("method"), session, msg.get("id")))
        elif "method" not in msg and "id" in msg:
            key = id_key(msg["id"])
            if key not in self.sent_requests:  # kept only for a request the replay sent: bounded
                self._once(("unasked",), "the client answered a request the replay did not send; ignored")
                return
            self.answers[key] = line
            event = self.waiting.pop(key, None)
            if event is not None:
                event.set()
        # a notification (session/cancel): consumed; the recording says what followed it

    async def _wait_answer(self, key: Any) -> bytes | None:
        while key not in self.answers and not self.client_done:
            event = self.waiting.setdefault(key, trio.Event())
            await event.wait()
        return self.answers.pop(key, None)

    # -- serving ---------------------------------------------------------------------------------

    async def _answer(self, method: Any, session: Any, id_: Any) -> bool:
        """Serve one live request; False when a divergence ends the replay (strict)."""
        request = self.matcher.match(method, session)
        if request is None:
            self._diverged(method, session, id_)
            await self._flush()
            return not self.options.strict
        self.live_ids[request.index] = id_
        await self._serve(request.steps, request.mono)
        if not request.answered:
            self._error(id_, "acp-bridge replay: the recording ends before the agent answered this "
                             f"request ({request.describe()})")
        await self._flush()
        return True

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
                self._out += self._with_live_id(step) if step.answers is not None else step.data
                if step.request is not None:
                    self.sent_requests.add(step.request)
            elif isinstance(step, AwaitAnswer) and step.key in self.sent_requests:
                await self._flush()
                self._check_answer(step, await self._wait_answer(step.key))
                self.sent_requests.discard(step.key)
        await self._flush()

    async def _flush(self) -> None:
        if self._out:
            data, self._out = bytes(self._out), bytearray()
            await self.stream.send_all(data)

    def _with_live_id(self, step: Send) -> bytes:
        assert step.answers is not None
        live = self.live_ids.get(step.answers, _MISSING)
        recorded = self.script.requests[step.answers].id
        if live is _MISSING or id_key(live) == id_key(recorded):
            return step.data
        frame = classify(Direction.TO_CLIENT, step.data)
        if frame.msg is None:
            return step.data
        try:
            return encode({**frame.msg, "id": live}, frame.terminator or b"\n", source=frame)
        except Exception:  # nested past what can be written: the recorded line, as it is
            return step.data

    def _error(self, id_: Any, message: str, data: Any = None) -> None:
        self._out += orjson.dumps(p.error_response(id_, p.INTERNAL_ERROR, message, data)) + b"\n"

    def _diverged(self, method: Any, session: Any, id_: Any) -> None:
        self.divergences += 1
        expected: RecordedRequest | None = self.matcher.expected_next()
        where = "" if session is None else f" (session {session})"
        if expected is None:
            nxt = "nothing more: every recorded request has been served"
        else:
            nxt = expected.describe()
        message = (f"acp-bridge replay: no recorded {method}{where} left to answer it with; "
                   f"the recording expected next: {nxt}")
        data = {"expected": None if expected is None else
                {"method": expected.method, "sessionId": expected.session}}
        self._error(id_, message, data)
        self._once(("diverged", str(method), str(session), None if expected is None else expected.index),
                   f"divergence: the client sent {method}{where}; the recording expected next: {nxt}")

    def _check_answer(self, step: AwaitAnswer, answer: bytes | None) -> None:
        if answer is None or step.expected is None:
            return
        was, now = _result_of(step.expected), _result_of(answer)
        diff = compact_diff(was, now)
        if diff:
            self.mismatches += 1
            body = orjson.dumps(diff, option=orjson.OPT_NON_STR_KEYS).decode()
            self.report(f"the client's answer to {step.method} differs from the recording: {body}")

    def _once(self, key: tuple[Any, ...], text: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self.report(text)


def _result_of(line: bytes) -> Any:
    """An answer without its id, to compare with another."""
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line.decode("utf-8", "backslashreplace")
    if isinstance(msg, dict):
        msg.pop("id", None)
    return msg
