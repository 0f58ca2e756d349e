"""The client side of a capture, for `acp-bridge drive`: what to send, and the recorded answers.

Owns: `ClientSide.from_records(records)`: the lines the recorded client sent, as it sent
them (`raw`, before the bridge's rules), in order, each with its session and turn
(replay/turns.py), and how many lines the agent had written since the last prompt when it
was sent (where a `session/cancel` came; when the turn before a prompt was over);
`Answers`: the client's recorded answers to the agent's requests, found again for a live
request (a permission request by the option kind chosen, since option ids may differ; a
file by its path; a terminal by its command (its secrets masked, as the capture holds it), then
by its id; anything else by its params);
and `Rewriter`: a recorded line with the live session ids in place of the recorded ones,
and `--cwd` in place of the recorded `cwd`.
Must never: do IO, import trio or click, or change a line it has no reason to change (a
line with nothing to replace is sent as its recorded bytes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.capture.command_redaction import command_masked
from acp_bridge.capture.pairs import TO_AGENT, Pairs
from acp_bridge.capture.reader import record_bytes
from acp_bridge.capture.redaction import WHOLE
from acp_bridge.core import methods as m
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.messages import Direction, Unencodable, classify, encode, id_key
from acp_bridge.core.pointer import get_pointer
from acp_bridge.core.protocol import Json
from acp_bridge.replay.turns import TO_CLIENT, Track, tracks

PERMISSION = m.SESSION_REQUEST_PERMISSION
CREATES_SESSION = m.SESSION_OPENERS


@dataclass
class Outgoing:
    """A line the recorded client sent."""

    seq: int
    data: bytes
    msg: Any  # parsed (None: not JSON)
    kind: str
    method: str | None
    track: int  # its session's index (0: the connection)
    turn: int
    where: str  # "session 1 turn 2"
    creates: Any = None  # session/new: the session id its recorded answer gave
    before: int = 0  # how many lines the agent wrote between the last prompt (or the start) and it
    ends_at_idle: bool = False  # a prompt whose recorded turn ended with an idle `state_update` (v2)
    redacted: list[str] = field(default_factory=list)

    @property
    def is_prompt(self) -> bool:
        return self.kind == "request" and self.method == p.SESSION_PROMPT


def _places(cut: list[Track]) -> tuple[dict[int, tuple[int, int]], set[tuple[int, int]], int]:
    """Where each message is (seq -> track, turn), the turns that ended with an idle
    state_update, and the protocol version the agent answered `initialize` with (1 if none)."""
    place: dict[int, tuple[int, int]] = {}  # seq -> track, turn
    idle: set[tuple[int, int]] = set()  # turns that ended with an idle state_update
    version = 1
    for cut_track in cut:
        for number, messages in enumerate(cut_track.turns):
            for message in messages:
                if message.seq is not None:
                    place[message.seq] = (cut_track.index, number)
                if message.direction != TO_CLIENT or message.emitted:
                    continue
                if message.update is not None and read.ends_turn_v2(read.update_of(message.msg)):
                    idle.add((cut_track.index, number))
                elif message.kind == "response" and message.method == p.INITIALIZE:
                    answered = p.get_path(message.msg, "result", "protocolVersion")
                    version = answered if type(answered) is int else version
    return place, idle, version


@dataclass
class ClientSide:
    lines: list[Outgoing]
    tracks: list[Track]
    answers: Answers
    withheld: list[str]  # what the capture withheld whole and cannot be sent, for a person
    cwds: list[str]  # the recorded `cwd`s, in order
    version: int = 1  # the protocol version the recorded agent answered `initialize` with

    @classmethod
    def from_records(cls, records: Iterable[Json]) -> ClientSide:
        records = [r for r in records if r.get("type") == "message"]
        cut = tracks(records)
        place, idle, version = _places(cut)
        created = {id_key(r.get("id")): r.get("session") for r in records if r.get("direction") == TO_CLIENT
                   and r.get("kind") == "response" and r.get("method") in CREATES_SESSION}
        lines: list[Outgoing] = []
        withheld: list[str] = []
        cwds: list[str] = []
        answers = Answers()
        asked: Pairs[Json] = Pairs()  # the agent's requests, until the client answers
        heard = 0  # the agent's lines since the last prompt, as the driver counts them live
        for record in records:
            seq = record.get("seq")
            if not isinstance(seq, int) or record.get("verdict") == "emit":
                continue  # the bridge wrote it: no peer sent it
            if record.get("direction") == TO_CLIENT:
                heard += 1
                if record.get("kind") == "request":
                    asked.request(TO_CLIENT, record.get("id"), record)
                continue
            data = record_bytes(record, "raw")
            if data is None:
                continue
            kind, method = str(record.get("kind")), record.get("method")
            track, turn = place.get(seq, (0, 0))
            where = cut[track].label(turn) if track < len(cut) else "connection"
            if record.get("redacted") == WHOLE:
                withheld.append(f"seq {seq} {method or 'a line'} ({where})")
                continue
            msg = _loads(data)
            if kind == "response":
                request = asked.response(TO_AGENT, record.get("id"))
                if request is not None:
                    answers.add(request, msg, _pointers(record, msg), seq)
                continue
            if kind == "request" and isinstance(cwd := p.get_path(msg, "params", "cwd"), str) and cwd not in cwds:
                cwds.append(cwd)
            line = Outgoing(seq, data, msg, kind, method, track, turn, where, before=heard,
                            redacted=_pointers(record, msg))
            if kind == "request" and method in CREATES_SESSION:
                line.creates = created.get(id_key(record.get("id")))
            line.ends_at_idle = line.is_prompt and (track, turn) in idle
            if line.is_prompt:
                heard = 0
            lines.append(line)
        return cls(lines, cut, answers, withheld, cwds, version)

    def prompts(self) -> list[Outgoing]:
        return [line for line in self.lines if line.is_prompt]


def _pointers(record: Json, msg: Any) -> list[str]:
    """The pointers of `record`'s `redacted` that are masked in `msg`, the line as its sender
    wrote it: `redacted` names what was masked in `raw` and in `out`, and a value only the
    bridge put in (the system prompt it injected) is in `out` alone."""
    redacted = record.get("redacted")
    if not isinstance(redacted, list):
        return []
    return [pointer for pointer in redacted if not isinstance(msg, dict) or _masked(msg, pointer)]


def _masked(msg: Json, pointer: Any) -> bool:
    """Is the value at `pointer` a mask: a string masked whole, or in part (`--token
    <redacted>`)? A pointer that is none (a capture edited by hand) is taken at its word."""
    try:
        value = get_pointer(msg, pointer) if isinstance(pointer, str) else None
    except ValueError:
        return True
    return isinstance(value, str) and "<redacted" in value


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


class Rewriter:
    """Recorded lines as they go to the live agent: session ids and `cwd` replaced."""

    def __init__(self, cwd: str | None, recorded_cwds: list[str]) -> None:
        self.sessions: dict[str, Any] = {}  # recorded session id -> the live one
        self.cwd = cwd
        self.recorded_cwds = recorded_cwds

    def learn(self, recorded: Any, live: Any) -> None:
        if isinstance(recorded, str):
            self.sessions[recorded] = live

    def line(self, line: Outgoing) -> bytes:
        """The line to send: its recorded bytes when nothing in it is to be replaced."""
        if not isinstance(line.msg, dict) or not (self.sessions or self.cwd is not None):
            return line.data
        frame = classify(Direction.TO_AGENT, line.data)
        if not isinstance(frame.msg, dict):
            return line.data
        # Replaced in the frame's own reading: `encode` finds its numbers again by identity,
        # and writes each as it was written (1.50, integers beyond 64 bits).
        msg = _replace(frame.msg, self.sessions)
        if self.cwd is not None and isinstance(p.get_path(msg, "params", "cwd"), str):
            msg = {**msg, "params": {**msg["params"], "cwd": self.cwd}}
        if msg == frame.msg:  # only strings are replaced: equal means unchanged
            return line.data
        try:
            return encode(msg, source=frame)
        except Unencodable:
            return line.data

    def recorded_paths(self, path: Any) -> list[Any]:
        """Where a live path was in the recording: under each recorded `cwd` when it is under
        `--cwd`, then as it is."""
        if self.cwd is None or not isinstance(path, str):
            return [path]
        live = self.cwd.rstrip("/")
        if path != self.cwd and not path.startswith(live + "/"):
            return [path]
        return [*(cwd.rstrip("/") + path[len(live):] for cwd in self.recorded_cwds), path]


def _replace(value: Any, sessions: dict[str, Any], depth: int = 0) -> Any:
    if isinstance(value, str):
        return sessions.get(value, value)
    if depth > 200:
        return value
    if isinstance(value, dict):
        return {k: _replace(v, sessions, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, sessions, depth + 1) for v in value]
    return value


@dataclass
class Recorded:
    """One recorded answer of the client to an agent request."""

    request: Any  # the agent's request (parsed)
    answer: Any  # the client's response (parsed)
    redacted: list[str]
    seq: int


class Answers:
    """The client's recorded answers, found again for the live agent's requests. Each key's
    answers are given in their recorded order; once they are used up, the last is given again
    (an agent may read a file twice)."""

    def __init__(self) -> None:
        self._queues: dict[Any, deque[Recorded]] = {}
        self._last: dict[Any, Recorded] = {}

    def add(self, request: Json, answer: Any, redacted: list[str], seq: int) -> None:
        message = record_bytes(request, "raw")
        parsed = _loads(message) if message is not None else None
        if not isinstance(parsed, dict) or not isinstance(answer, dict):
            return
        key = match_key(parsed.get("method"), parsed.get("params"))
        self._queues.setdefault(key, deque()).append(Recorded(parsed, answer, redacted, seq))

    def answer(self, request: Json, rewriter: Rewriter | None = None) -> tuple[Json | None, Recorded | None, str]:
        """The live answer to `request` (None: the recording has none), the recorded one it
        came from, and why it has none."""
        method, params = request.get("method"), request.get("params")
        keys = [match_key(method, params)]
        if rewriter is not None and isinstance(params, dict) and "path" in params:
            keys = [match_key(method, {**params, "path": path}) for path in rewriter.recorded_paths(params["path"])]
        key = next((k for k in keys if self._queues.get(k) or k in self._last), keys[0])
        queue = self._queues.get(key)
        recorded = queue.popleft() if queue else self._last.get(key)
        if recorded is None:
            return None, None, f"the recording has no answer to {method} with these params"
        self._last[key] = recorded
        answer = {k: v for k, v in recorded.answer.items() if k != "id"}
        if method == PERMISSION and "result" in answer:
            result, why = _permission(recorded, request)
            if result is None:
                return None, recorded, why
            answer["result"] = result
        return {"jsonrpc": p.JSONRPC, "id": request.get("id"), **{k: v for k, v in answer.items() if k != "jsonrpc"}}, \
            recorded, ""


def match_key(method: Any, params: Any) -> Any:
    """What a live request must share with a recorded one for its answer to fit."""
    params = params if isinstance(params, dict) else {}
    if method == PERMISSION:
        return (method,)
    if method in (m.FS_READ_TEXT_FILE, m.FS_WRITE_TEXT_FILE):
        return (method, _text(params.get("path")))
    if method == p.TERMINAL_CREATE:
        params = command_masked(params)  # as the capture holds the recorded one
        return (method, _text(params.get("command")), _text(params.get("args")))
    if isinstance(method, str) and method.startswith("terminal/"):
        return (method, _text(params.get("terminalId")))
    return (method, _text({k: v for k, v in params.items() if k != "sessionId"}))


def _text(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(value)


def _permission(recorded: Recorded, live: Json) -> tuple[Any, str]:
    """The recorded outcome with the live option id of the kind the user chose."""
    result = recorded.answer.get("result")
    outcome = p.get_path(result, "outcome")
    chosen = p.get_path(outcome, "optionId")
    if chosen is None:  # cancelled: no option to map
        return result, ""
    kinds = {o.get("optionId"): o.get("kind") for o in _options(recorded.request)}
    kind = kinds.get(chosen)
    for option in _options(live):
        if option.get("kind") == kind:
            return {**result, "outcome": {**outcome, "optionId": option.get("optionId")}}, ""
    return None, f"the recorded choice was an option of kind {kind!r}, which this permission request does not offer"


def _options(request: Any) -> list[Json]:
    options = p.get_path(request, "params", "options")
    return [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []
