"""Frames: one line of the stream, classified as a JSON-RPC message or not.

Owns: `Direction`, `Kind`, `Frame`, `classify` and `encode`. Must never: change bytes (a
`Frame` keeps the line exactly as it came in, terminator included) or raise on bad input:
anything that is not a single JSON-RPC object is `Kind.OTHER` and passes through as it is.
"""

from __future__ import annotations

import enum
import json
import math
import re
import reprlib
from dataclasses import dataclass, replace
from typing import Any

import orjson

from acp_bridge.core.literals import number_literals
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
    batch: list[Any] | None = None  # a line that is a JSON array: its elements (v2 batches)

    def __repr__(self) -> str:
        what = self.method or (f"id={brief(self.id)}" if self.kind is Kind.RESPONSE else "")
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
    def result(self) -> Any:
        return None if self.msg is None else self.msg.get("result")

    @property
    def error(self) -> Any:
        return None if self.msg is None else self.msg.get("error")

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


# The members of Direction and Kind as module globals, for the per-line paths to import (and
# Verdict's, in core/forward.py): on Python 3.11 an Enum's class attribute goes through
# `EnumType.__getattr__`'s slow hook (~150 ns a lookup against ~12 ns for a global), and a
# parsed line is looked up half a dozen times. Elsewhere, `Kind.REQUEST` reads better.
TO_AGENT, TO_CLIENT = Direction.TO_AGENT, Direction.TO_CLIENT
REQUEST, RESPONSE, NOTIFICATION, OTHER = Kind.REQUEST, Kind.RESPONSE, Kind.NOTIFICATION, Kind.OTHER


def classify(direction: Direction, raw: bytes) -> Frame:
    """Parse one line into a Frame; never raises."""
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        msg = _lenient(raw, exc)
        if msg is _REJECTED:
            return Frame(direction, raw, OTHER)
    if not isinstance(msg, dict):  # batches, scalars: forwarded, never rewritten
        return Frame(direction, raw, OTHER, batch=msg if isinstance(msg, list) else None)
    if "method" in msg:
        if not isinstance(msg["method"], str):
            return Frame(direction, raw, OTHER, msg)
        kind = REQUEST if "id" in msg else NOTIFICATION
    elif "id" in msg and ("result" in msg or "error" in msg):
        kind = RESPONSE
    else:
        kind = OTHER
    return Frame(direction, raw, kind, msg)


def is_request(msg: Any) -> bool:
    """Is `msg` a request, as `classify` tells: a method, and an id to answer it by?"""
    return type(msg) is dict and isinstance(msg.get("method"), str) and "id" in msg


_REJECTED: Any = object()


