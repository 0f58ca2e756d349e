"""A capture read into an exchange script: what the agent side of a recording said, and after
which client request.

Owns: checking that bytes are a capture (a header record first, a known format version,
well-formed records; a malformed line or a torn last record is a `CaptureInputError` naming
the line), picking each record's line as one side saw it (what the client received, or with
`before_rules` what the agent sent), grouping the agent's lines into the segment of the client
request they follow, and matching live requests to recorded ones (`Matcher`).
Must never: do IO, read a clock, import trio or click, or parse a recorded line it does not
need to (a 100k-message capture must be read well within a second).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.capture.reader import fmt_id, record_bytes, sent_bytes
from acp_bridge.capture.records import FORMAT_VERSION, known_format
from acp_bridge.capture.redaction import WHOLE
from acp_bridge.core import protocol as p
from acp_bridge.core.lines import MIB
from acp_bridge.core.messages import id_key
from acp_bridge.core.protocol import Json

# The longest record line read: a line over the parse limit is recorded only in its first
# bytes, so a record this long is no capture acp-bridge wrote (and must not be held whole).
MAX_RECORD = 256 * MIB
_DIRECTIONS = ("to-agent", "to-client")


class CaptureInputError(Exception):
    """The bytes are not a capture this version can replay; `line` is 1-based."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"{line}: {problem}")
        self.line = line
        self.problem = problem


class Capture:
    """A capture read as it is iterated: the header at once, the message records one by one
    (`records()`, once), each line at most `max_record` bytes long. `ended` tells, once the
    records are read, whether the capture has its `end` record; `torn` is the number of a torn
    last line that was ignored (a killed bridge's capture: read up to its last whole record).
    Reading holds one record at a time; `build_script` keeps every line it serves, so serving
    holds two to three times the capture's size in memory.

    Raises (from the constructor for the header, from `records()` for the rest):
        CaptureInputError: not a capture, an unknown format version, a malformed line, a
            record longer than `max_record`, or a torn last line after the end record.
    """

    def __init__(self, lines: Iterable[bytes], max_record: int = MAX_RECORD) -> None:
        self._lines = enumerate(_bounded(lines, max_record), 1)
        self.ended = False
        self.torn: int | None = None
        self.header = self._first()

    def __repr__(self) -> str:
        return f"<Capture format={self.header.get('format')} ended={self.ended} torn={self.torn}>"

    def _first(self) -> Json:
        for number, line in self._lines:
            if line.strip():
                return _header(self._load(line, number, header=True), number)
        raise CaptureInputError(1, "not a capture: it is empty")

    @staticmethod
    def _load(line: bytes, number: int, *, header: bool = False) -> Json | None:
        if isinstance(line, _TooLong):
            size = f"{line.limit // MIB} MiB" if line.limit >= MIB else f"{line.limit} bytes"
            raise CaptureInputError(number, f"a record longer than {size}: not a capture this acp-bridge wrote")
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            record = None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            if not line.endswith(b"\n"):
                raise CaptureInputError(number, "torn last record: the line is cut short (no newline, not JSON)")
            if header:
                return None
            raise CaptureInputError(number, "malformed line: not a capture record (a JSON object with a 'type')")
        return record

    def records(self) -> Iterator[Json]:
        """The message records, in order, each checked; other types are skipped, as
        capture-format.md asks of readers. A torn last line with no end record before it (the
        bridge was killed while writing it) ends the records; `torn` says where."""
        for number, line in self._lines:
            if not line.strip():
                continue
            if not self.ended and not line.endswith(b"\n") and not isinstance(line, _TooLong) and _torn(line):
                self.torn = number
                return
            record = self._load(line, number)
            assert record is not None
            kind = record["type"]
            if kind == "end":
                self.ended = True
            elif kind == "message":
                _check(record, number)
                yield record


class _TooLong(bytes):
    """The head of a line longer than the limit (the rest is skipped)."""

    limit: int = 0


def _bounded(lines: Iterable[bytes], limit: int) -> Iterator[bytes]:
    """`lines`, but a line over `limit` bytes comes as a `_TooLong` head (not held whole):
    a file's lines are read with `readline(limit + 1)`."""
    readline = getattr(lines, "readline", None)
    if readline is None:
        for line in lines:
            yield _too_long(line[:limit], limit) if len(line) > limit else line
        return
    while line := readline(limit + 1):
        if len(line) > limit:
            more = line
            while more and not more.endswith(b"\n"):
                more = readline(limit + 1)  # the rest of the line, skipped without holding it
            yield _too_long(line[:limit], limit)
            continue
        yield line


def _too_long(head: bytes, limit: int) -> _TooLong:
    out = _TooLong(head)
    out.limit = limit
    return out


def _torn(line: bytes) -> bool:
    """A last line without its newline that is not a whole record: cut by a killed writer."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return True
    return not isinstance(record, dict) or not isinstance(record.get("type"), str)


def lines_of(data: bytes) -> Iterator[bytes]:
    """The lines of `data`, each with its newline (the last may have none), as a file gives them."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start) + 1 or len(data)
        yield data[start:end]
        start = end


