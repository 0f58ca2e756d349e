"""The bookkeeping of lines the rules cannot read.

Owns: lines over the parse limit (forwarded piece by piece while the member scanner reads
their id and method), batches, and messages orjson rejects for a detail (a lone surrogate,
NaN): their requests and responses are still tracked and paired through `Connection`, so that
every request is answered if the agent dies. Must never: hold a long line whole, or change a
byte of what it forwards.
"""

from __future__ import annotations

import orjson

from acp_bridge.core.answers import Answers
from acp_bridge.core.direction_state import DirectionState
from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.id_scanner import Members, MemberScanner
from acp_bridge.core.lines import Opaque
from acp_bridge.core.literals import written_numbers
from acp_bridge.core.messages import Direction, Frame
from acp_bridge.core.session import Connection, Pending
from acp_bridge.core.uncarried import Uncarried

ESCAPE = b"\\u"  # what could spell any key: the relay's chunk scan looks for it too


def has_escape(data: bytes) -> bool:
    """Could an escape spell a key (`"\\u0069d"` is `"id"`) in `data`?"""
    # A one-byte search runs at memchr speed; most lines have no backslash at all.
    return b"\\" in data and ESCAPE in data


class Unparsed:
    """Requests and responses in lines the rules cannot read: tracked and paired all the
    same, or refused through `answers` once the agent is gone."""

    def __init__(self, session: Connection, answers: Answers, directions: dict[Direction, DirectionState]) -> None:
        self.session = session
        self.answers = answers
        self.directions = directions  # the relay's records: each direction's long line, torn end
        self.uncarried: Uncarried | None = None  # in a proxy chain: what no envelope can carry, answered

    def opaque(self, direction: Direction, piece: Opaque, now: float, out: list[Forward]) -> None:
        """A piece of a line over the parse limit: forwarded at once, and scanned for its id
        and method, so that a long request is answered too if the agent dies."""
        state = self.directions[direction]
        scanner = state.long
        if scanner is None:
            scanner = state.long = MemberScanner()
        scanner.feed(piece.data)
        out.append(Forward(direction, piece.data, piece.data, Verdict.OPAQUE))
        chain = self.uncarried if direction is Direction.TO_AGENT else None
        long = chain.long_piece(piece) if chain is not None else None  # at its end: what the link made of it
        if not piece.end:
            return
        state.long = None
        if piece.data.endswith(b"\n"):
            found = scanner.finish()
            if chain is not None and scanner.is_batch:
                chain.long_batch(found, out)  # its pieces went on to the link, which drops them
            else:
                if chain is not None and long is not None:  # a request the link cannot wrap as one is answered
                    found = chain.long_message(long, found, out)
                self._members(direction, found, now, out)
        else:  # torn by the end of the stream: no message, and what follows needs a newline
            state.torn = True
        self.answers.release_held(direction, out)

    def other(self, frame: Frame, now: float, out: list[Forward]) -> None:
        """Not one JSON-RPC message the rules may read: forwarded as it came. A batch's
        requests and responses, and a message orjson rejects for a detail (a lone surrogate,
        NaN), are still paired, so that every request is answered if the agent dies. In a
        proxy chain, a client's batch, or message whose method is no string, is answered instead."""
        if self.uncarried is not None and self.uncarried.refused(frame, out):
            return
        out.append(Forward(frame.direction, frame.raw, frame.raw, Verdict.OTHER, frame))
        if not frame.raw.endswith(b"\n"):
            return  # torn by the end of the stream: no one can read it as a message
        if frame.batch is not None:
            self._batch(frame, now, out)
        elif frame.msg is None and (b'"id"' in frame.raw or has_escape(frame.raw)):
            self._members(frame.direction, MemberScanner.scan(frame.raw), now, out)

    def _batch(self, frame: Frame, now: float, out: list[Forward]) -> None:
        assert frame.batch is not None
        literals: dict[int, bytes] | None = None
        for element in frame.batch:
            if not isinstance(element, dict) or "id" not in element:
                continue
            id_, id_text = element["id"], None
            if not isinstance(id_, (str, int)) and id_ is not None:  # a float: as written
                if literals is None:
                    literals = written_numbers(frame.raw, frame.batch)
                text = literals.get(id(id_))
                id_text = None if text is None else orjson.Fragment(text)
            method = element.get("method")
            if isinstance(method, str):
                params = element.get("params")
                session_id = params.get("sessionId") if isinstance(params, dict) else None
                self.answers.note_request(Pending(frame.direction, id_, method, session_id, b"", now, id_text), out)
            elif "result" in element or "error" in element:
                self.session.pair(frame.direction, id_)

    def _members(self, direction: Direction, found: list[Members], now: float, out: list[Forward]) -> None:
        """Requests and responses known only by the member scan: tracked and paired."""
        for members in found:
            if not (members.is_request or members.is_response):
                continue
            try:
                id_ = members.value("id")
                method = members.value("method") if members.is_request else None
                hash(id_)
            except Exception:  # no value anyone could match an answer to: not tracked
                continue
            if members.is_response:
                self.session.pair(direction, id_)
                continue
            if isinstance(method, str):
                id_text = members.written("id")
                self.answers.note_request(Pending(direction, id_, method, None, b"", now, id_text), out)
