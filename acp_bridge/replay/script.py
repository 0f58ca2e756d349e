"""A capture read into an exchange script: what the agent side of a recording said, and after
which client request.

Owns: the message records of a capture read by the one reader, strictly (capture/reader.py:
a header first, a known format version, every line a record, a torn last line ignored and
said; here, also a direction on every message record), picking each record's line as one
side saw it (what the client received, or with `before_rules` what the agent sent), grouping
the agent's lines into the segment of the client request they follow, and matching live
requests to recorded ones (`Matcher`).
Must never: do IO, read a clock, import trio or click, or parse a recorded line twice (a
100k-message capture must be read well within a second).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.capture.pairs import TO_AGENT, TO_CLIENT, Pairs
from acp_bridge.capture.reader import CaptureReader, UnreadableCapture, record_bytes, sent_bytes, split_lines
from acp_bridge.capture.redaction import WHOLE
from acp_bridge.capture.summary import fmt_id
from acp_bridge.core import protocol as p
from acp_bridge.core.messages import id_key
from acp_bridge.core.protocol import Json

_DIRECTIONS = ("to-agent", "to-client")


def messages(capture: CaptureReader) -> Iterator[Json]:
    """The message records of a capture, in order; other types are skipped, as
    capture-format.md asks of readers. A message record must say its direction.

    Raises:
        UnreadableCapture: as the reader does, or a message record without a direction.
    """
    for record in capture:
        if record.get("type") != "message":
            continue
        if record.get("direction") not in _DIRECTIONS:
            raise UnreadableCapture(capture.path, capture.line,
                                    "malformed message record: 'direction' is not to-agent or to-client")
        yield record


def parse_capture(data: bytes, path: str = "(capture)") -> CaptureReader:
    """A capture held in memory (tests); the CLI reads the file as it goes."""
    return CaptureReader(path, split_lines(data))


# -- the script ----------------------------------------------------------------------------


@dataclass(slots=True)
class Send:
    """A line the agent side writes. `answers`: the index of the client request whose
    answer it is (its id becomes the live one); `request`: the id key of an agent request."""

    data: bytes
    mono: float
    answers: int | None = None
    request: Any = None
    method: str | None = None


@dataclass(slots=True)
class AwaitAnswer:
    """Where the recorded client answered an agent request: wait for the live answer."""

    key: Any
    method: str | None
    expected: bytes | None
    mono: float


Step = Send | AwaitAnswer


@dataclass
class RecordedRequest:
    """A client request of the recording and the agent side's segment after it."""

    index: int
    method: str | None
    session: Any
    id: Any
    mono: float
    steps: list[Step] = field(default_factory=list)
    answered: bool = False
    answer_in: int = -1  # the index of the request whose segment holds the answer

    def describe(self) -> str:
        where = "" if self.session is None else f" (session {self.session})"
        return f"{self.method} id {fmt_id(self.id)}{where}"


@dataclass
class Script:
    opening: list[Step]  # what the agent side wrote before the first client request
    opening_mono: float
    requests: list[RecordedRequest]
    withheld: int = 0  # agent lines the capture withheld whole: not replayed
    partial: int = 0  # lines over the parse limit: only their first bytes were recorded
    # The client's notifications (session/cancel, ...) the recording has, by (method, session
    # key): a live one beyond them is said to be no counterpart of the recording.
    notifications: dict[tuple[Any, Any], int] = field(default_factory=dict)


def _withheld_answer(id_: Any) -> bytes:
    msg = p.error_response(id_, p.INTERNAL_ERROR, "acp-bridge replay: the recorded answer was withheld "
                                                  "whole from the capture (redaction), so it cannot be replayed")
    return orjson.dumps(msg) + b"\n"


def build_script(capture: CaptureReader, *, before_rules: bool = False) -> Script:
    """The agent side of the capture, segment by segment.

    By default each line is what the client received (`out` where the capture has it, else
    `raw`; messages the bridge emitted toward the client included) and client requests are
    what the client sent. With `before_rules`, what the agent sent and was sent.
    """
    head = capture.header.get("mono")
    builder = _ScriptBuilder(Script([], head if isinstance(head, (int, float)) else 0.0, []), before_rules)
    for record in messages(capture):
        mono = record.get("mono")
        mono = float(mono) if isinstance(mono, (int, float)) and not isinstance(mono, bool) else 0.0
        if record["direction"] == "to-agent":
            builder.from_client(record, mono)
        else:
            builder.to_client(record, mono)
    return builder.script


