"""A capture's messages cut into sessions and turns, the units two captures are aligned by.

Owns: `Recorded` (one message record, its line parsed once, and the key the alignment
matches on), `Track` (a session: its turns) and `tracks(records)`: the message records of a
capture, as the one reader yields them, grouped by session (in the order each was created;
track 0 is the connection: what belongs to no session, such as `initialize`) and by turn
(turn 0 is a session's setup, turn N starts at its Nth `session/prompt`). The request that
created a session (`session/new`, whose record has no session yet) goes with the session
its answer names.
Must never: do IO, import trio or click, or raise on what a record holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.capture.pairs import Pairs
from acp_bridge.capture.reader import record_bytes
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.literals import with_exact_integers
from acp_bridge.core.messages import id_key
from acp_bridge.core.protocol import Json

TO_AGENT, TO_CLIENT = "to-agent", "to-client"
ARROWS = {TO_AGENT: "->", TO_CLIENT: "<-"}


@dataclass(frozen=True, slots=True)
class Recorded:
    """One message record: where it went, what it is, and its line parsed (`msg`: the JSON
    value; the line's text when it is not JSON; None when the capture holds no line)."""

    seq: int | None
    direction: str
    kind: str
    method: str | None
    session: Any
    id: Any
    msg: Any
    line: int = 0  # hash of the line's text (0: none): two equal lines need no walk to compare
    emitted: bool = False  # the bridge wrote it (verdict `emit`): no peer said it

    @property
    def update(self) -> str | None:
        """A `session/update`'s `sessionUpdate` (None for anything else)."""
        return read.message_update_kind(self.msg) if self.method == p.SESSION_UPDATE else None

    @property
    def key(self) -> tuple[Any, ...]:
        """What two messages must share to be aligned: direction, kind, method, update kind."""
        return (self.direction, self.kind, self.method, self.update)

    def describe(self) -> str:
        """`<- session/update tool_call`, `-> session/prompt`, `<- response session/prompt`."""
        what = self.method or "(no method)"
        if len(what) > 200:  # a method name is the peer's to choose
            what = what[:199] + "…"
        if self.kind == "response":
            what = f"response {what}"
        elif self.kind == "other":
            what = "line that is not JSON-RPC"
        if (update := self.update) is not None:
            what = f"{what} {update}"
        return f"{ARROWS.get(self.direction, '?')} {what}"


def message_of(record: Json) -> Recorded:
    """A message record as `Recorded`: its line as the peer sent it (`raw`), or as the
    bridge wrote it (`out` of an `emit`)."""
    text = record.get("raw")
    if not isinstance(text, str):
        text = record.get("out")
    msg: Any = None
    if isinstance(text, str):
        try:
            msg = orjson.loads(text)  # the text itself: no copy as bytes
        except orjson.JSONDecodeError:  # not JSON, or a lone surrogate (which orjson refuses in a str)
            msg = _loads(text.encode("utf-8", "surrogatepass"))
        else:  # two integers past 64 bits that one double stands for must not compare equal
            msg = with_exact_integers(text, msg)
    elif (data := record_bytes(record, "raw") or record_bytes(record, "out")) is not None:
        msg = _loads(data)
        if not isinstance(msg, str):  # `_loads`' stand-in for what is no JSON
            msg = with_exact_integers(data, msg)
    seq = record.get("seq")
    direction = record.get("direction")
    return Recorded(seq if isinstance(seq, int) else None,
                   direction if isinstance(direction, str) else "?",
                   str(record.get("kind", "other")), record.get("method"), record.get("session"),
                   record.get("id"), msg, hash(text) if isinstance(text, str) else 0, record.get("verdict") == "emit")


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "backslashreplace")


@dataclass
class Track:
    """One session's messages (track 0: the connection's), turn by turn."""

    index: int
    session: Any  # its id in the capture (None for the connection)
    turns: list[list[Recorded]] = field(default_factory=lambda: [[]])

    def label(self, turn: int) -> str:
        if self.index == 0:
            return "connection"
        return f"session {self.index} " + ("setup" if turn == 0 else f"turn {turn}")

    def messages(self) -> int:
        return sum(len(turn) for turn in self.turns)


def tracks(records: Iterable[Json], keep: Callable[[Recorded], Recorded] | None = None) -> list[Track]:
    """The message records of a capture by session and turn (see the module's docstring);
    with `keep`, each message as it makes it (what a comparison reads of it: `drive` holds
    no more of a long run of the agent's output)."""
    connection = Track(0, None)
    found = [connection]
    by_session: dict[Any, Track] = {}
    unsettled: Pairs[Recorded] = Pairs()  # the client's requests of no session, unanswered
    moved: set[int] = set()  # id() of connection messages that went to the session they created
    for record in records:
        if record.get("type") != "message":
            continue
        message = message_of(record) if keep is None else keep(message_of(record))
        session = message.session
        if session is None or isinstance(session, bool):
            connection.turns[0].append(message)
            if message.kind == "request" and message.direction == TO_AGENT:
                unsettled.request(message.direction, message.id, message)
            elif message.kind == "response":
                unsettled.response(message.direction, message.id)
            continue
        key = id_key(session)
        track = by_session.get(key)
        if track is None:
            track = by_session[key] = Track(len(found), session)
            found.append(track)
            if message.kind == "response" and message.direction == TO_CLIENT:
                request = unsettled.response(message.direction, message.id)
                if request is not None:  # session/new: the request that created it
                    moved.add(id(request))
                    track.turns[0].append(request)
        if message.kind == "request" and message.method == p.SESSION_PROMPT and message.direction == TO_AGENT:
            track.turns.append([])
        track.turns[-1].append(message)
    if moved:
        connection.turns[0] = [m for m in connection.turns[0] if id(m) not in moved]
    return found
