"""Frames: one line of the stream, classified as a JSON-RPC message or not.

Owns: `Direction`, `Kind`, `Frame`, `classify` and `encode`. Must never: change bytes (a
`Frame` keeps the line exactly as it came in, terminator included) or raise on bad input:
anything that is not a single JSON-RPC object is `Kind.OTHER` and passes through as it is.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

import orjson

from acp_bridge.core.protocol import Json


class Direction(enum.Enum):
    """Where a line is going: toward the agent (from the client) or toward the client."""

    TO_AGENT = "to-agent"
    TO_CLIENT = "to-client"

    # Members are singletons compared by identity, so an identity hash agrees with ==; it
    # is C-level, where Enum's own hashes the name in Python (several lookups per line).
    __hash__ = object.__hash__

    @property
    def arrow(self) -> str:
        return "->" if self is Direction.TO_AGENT else "<-"

    @property
    def reverse(self) -> Direction:
        return _REVERSE[self]

    def __str__(self) -> str:
        return self.arrow


_REVERSE = {Direction.TO_AGENT: Direction.TO_CLIENT, Direction.TO_CLIENT: Direction.TO_AGENT}


class Kind(enum.Enum):
    REQUEST = "request"
    RESPONSE = "response"
    NOTIFICATION = "notification"
    OTHER = "other"

    __hash__ = object.__hash__  # see Direction


@dataclass(slots=True)
class Frame:
    """One line: `raw` is exactly the bytes that arrived; `msg` the parsed object, if any.

    Treat it as immutable (`with_msg` makes a changed copy); it is not frozen only because
    that would cost a microsecond per parsed line.
    """

    direction: Direction
    raw: bytes
    kind: Kind
    msg: Json | None = None

    def __repr__(self) -> str:
        what = self.method or (f"id={self.id!r}" if self.kind is Kind.RESPONSE else "")
        return f"<Frame {self.direction.arrow} {self.kind.value} {what} {len(self.raw)}B>"

    @property
    def method(self) -> str | None:
        if self.msg is None:
            return None
        method = self.msg.get("method")
        return method if isinstance(method, str) else None

    @property
    def id(self) -> Any:
        return None if self.msg is None else self.msg.get("id")

    @property
    def params(self) -> Any:
        return None if self.msg is None else self.msg.get("params")

    @property
    def terminator(self) -> bytes:
        if self.raw.endswith(b"\r\n"):
            return b"\r\n"
        if self.raw.endswith(b"\n"):
            return b"\n"
        return b""

    def with_msg(self, msg: Json) -> Frame:
        """The same line carrying a rewritten message (what later rewrites see)."""
        return replace(self, msg=msg)


def classify(direction: Direction, raw: bytes) -> Frame:
    """Parse one line into a Frame; never raises."""
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return Frame(direction, raw, Kind.OTHER)
    if not isinstance(msg, dict):  # batches, scalars: forwarded, never rewritten
        return Frame(direction, raw, Kind.OTHER)
    if "method" in msg:
        if not isinstance(msg["method"], str):
            return Frame(direction, raw, Kind.OTHER, msg)
        kind = Kind.REQUEST if "id" in msg else Kind.NOTIFICATION
    elif "id" in msg and ("result" in msg or "error" in msg):
        kind = Kind.RESPONSE
    else:
        kind = Kind.OTHER
    return Frame(direction, raw, kind, msg)


def encode(msg: Json, terminator: bytes = b"\n") -> bytes:
    """Serialise a message the bridge wrote or changed, ending it like the line it replaces."""
    return orjson.dumps(msg) + terminator


def id_key(id_: Any) -> tuple[type, Any]:
    """A dict key for a JSON-RPC id: `1`, `1.0`, `true` and `"1"` are all different ids."""
    if isinstance(id_, (dict, list)):  # not a valid id, but it must not crash the bridge
        return (type(id_), orjson.dumps(id_, option=orjson.OPT_SORT_KEYS))
    return (type(id_), id_)