class _ScriptBuilder:
    """The script as `build_script` makes it, one record at a time."""

    def __init__(self, script: Script, before_rules: bool) -> None:
        self.script = script
        self.before_rules = before_rules
        self.current, self.owner = script.opening, -1  # the segment being filled, and its request
        self.pending: Pairs[int] = Pairs()  # a recorded client request's index, until answered
        self.agent_requests: Pairs[Send] = Pairs()  # the agent's requests, until the client answers

    def from_client(self, record: Json, mono: float) -> None:
        """A line toward the agent: a request starts a segment; an answer to an agent
        request is awaited where it came; anything else is consumed."""
        verdict, kind = record.get("verdict"), record.get("kind")
        if kind == "notification" and verdict != "emit":  # the client sent it
            key = (record.get("method"), id_key(record.get("session")))
            self.script.notifications[key] = self.script.notifications.get(key, 0) + 1
        if verdict == "emit" and not self.before_rules:
            return  # the bridge wrote it to the agent: the client never sent it
        line = sent_bytes(record) if self.before_rules else record_bytes(record, "raw")
        if line is None:
            return  # dropped: the agent never saw it
        if kind == "request":
            requests = self.script.requests
            request = RecordedRequest(len(requests), record.get("method"), record.get("session"),
                                      record.get("id"), mono)
            requests.append(request)
            self.current, self.owner = request.steps, request.index
            self.pending.request(TO_AGENT, record.get("id"), request.index)
        elif kind == "response":
            asked = self.agent_requests.response(TO_AGENT, record.get("id"))
            if asked is not None:
                expected = None if record.get("redacted") == WHOLE else line
                self.current.append(AwaitAnswer(asked.request, asked.method, expected, mono))
        # notifications (cancel) and lines that are not JSON-RPC: consumed

    def to_client(self, record: Json, mono: float) -> None:
        """A line toward the client: sent in the current segment (an answer marks its
        request answered)."""
        verdict, kind = record.get("verdict"), record.get("kind")
        if verdict == "emit" and self.before_rules:
            return  # the bridge wrote it: today's rules will write their own
        if verdict == "emit":
            data = record_bytes(record, "out")
        else:
            data = record_bytes(record, "raw") if self.before_rules else sent_bytes(record)
        if data is None:
            return  # dropped by a rule: the client never got it
        if record.get("truncated"):
            self.script.partial += 1
        answers = None
        if kind == "response":
            index = self.pending.response(TO_CLIENT, record.get("id"))
            if index is not None:
                answers = index
                self.script.requests[index].answered = True
                self.script.requests[index].answer_in = self.owner
        if record.get("redacted") == WHOLE:
            if answers is None:
                self.script.withheld += 1
                return
            data = _withheld_answer(record.get("id"))
        if not data.endswith(b"\n"):
            data += b"\n"  # a torn last line, or a long line's head: keep the stream in lines
        step = Send(data, mono, answers)
        if kind == "request":
            step.request = id_key(record.get("id"))
            step.method = record.get("method")
            self.agent_requests.request(TO_CLIENT, record.get("id"), step)
        self.current.append(step)


class Matcher:
    """Live client requests to recorded ones: the next unmatched recorded request of the
    same method and session, in recorded order."""

    def __init__(self, requests: list[RecordedRequest]) -> None:
        self.requests = requests
        self._queues: dict[tuple[Any, Any], deque[int]] = {}
        for request in requests:
            self._queues.setdefault((request.method, id_key(request.session)), deque()).append(request.index)
        self._matched = [False] * len(requests)
        self._first = 0  # every request before it is matched

    def match(self, method: Any, session: Any) -> RecordedRequest | None:
        queue = self._queues.get((method, id_key(session)))
        if not queue:
            return None
        index = queue.popleft()
        self._matched[index] = True
        return self.requests[index]

    def peek(self, method: Any, session: Any) -> int | None:
        """The index `match` would give now (None: no such request left)."""
        queue = self._queues.get((method, id_key(session)))
        return queue[0] if queue else None

    def matched(self, index: int) -> bool:
        return self._matched[index]

    def expected_next(self) -> RecordedRequest | None:
        """The earliest recorded request no live one has matched yet (None: all matched)."""
        while self._first < len(self.requests) and self._matched[self._first]:
            self._first += 1
        return self.requests[self._first] if self._first < len(self.requests) else None
