"""What `stats` keeps of each request until its answer, compactly: a capture of an agent that
died may leave a million requests unanswered, and `stats` lists them all (`--json`).

Owns: the fields kept of a request in flight (those `stats` prints of one left unanswered, and
the clock its latency is taken on), packed into 44 bytes when they are of the kinds a bridge
writes (seq and id 64-bit integers, time and mono floats; direction, method and session each
an index into the names seen once); a request with any other value keeps its fields in a
tuple. Pairing is `Pairs`'.
Must never: keep a record (its `raw` may be 16 MiB), change a value it keeps (an int time
stays an int, an absent field absent), or hold a name for longer than a request needs it
beyond `MAX_NAMES` short ones.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator
from typing import Any

from acp_bridge.capture.pairs import Pairs
from acp_bridge.core.protocol import Json

KEPT = ("seq", "time", "mono", "direction", "method", "id", "session")
# seq, time, mono, id, and the direction, method and session as indexes into the names
_PACKED = struct.Struct("=qddqIII")
_SEQ = struct.Struct("=q")
_LOW, _HIGH = -(1 << 63), 1 << 63
MAX_NAMES = 4096  # the distinct names kept once each (a method, a session); later ones per request
MAX_NAME = 256  # a longer name is kept per request, and let go with it
_ABSENT = object()  # a field the record does not have (absent is not null: time, mono)

Kept = bytes | tuple[Any, ...]


class InFlight:
    """The requests in flight while `stats` reads a capture, paired by `Pairs`, each kept in
    44 packed bytes (a dict of its fields took about 700)."""

    def __init__(self) -> None:
        self._pairs: Pairs[Kept] = Pairs()
        self._names: list[Any] = [_ABSENT]
        self._name_at: dict[tuple[type, Any], int] = {}

    def __repr__(self) -> str:
        return f"<InFlight open={len(self._pairs)} names={len(self._names)}>"

    def __len__(self) -> int:
        return len(self._pairs)

    def request(self, direction: Any, record: Json) -> None:
        """A request record that travelled `direction`, kept until its answer."""
        self._pairs.request(direction, record.get("id"), self._keep(record))

    def response(self, direction: Any, id_: Any) -> Json | None:
        """The kept fields of the request a response travelling `direction` with `id_`
        answers (as a dict, of the fields the record had), or None."""
        kept = self._pairs.response(direction, id_)
        return None if kept is None else self._fields(kept)

    def each(self, count: int | None = None) -> Iterator[Json]:
        """The first `count` requests in flight by seq (all when None; a request without a
        seq counts as 0, and equal seqs keep the order `Pairs.open` gives), as dicts made one
        at a time."""
        kept = self._pairs.open()
        shown = sorted(kept, key=_seq) if count is None else heapq.nsmallest(count, kept, key=_seq)
        del kept
        for item in shown:
            yield self._fields(item)

    def _keep(self, record: Json) -> Kept:
        seq, time, mono, id_ = (record.get(key) for key in ("seq", "time", "mono", "id"))
        if (type(seq) is int and type(id_) is int and type(time) is float and type(mono) is float
                and _LOW <= seq < _HIGH and _LOW <= id_ < _HIGH):
            names = [self._name(record.get(key, _ABSENT)) for key in ("direction", "method", "session")]
            if None not in names:
                return _PACKED.pack(seq, time, mono, id_, *names)
        return tuple(record.get(key, _ABSENT) for key in KEPT)

    def _name(self, value: Any) -> int | None:
        """The index of `value` among the names kept once, None when it is not kept so."""
        if value is _ABSENT:
            return 0
        kind = type(value)
        if not (value is None or kind is int or (kind is str and len(value) <= MAX_NAME)):
            return None
        at = self._name_at.get((kind, value))
        if at is None and len(self._names) < MAX_NAMES:
            at = self._name_at[(kind, value)] = len(self._names)
            self._names.append(value)
        return at

    def _fields(self, kept: Kept) -> Json:
        if isinstance(kept, bytes):
            seq, time, mono, id_, direction, method, session = _PACKED.unpack(kept)
            names = self._names
            kept = (seq, time, mono, names[direction], names[method], id_, names[session])
        return {key: value for key, value in zip(KEPT, kept, strict=True) if value is not _ABSENT}


def _seq(kept: Kept) -> Any:
    if isinstance(kept, bytes):
        return _SEQ.unpack_from(kept)[0]
    seq = kept[0]
    return 0 if seq is _ABSENT else seq
