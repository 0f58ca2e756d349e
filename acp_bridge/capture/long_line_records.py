"""The record of a line over the parse limit, gathered while its pieces go by.

Owns: one record for a whole line over the parse limit, however many pieces it went out in
(`LongLineRecords` follows one such line a direction, `long_record` writes its record): its
first `HEAD_BYTES` as `raw` (text, but for a character cut in two at the end, else base64),
its size, `truncated` when it was longer than its head, `unfinished` when the stream ended
inside it, and the search of every piece for what could make the line hold a secret, also
across the cut between two pieces: the head is parsed by nobody, so it is kept only when the
whole line is clear of them (`redaction.Redactor.may_hold_any_secret`), and withheld whole
otherwise. `records.CaptureEncoder` hands it each opaque piece and numbers the records.
Must never: hold more of a line than its head and the overlap of a needle, parse a long
line, do IO, or read a clock (times are passed in).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from acp_bridge.capture.redaction import REDACTED, WHOLE, Redactor
from acp_bridge.core.messages import Direction, Kind
from acp_bridge.core.protocol import Json
from acp_bridge.core.relay import Forward, Verdict

HEAD_BYTES = 4096  # of a line over the parse limit, kept in its record


@dataclass(slots=True)
class LongLineSoFar:
    """A line over the parse limit while its pieces go by: what its one record needs."""

    size: int = 0
    head: bytearray = field(default_factory=bytearray)  # the first HEAD_BYTES
    tail: bytes = b""  # the last bytes seen, for a needle cut in two between pieces
    secret: bool = False  # it could hold a secret: the head is withheld
    rules: tuple[str, ...] = ()  # ("stray-output",): stray agent output, diverted to stderr


def _ends_line(piece: bytes) -> bool:
    """Whether an opaque piece is the last of its line: framing cuts a long line's pieces
    at its newline, and ends one cut short by the end of the stream with an empty piece."""
    return not piece or piece.endswith(b"\n")


class LongLineRecords:
    """The lines over the parse limit whose pieces are going by, one a direction.

    Args:
        redactor: what the records mask; its needles decide whether a head is withheld.
    """

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._open: dict[Direction, LongLineSoFar] = {}

    def __repr__(self) -> str:
        return f"<LongLineRecords open={sorted(direction.value for direction in self._open)}>"

    def take(self, fwd: Forward) -> LongLineSoFar | None:
        """Take one piece of a line over the parse limit: the line once this piece was its
        last (its record is due), else None.

        Every piece is searched for what could make the line hold a secret (the needles of
        `Redactor.may_hold_any_secret`, also across the cut between two pieces): the head is
        parsed by nobody, so it is kept only when the whole line is clear of them."""
        long = self._open.get(fwd.direction)
        if long is None:
            long = self._open[fwd.direction] = LongLineSoFar(rules=fwd.rules)
        data = fwd.raw
        long.size += len(data)
        room = HEAD_BYTES - len(long.head)
        if room > 0:
            long.head += data[:room]
        if data and not long.secret:
            redactor = self.redactor
            overlap = redactor.overlap
            long.secret = (redactor.may_hold_any_secret(long.tail + data[:overlap])
                           or redactor.may_hold_any_secret(data))
            long.tail = data[-overlap:] if len(data) >= overlap else (long.tail + data)[-overlap:]
        if _ends_line(data):
            del self._open[fwd.direction]
            return long
        return None

    def cut_short(self) -> list[tuple[Direction, LongLineSoFar]]:
        """The lines the stream ended inside (their records are `unfinished`), in the order
        they began; none of them is followed any more."""
        lines = list(self._open.items())
        self._open.clear()
        return lines


def _put_head(record: Json, head: bytes) -> None:
    """The first bytes of a long line as `raw`: text if they are UTF-8 but for a character
    cut in two at the end (dropped), else base64."""
    try:
        record["raw"] = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.end == len(head) and exc.start >= len(head) - 3 and exc.reason == "unexpected end of data":
            record["raw"] = head[:exc.start].decode("utf-8")
        else:
            record["raw_b64"] = base64.b64encode(head).decode("ascii")


def long_record(seq: int, direction: Direction, long: LongLineSoFar, wall: float, mono: float,
                *, unfinished: bool = False) -> Json:
    """The one record of a line over the parse limit, numbered `seq`: its head, or
    `REDACTED` (withheld whole) when it could hold a secret."""
    record: Json = {
        "type": "message", "seq": seq, "time": wall, "mono": mono,
        "direction": direction.value, "kind": Kind.OTHER.value,
        "verdict": (Verdict.DIVERTED if long.rules else Verdict.OPAQUE).value,
        "method": None, "id": None, "session": None, "rules": list(long.rules), "size": long.size,
    }
    head = bytes(long.head)
    if long.secret:
        record["raw"] = REDACTED
    else:
        _put_head(record, head)
    if long.size > len(head):
        record["truncated"] = True
    if unfinished:
        record["unfinished"] = True
    if long.secret:
        record["redacted"] = WHOLE
    return record
