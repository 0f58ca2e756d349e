"""Members: the top-level `id` and `method` of a line the bridge cannot parse whole.

Owns: `MemberScanner`, a resumable scan of one JSON object fed in pieces, that finds the
names of its top-level members and the exact text of its `id` and `method` values, and
`Members`, what it found. Used where `orjson.loads` cannot help: a line over the parse limit
(streamed through in pieces, never held whole), and a line orjson rejects for a detail its
endpoints accept (a lone surrogate escape such as `"\\ud83d"`, which JavaScript's
`JSON.stringify` writes; `NaN`; a number beyond 64 bits). Knowing the id of every request
that goes through is what lets the bridge answer each one when the agent dies.

Must never: hold more than a few KiB of a line, raise on any input, or judge validity (it
reads structure only as far as finding those members needs; garbage gives `Members(False)`).

Cost: a string is skipped by searching for its closing quote, so a long line is a handful
of C-level searches per quote it contains; the scan stops as soon as `id` and `method`
(or `result`/`error`) are known, which for the usual `{"jsonrpc":..,"id":..,"method":..`
layout is within the first hundred bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_STRUCTURE = re.compile(rb'[{}\[\]",]')
_WS = b" \t\r\n"
_CAPTURED = frozenset({"id", "method"})
MAX_LITERAL = 64 * 1024  # an id longer than this is not tracked (and is no real client's)
_MAX_KEY = 256
_BACKSLASH = 0x5C


@dataclass(slots=True)
class Members:
    """What a scan found. `obj`: the line is a JSON object (as far as the scan read)."""

    obj: bool
    keys: set[str] = field(default_factory=set)  # names of the top-level members seen
    literals: dict[str, bytes] = field(default_factory=dict)  # exact text of `id`, `method`

    @property
    def is_request(self) -> bool:
        return "method" in self.keys and "id" in self.literals

    @property
    def is_response(self) -> bool:
        return "method" not in self.keys and "id" in self.literals and bool(self.keys & {"result", "error"})

    def value(self, key: str) -> Any:
        """The member's value as a JSON value (stdlib: exact big ints, lone surrogates)."""
        return json_value(self.literals[key])


def json_value(literal: bytes) -> Any:
    """Read one scalar the way the relay's parser would, for use as an id key.

    orjson reads integers beyond 64 bits as floats; so does this, so that a request read
    one way pairs with a response read the other.
    """
    value = json.loads(literal)
    if type(value) is int and not -(2**63) <= value < 2**64:
        value = float(value)
    return value