def loads(raw: bytes) -> Any:
    """Parse one line as `classify` does (lone surrogate escapes accepted).

    Raises:
        ValueError: not JSON the bridge reads (orjson.JSONDecodeError is a ValueError).
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        msg = _lenient(raw, exc)
        if msg is _REJECTED:
            raise
        return msg


def _lenient(raw: bytes, exc: orjson.JSONDecodeError) -> Any:
    """The line read despite orjson's refusal, when the refusal is a lone surrogate escape
    (`"\\ud83d"`: valid JSON, which JavaScript's `JSON.stringify` writes for half an emoji);
    `_REJECTED` for anything else. Read as orjson would read it otherwise: NaN, Infinity
    and numbers beyond a double are still refused, integers beyond 64 bits become floats."""
    if "surrogate" not in str(exc):
        return _REJECTED
    try:
        text = raw.decode("utf-8")  # not json's guess: NUL bytes would make it read UTF-16
        return json.loads(text, parse_int=_orjson_int, parse_float=_finite, parse_constant=_refuse)
    except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError are ValueErrors
        return _REJECTED


def _orjson_int(text: str) -> int | float:
    value = int(text)
    return value if -(2**63) <= value < 2**64 else _finite(text)


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number out of range: {text[:20]}")
    return value


def _refuse(text: str) -> Any:
    raise ValueError(f"not JSON: {text}")


class Unencodable(ValueError):
    """A message that cannot be written back faithfully (nested past orjson's 254 levels,
    or numbers that cannot be kept as they were written); the caller forwards the original."""


def encode(msg: Json, terminator: bytes = b"\n", *, source: Frame | None = None) -> bytes:
    """Serialise a message the bridge wrote or changed, ending it like the line it replaces.

    With `source`, the line `msg` was made from: every number taken from it is written as
    it was written there (orjson would turn `1e3` into `1000.0` and an integer beyond 64
    bits into a float, and a client could no longer match such an id).

    Raises:
        Unencodable: when that is not possible; nothing of the message has gone out.
    """
    try:
        if source is not None and source.msg is not None:
            literals = number_literals(source.raw, source.msg)
            if literals:
                msg = _with_literals(msg, literals, 0)
        try:
            out = orjson.dumps(msg)
        except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
            if "surrogates" not in str(exc):
                raise
            # A lone surrogate (read by `_lenient`) that orjson will not write: written as
            # the escape it came as.
            out = orjson.dumps(_with_escapes(msg, 0))
    except (TypeError, ValueError, RecursionError) as exc:
        raise Unencodable(str(exc)) from exc
    # orjson writes NaN and Infinity as null: a value nobody wrote. Only a message with a
    # null in it can hold one, so the walk is for those only.
    if b"null" in out:
        where = non_finite(msg)
        if where is not None:
            raise Unencodable(f"NaN or Infinity at {where or '/'}: JSON has no such number")
    return out + terminator


def non_finite(value: Any) -> str | None:
    """The JSON pointer of the first float in `value` that is NaN or infinite, or None.

    Looked for without building a path (the usual answer is None); the path is made only
    for the one found. `value` was written by orjson, so it is nested 254 levels at most.
    """
    if not _holds_non_finite(value):
        return None
    path = ""
    while True:
        kind = type(value)
        if kind is dict:
            key, value = next((k, v) for k, v in value.items() if _holds_non_finite(v))
            path += "/" + _token(key)
        elif kind is list or kind is tuple:
            index, value = next((i, v) for i, v in enumerate(value) if _holds_non_finite(v))
            path += f"/{index}"
        else:
            return path


def _holds_non_finite(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        for member in value.values():  # noqa: SIM110 - a loop: any() with a generator costs more
            if _holds_non_finite(member):
                return True
        return False
    if kind is list or kind is tuple:
        for member in value:  # noqa: SIM110 - a loop: any() with a generator costs more
            if _holds_non_finite(member):
                return True
        return False
    return isinstance(value, float) and not math.isfinite(value)


def _token(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_string(text: str) -> bytes:
    """`text` as a JSON string, each lone surrogate as a `\\uXXXX` escape."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", quoted).encode()


def _with_escapes(value: Any, depth: int) -> Any:
    """`value` with each string that holds a lone surrogate as a written `orjson.Fragment`
    (an object with such a member name is written whole)."""
    if depth > 255:  # orjson writes no deeper either
        raise Unencodable("nested too deep to write")
    kind = type(value)
    if kind is str:
        return orjson.Fragment(_json_string(value)) if _SURROGATE.search(value) else value
    if kind is dict:
        if any(_SURROGATE.search(key) for key in value):
            members = (_json_string(key) + b":" + orjson.dumps(_with_escapes(item, depth + 1))
                       for key, item in value.items())
            return orjson.Fragment(b"{" + b",".join(members) + b"}")
        return {key: _with_escapes(item, depth + 1) for key, item in value.items()}
    if kind is list:
        return [_with_escapes(item, depth + 1) for item in value]
    return value


def _with_literals(value: Any, literals: dict[int, bytes], depth: int) -> Any:
    if depth > 255:  # orjson writes no deeper either
        raise Unencodable("nested too deep to write")
    kind = type(value)
    if kind is float:
        text = literals.get(id(value))
        return value if text is None else orjson.Fragment(text)
    if kind is dict:
        return {k: _with_literals(v, literals, depth + 1) for k, v in value.items()}
    if kind is list:
        return [_with_literals(v, literals, depth + 1) for v in value]
    return value


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother = 3, 60, 60


def brief(value: Any) -> str:
    """A short repr of a value from the wire, for logs: bounded in depth and length (a
    plain repr of an id nested 1,000 deep raises RecursionError)."""
    return _BRIEF.repr(value)


def id_key(id_: Any) -> tuple[type, Any]:
    """A dict key for a JSON-RPC id: `1`, `1.0`, `true` and `"1"` are all different ids."""
    kind = type(id_)
    if kind is int or kind is str:  # nearly every id: no isinstance walk
        return (kind, id_)
    if isinstance(id_, (dict, list)):  # not a valid id, but it must not crash the bridge
        try:  # as text: a bytes object from orjson keeps its 4 KiB buffer for as long as it lives
            return (type(id_), orjson.dumps(id_, option=orjson.OPT_SORT_KEYS).decode())
        except TypeError:  # nested past what orjson writes: such ids pair with nothing
            return (type(id_), None)
    return (type(id_), id_)