def parse_capture(data: bytes) -> Capture:
    """A capture held in memory (tests); the CLI reads the file as it goes."""
    return Capture(lines_of(data))


def _header(record: Json | None, number: int) -> Json:
    if record is None or record.get("type") != "header":
        raise CaptureInputError(number, "not a capture: the first record is not a header "
                                        "(written by acp-bridge run --capture)")
    version = record.get("format")
    if not known_format(version):
        shown = orjson.dumps(version, option=orjson.OPT_NON_STR_KEYS).decode() if isinstance(
            version, (str, int, float, type(None))) else type(version).__name__
        raise CaptureInputError(number, f"unknown capture format version {shown} "
                                        f"(this acp-bridge reads version {FORMAT_VERSION})")
    return record


def _check(record: Json, number: int) -> None:
    if record.get("direction") not in _DIRECTIONS:
        raise CaptureInputError(number, "malformed message record: 'direction' is not to-agent or to-client")
    for key in ("raw", "out"):
        if key in record and not isinstance(record[key], (str, type(None))):
            raise CaptureInputError(number, f"malformed message record: '{key}' is not text")
    if not isinstance(record.get("method"), (str, type(None))):
        raise CaptureInputError(number, "malformed message record: 'method' is not text or null")
    session = record.get("session")
    if not isinstance(session, (str, int, type(None))) or isinstance(session, bool):
        raise CaptureInputError(number, "malformed message record: 'session' is not text, a number or null")


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
        return f"{self.method} #{fmt_id(self.id)}{where}"


@dataclass
class Script:
    opening: list[Step]  # what the agent side wrote before the first client request
    opening_mono: float
    requests: list[RecordedRequest]
    withheld: int = 0  # agent lines the capture withheld whole: not replayed
    partial: int = 0  # lines over the parse limit: only their first bytes were recorded


def _withheld_answer(id_: Any) -> bytes:
    msg = p.error_response(id_, p.INTERNAL_ERROR, "acp-bridge replay: the recorded answer was withheld "
                                                  "whole from the capture (redaction), so it cannot be replayed")
    return orjson.dumps(msg) + b"\n"


def build_script(capture: Capture, *, before_rules: bool = False) -> Script:
    """The agent side of the capture, segment by segment.

    By default each line is what the client received (`out` where the capture has it, else
    `raw`; messages the bridge emitted toward the client included) and client requests are
    what the client sent. With `before_rules`, what the agent sent and was sent.
    """
    head = capture.header.get("mono")
    script = Script([], head if isinstance(head, (int, float)) else 0.0, [])
    current, owner = script.opening, -1
    pending: dict[Any, int] = {}  # id key of a recorded client request -> its index, until answered
    agent_requests: dict[Any, str | None] = {}
    requests = script.requests
    for record in capture.records():
        verdict = record.get("verdict")
        kind = record.get("kind")
        mono = record.get("mono")
        mono = float(mono) if isinstance(mono, (int, float)) and not isinstance(mono, bool) else 0.0
        if record["direction"] == "to-agent":
            if verdict == "emit" and not before_rules:
                continue  # the bridge wrote it to the agent: the client never sent it
            line = sent_bytes(record) if before_rules else record_bytes(record, "raw")
            if line is None:
                continue  # dropped: the agent never saw it
            if kind == "request":
                request = RecordedRequest(len(requests), record.get("method"), record.get("session"),
                                          record.get("id"), mono)
                requests.append(request)
                current, owner = request.steps, request.index
                pending[id_key(record.get("id"))] = request.index
            elif kind == "response":
                key = id_key(record.get("id"))
                if key in agent_requests:
                    expected = None if record.get("redacted") == WHOLE else line
                    current.append(AwaitAnswer(key, agent_requests.pop(key), expected, mono))
            continue  # notifications (cancel) and lines that are not JSON-RPC: consumed
        if verdict == "emit" and before_rules:
            continue  # the bridge wrote it: today's rules will write their own
        if verdict == "emit":
            data = record_bytes(record, "out")
        else:
            data = record_bytes(record, "raw") if before_rules else sent_bytes(record)
        if data is None:
            continue  # dropped by a rule: the client never got it
        if record.get("truncated"):
            script.partial += 1
        answers = None
        if kind == "response":
            index = pending.pop(id_key(record.get("id")), None)
            if index is not None:
                answers = index
                requests[index].answered = True
                requests[index].answer_in = owner
        if record.get("redacted") == WHOLE:
            if answers is None:
                script.withheld += 1
                continue
            data = _withheld_answer(record.get("id"))
        if not data.endswith(b"\n"):
            data += b"\n"  # a torn last line, or a long line's head: keep the stream in lines
        step = Send(data, mono, answers)
        if kind == "request":
            step.request = id_key(record.get("id"))
            step.method = record.get("method")
            agent_requests[step.request] = step.method
        current.append(step)
    return script


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