class MemberScanner:
    """Feed the pieces of one line, then `finish()`; or `scan(line)` for a whole one."""

    def __init__(self) -> None:
        self._found = Members(True)
        self._done = False  # nothing more to learn: stop reading
        self._started = False  # the opening brace has been seen
        self._depth = 0
        self._in_string = False
        self._odd_backslashes = False  # the string read so far ends in an unpaired backslash
        self._want_key = False  # at depth 1, the next string is a member name
        self._capture: list[bytes] | None = None  # text of the key or value being captured
        self._captured = 0
        self._is_key = False
        self._key: str | None = None  # the member whose value comes next (depth 1)
        self._value: list[bytes] | None = None  # a captured scalar value, until it ends

    @classmethod
    def scan(cls, line: bytes) -> Members:
        scanner = cls()
        scanner.feed(line)
        return scanner.finish()

    def feed(self, data: bytes) -> None:
        if self._done or not data:
            return
        try:
            self._feed(data)
        except (ValueError, UnicodeDecodeError, RecursionError):  # pragma: no cover - defensive
            self._give_up()

    def finish(self) -> Members:
        """The line ended: what was found (nothing, unless it was an object)."""
        if self._value is not None:
            self._end_value(b"")
        if not self._started:
            return Members(False)
        return self._found

    # -- the scan ---------------------------------------------------------------------------

    def _give_up(self) -> None:
        self._found = Members(False)
        self._started = True
        self._done = True

    def _feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        if not self._started:
            while i < n and data[i] in _WS:
                i += 1
            if i == n:
                return
            if data[i] != 0x7B:  # "{": a batch, a scalar, or not JSON: nothing to find
                self._give_up()
                return
            self._started, self._depth, self._want_key = True, 1, True
            i += 1
        while i < n and not self._done:
            if self._in_string:
                i = self._string(data, i)
                continue
            m = _STRUCTURE.search(data, i)
            stop = n if m is None else m.start()
            if self._value is not None and stop > i:
                self._add_value(data[i:stop])
            if m is None:
                return
            i = stop + 1
            char = data[stop]
            if char == 0x22:  # '"'
                self._open_string()
            elif char in b"{[":
                if self._value is not None:
                    self._end_value(b"", structured=True)
                self._depth += 1
            elif char in b"}]":
                if self._value is not None:
                    self._end_value(b"")
                self._depth -= 1
                if self._depth <= 0:
                    self._done = True  # the object is complete
            else:  # ","
                if self._value is not None:
                    self._end_value(b"")
                if self._depth == 1:
                    self._want_key = True

    def _open_string(self) -> None:
        self._in_string, self._odd_backslashes = True, False
        self._capture, self._captured, self._is_key = None, 0, False
        if self._depth != 1:
            return
        if self._want_key:
            self._want_key, self._is_key, self._capture = False, True, [b'"']
            self._captured = 1
        elif self._value is not None:  # a string value of a captured member
            self._value = None
            self._capture, self._captured = [b'"'], 1

    def _string(self, data: bytes, i: int) -> int:
        """Inside a string: find its closing quote; return where to go on."""
        n = len(data)
        start = i
        while True:
            q = data.find(b'"', i)
            end = n if q < 0 else q
            k = end - 1
            while k >= i and data[k] == _BACKSLASH:
                k -= 1
            run = end - 1 - k
            odd = bool(run & 1) ^ (self._odd_backslashes if k < i else False)
            if q < 0:
                self._odd_backslashes = odd
                self._keep(data[start:n])
                return n
            self._odd_backslashes = False
            if odd:  # an escaped quote: still inside
                i = q + 1
                continue
            self._keep(data[start : q + 1])
            self._in_string = False
            self._end_string()
            return q + 1

    def _keep(self, part: bytes) -> None:
        if self._capture is None or not part:
            return
        limit = _MAX_KEY if self._is_key else MAX_LITERAL
        self._captured += len(part)
        if self._captured > limit:
            self._capture = None  # too long to matter (a key) or to track (an id)
            if not self._is_key:
                self._key = None
            return
        self._capture.append(part)

    def _end_string(self) -> None:
        capture, self._capture = self._capture, None
        if self._is_key:
            self._is_key = False
            key = _decode_key(b"".join(capture)) if capture is not None else None
            self._key = key
            if key is not None:
                self._found.keys.add(key)
                if key in _CAPTURED:
                    self._value = []  # whatever follows the colon, until the value ends
            self._check_done()
            return
        if capture is not None and self._key is not None and self._depth == 1:
            self._found.literals[self._key] = b"".join(capture)
            self._key = None
            self._check_done()

    def _add_value(self, part: bytes) -> None:
        assert self._value is not None
        self._value.append(part)
        if sum(map(len, self._value)) > MAX_LITERAL:
            self._value = None

    def _end_value(self, tail: bytes, *, structured: bool = False) -> None:
        """A scalar value of a captured member ends (or turns out to be an object/array)."""
        parts, self._value = self._value, None
        key, self._key = self._key, None
        if parts is None or key is None or structured:
            return
        text = (b"".join(parts) + tail).strip(_WS)
        if text.startswith(b":"):
            text = text[1:].strip(_WS)
        if text:
            self._found.literals[key] = text
            self._check_done()

    def _check_done(self) -> None:
        found = self._found
        if "id" in found.literals and ("method" in found.literals or found.keys & {"result", "error"}):
            self._done = True


def _decode_key(literal: bytes) -> str | None:
    if b"\\" not in literal:
        try:
            return literal[1:-1].decode()
        except UnicodeDecodeError:
            return None
    try:
        key = json.loads(literal)
    except ValueError:
        return None
    return key if isinstance(key, str) else None
