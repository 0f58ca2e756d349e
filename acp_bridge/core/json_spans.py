"""Where a JSON value's bytes are in a line, without decoding the value.

Owns: finding the byte span of an object's members (`members`), of one value (`value_end`),
and, for a line that arrives in pieces, where a value that began in an earlier piece ends
(`ValueEnd`). The proxy link (core/proxy_link.py) splices spans from one message into
another with them, so that params pass on byte for byte: a number keeps its spelling (a
100-digit one too), a string its escapes. Must never: decode a value it only skips, or
recurse (an array nested 100,000 deep is a counter, not a stack).

It checks structure only as far as it must to find an end: a line orjson has accepted is
well formed; for one it has not, `SpanError` says that a span could not be found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import orjson

_WS = re.compile(rb"[ \t\r\n]*")
_STRING_STOP = re.compile(rb'["\\]')
_STRUCTURE = re.compile(rb'["{}\[\]]')
_SCALAR = re.compile(rb"[^,}\] \t\r\n]+")
_QUOTE, _BACKSLASH, _OPEN_OBJECT, _OPEN_ARRAY, _CLOSE_OBJECT, _COMMA, _COLON = b'"\\{[},:'


class SpanError(ValueError):
    """The bytes are not the JSON the caller expected there."""


def skip_ws(buf: bytes, i: int) -> int:
    match = _WS.match(buf, i)
    assert match is not None  # `*` matches the empty string
    return match.end()


def string_end(buf: bytes, i: int) -> int:
    """`buf[i]` opens a string: the index just past its closing quote."""
    j = i + 1
    while True:
        stop = _STRING_STOP.search(buf, j)
        if stop is None:
            raise SpanError("a string is not closed")
        if buf[stop.start()] == _QUOTE:
            return stop.start() + 1
        j = stop.start() + 2  # a backslash escapes the next byte (`\"`, `\\`, `\u...`)


def value_end(buf: bytes, i: int) -> int:
    """`buf[i]` begins a value: the index just past its last byte."""
    if i >= len(buf):
        raise SpanError("a value is missing")
    first = buf[i]
    if first == _QUOTE:
        return string_end(buf, i)
    if first in (_OPEN_OBJECT, _OPEN_ARRAY):
        depth, j = 0, i
        while True:
            stop = _STRUCTURE.search(buf, j)
            if stop is None:
                raise SpanError("an object or array is not closed")
            at = stop.start()
            byte = buf[at]
            if byte == _QUOTE:
                j = string_end(buf, at)
                continue
            depth += 1 if byte in (_OPEN_OBJECT, _OPEN_ARRAY) else -1
            j = at + 1
            if depth == 0:
                return j
    scalar = _SCALAR.match(buf, i)
    if scalar is None:
        raise SpanError("a value is missing")
    if scalar.end() == len(buf):  # what follows could still be digits of it
        raise SpanError("a number or literal runs to the end of the bytes")
    return scalar.end()


def members(buf: bytes, i: int) -> Iterator[tuple[str, int, int]]:
    """`buf[i]` (after whitespace) opens an object: each member's key and value span, in order.

    Stops early when the caller stops; raises `SpanError` where the bytes stop being an object.
    """
    i = skip_ws(buf, i)
    if i >= len(buf) or buf[i] != _OPEN_OBJECT:
        raise SpanError("not an object")
    i = skip_ws(buf, i + 1)
    if i < len(buf) and buf[i] == _CLOSE_OBJECT:
        return
    while True:
        if i >= len(buf) or buf[i] != _QUOTE:
            raise SpanError("a member has no key")
        key_end = string_end(buf, i)
        raw = buf[i + 1 : key_end - 1]
        key = raw.decode("utf-8", "replace") if b"\\" not in raw else _decoded_key(buf[i:key_end])
        i = skip_ws(buf, key_end)
        if i >= len(buf) or buf[i] != _COLON:
            raise SpanError("a key has no value")
        start = skip_ws(buf, i + 1)
        end = value_end(buf, start)
        yield key, start, end
        i = skip_ws(buf, end)
        if i < len(buf) and buf[i] == _COMMA:
            i = skip_ws(buf, i + 1)
            continue
        if i < len(buf) and buf[i] == _CLOSE_OBJECT:
            return
        raise SpanError("an object is not closed")


def head_members(buf: bytes, i: int = 0) -> Iterator[tuple[str, int, int | None]]:
    """As `members`, over the head of a line too long to hold: a value that does not end
    within `buf` is yielded with end None, and the walk stops there."""
    walk = members(buf, i)
    i = skip_ws(buf, i)
    while True:
        try:
            key, start, end = next(walk)
        except StopIteration:
            return
        except SpanError:
            cut = _cut_value(buf, i)
            if cut is not None:
                yield cut
            return
        yield key, start, end
        i = end


def _cut_value(buf: bytes, i: int) -> tuple[str, int, None] | None:
    """After the member that ended at `i`: the next member, if its value runs past `buf`."""
    i = skip_ws(buf, i)
    if i < len(buf) and buf[i] in (_COMMA, _OPEN_OBJECT):
        i = skip_ws(buf, i + 1)
    if i >= len(buf) or buf[i] != _QUOTE:
        return None
    try:
        key_end = string_end(buf, i)
    except SpanError:
        return None
    raw = buf[i:key_end]
    key = _decoded_key(raw) if b"\\" in raw else raw[1:-1].decode("utf-8", "replace")
    i = skip_ws(buf, key_end)
    if i >= len(buf) or buf[i] != _COLON:
        return None
    start = skip_ws(buf, i + 1)
    if start >= len(buf) or buf[start] not in (_QUOTE, _OPEN_OBJECT, _OPEN_ARRAY):
        return None
    return key, start, None


def _decoded_key(raw: bytes) -> str:
    try:
        key = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SpanError("a key is not a JSON string") from exc
    assert isinstance(key, str)
    return key


def spans(buf: bytes, i: int = 0) -> dict[str, tuple[int, int]]:
    """Every member's span, by key; a repeated key's last one (as orjson reads it)."""
    return {key: (start, end) for key, start, end in members(buf, i)}


class ValueEnd:
    """Where a value that began with an object, an array or a string ends, over pieces.

    Feed it the pieces from the value's first byte on; `feed` returns the index in that
    piece just past the value's last byte, or None while it goes on. It keeps three numbers
    between pieces, never the bytes.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False  # the piece before ended inside a string with a backslash
        self.started = False

    def feed(self, piece: bytes) -> int | None:
        j = 0
        if not self.started:
            if not piece:
                return None
            self.started = True
            if piece[0] == _QUOTE:
                self.in_string, j = True, 1
            elif piece[0] not in (_OPEN_OBJECT, _OPEN_ARRAY):
                raise SpanError("only an object, an array or a string can be followed over pieces")
        while True:
            if self.in_string:
                if self.escaped:
                    if j >= len(piece):
                        return None
                    self.escaped, j = False, j + 1
                stop = _STRING_STOP.search(piece, j)
                if stop is None:
                    return None
                at = stop.start()
                if piece[at] == _BACKSLASH:
                    if at + 1 >= len(piece):
                        self.escaped = True
                        return None
                    j = at + 2
                    continue
                self.in_string, j = False, at + 1
                if self.depth == 0:
                    return j
                continue
            stop = _STRUCTURE.search(piece, j)
            if stop is None:
                return None
            at = stop.start()
            byte = piece[at]
            j = at + 1
            if byte == _QUOTE:
                self.in_string = True
                continue
            self.depth += 1 if byte in (_OPEN_OBJECT, _OPEN_ARRAY) else -1
            if self.depth == 0:
                return j
