"""Members: the top-level `id` and `method` of a line the bridge cannot parse whole.

Owns: `MemberScanner`, a resumable scan of one JSON object, or of a batch (an array of
objects), fed in pieces, that finds the names of each object's members and the exact text
of its `id` and `method` values, and `Members`, what it found for one object. Used where
`orjson.loads` cannot help: a line over the parse limit (streamed through in pieces, never
held whole), and a line orjson rejects for a detail its endpoints accept (`NaN`; a number
orjson cannot hold). A lone surrogate escape such as `"\\ud83d"`, which JavaScript's
`JSON.stringify` writes, no longer gets here in a line under the limit: `classify` reads it
(`messages.loads`), and `literals.json_value` reads such an id to the same key. Knowing the id of
every request that goes through is what lets the bridge answer each one when the agent dies.

Must never: hold more than a few KiB of a line, raise on any input, or judge validity (it
reads structure only as far as finding those members needs; garbage gives nothing).

Cost: each piece is copied twice with its escape pairs blanked out (`literals.blank_escapes`),
at C speed, so that a string's end is one `find`; the Python loop then runs once per string and
structural character outside long strings. A single object's scan stops as soon as its
`id` and `method` (or `result`/`error`) are known, which for the usual
`{"jsonrpc":..,"id":..,"method":..` layout is within the first hundred bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.core.literals import STRUCTURE, blank_escapes, decode_key, json_value

_WS = b" \t\r\n"
_CAPTURED = frozenset({"id", "method"})
MAX_LITERAL = 64 * 1024  # an id longer than this is not tracked (and is no real client's)
_MAX_KEY = 256


@dataclass(slots=True)
class Members:
    """What a scan found in one object: the names of its members, and the exact text of
    its `id` and `method` values when they are scalars."""

    keys: set[str] = field(default_factory=set)
    literals: dict[str, bytes] = field(default_factory=dict)

    @property
    def is_request(self) -> bool:
        return "method" in self.literals and "id" in self.literals

    @property
    def is_response(self) -> bool:
        return "method" not in self.keys and "id" in self.literals and bool(self.keys & {"result", "error"})

    def value(self, key: str) -> Any:
        """The member's value as a JSON value, for use as an id key (see `json_value`)."""
        return json_value(self.literals[key])

    def written(self, key: str) -> Any:
        """The member's value to write back as it was written (an `orjson.Fragment`), or
        None when it is not a scalar the scan kept."""
        literal = self.literals.get(key)
        return None if literal is None else orjson.Fragment(literal)


class MemberScanner:
    """Feed the pieces of one line, then `finish()`; or `scan(line)` for a whole one."""

    def __init__(self) -> None:
        self._found: list[Members] = []
        self._current: Members | None = None  # the object whose members are being read
        self._member_depth = 0  # 1 for an object, 2 for the objects of a batch; 0: not started
        self._done = False  # nothing more to learn: stop reading
        self._depth = 0
        self._in_string = False
        self._escaped_first = False  # inside a string, the next piece starts with an escaped byte
        self._want_key = False  # the next string is a member name
        self._capture: list[bytes] | None = None  # text of the key or value being captured
        self._captured = 0
        self._is_key = False
        self._key: str | None = None  # the member whose value comes next
        self._value: list[bytes] | None = None  # a captured scalar value, until it ends

    @classmethod
    def scan(cls, line: bytes) -> list[Members]:
        scanner = cls()
        scanner.feed(line)
        return scanner.finish()

    def feed(self, data: bytes) -> None:
        if self._done or not data:
            return
        try:
            self._feed(data)
        except Exception:  # pragma: no cover - defensive: a scan must never raise
            self._give_up()

    @property
    def is_batch(self) -> bool:
        """The line is a JSON array (of objects, if it is a batch)."""
        return self._member_depth == 2

    def finish(self) -> list[Members]:
        """The line ended: the objects found (nothing, unless it was an object or a batch)."""
        if self._value is not None:
            self._end_value()
        return self._found

    # -- the scan ---------------------------------------------------------------------------

    def _give_up(self) -> None:
        self._found = []
        self._done = True

    def _feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        if not self._member_depth:
            while i < n and data[i] in _WS:
                i += 1
            if i == n:
                return
            if data[i] == 0x7B:  # "{"
                self._member_depth = 1
                self._open_object()
            elif data[i] == 0x5B:  # "[": a batch
                self._member_depth = 2
            else:  # a scalar, or not JSON: nothing to find
                self._give_up()
                return
            self._depth = 1
            i += 1
        view = self._blank_escapes(data, i)
        while i < n and not self._done:
            if self._in_string:
                q = view.find(b'"', i)
                end = n if q < 0 else q
                self._keep(data[i:end])
                if q < 0:  # an unpaired backslash at the end pairs with the next piece's first byte
                    self._escaped_first = view.endswith(b"\\")
                    return
                self._keep(b'"')
                self._in_string = False
                self._end_string()
                i = q + 1
                continue
            m = STRUCTURE.search(view, i)
            stop = n if m is None else m.start()
            if self._value is not None and stop > i:
                self._add_value(data[i:stop])
            if m is None:
                return
            i = stop + 1
            self._structure(view[stop])

    def _blank_escapes(self, data: bytes, start: int) -> bytes:
        """`data` with every escape pair blanked (`literals.blank_escapes`), so that a quote
        in it ends a string; a pair that began in the previous piece ends at `start`."""
        if self._in_string and self._escaped_first:
            self._escaped_first = False
            return data[:start] + b"_" + blank_escapes(data[start + 1:])
        return blank_escapes(data)  # before `start`: only whitespace and the opening bracket

    def _structure(self, char: int) -> None:
        if char == 0x22:  # '"'
            self._open_string()
        elif char in b"{[":
            if self._value is not None:
                self._end_value(structured=True)
            self._depth += 1
            if char == 0x7B and self._depth == self._member_depth:
                self._open_object()
        elif char in b"}]":
            if self._value is not None:
                self._end_value()
            if self._depth == self._member_depth:
                self._current = None
            self._depth -= 1
            if self._depth <= 0:
                self._done = True  # the line's value is complete
        else:  # ","
            if self._value is not None:
                self._end_value()
            if self._depth == self._member_depth and self._current is not None:
                self._want_key = True

    def _open_object(self) -> None:
        self._current = Members()
        self._found.append(self._current)
        self._want_key = True

    def _open_string(self) -> None:
        self._in_string, self._escaped_first = True, False
        self._capture, self._captured, self._is_key = None, 0, False
        if self._depth != self._member_depth or self._current is None:
            return
        if self._want_key:
            self._want_key, self._is_key, self._capture = False, True, [b'"']
            self._captured = 1
        elif self._value is not None:  # a string value of a captured member
            self._value = None
            self._capture, self._captured = [b'"'], 1

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
        current = self._current
        if current is None:
            return
        if self._is_key:
            self._is_key = False
            key = decode_key(b"".join(capture)) if capture is not None else None
            self._key = key
            if key is not None:
                current.keys.add(key)
                if key in _CAPTURED:
                    self._value = []  # whatever follows the colon, until the value ends
            self._check_done()
            return
        if capture is not None and self._key is not None and self._depth == self._member_depth:
            current.literals[self._key] = b"".join(capture)
            self._key = None
            self._check_done()

    def _add_value(self, part: bytes) -> None:
        assert self._value is not None
        self._value.append(part)
        if sum(map(len, self._value)) > MAX_LITERAL:
            self._value = None

    def _end_value(self, *, structured: bool = False) -> None:
        """A scalar value of a captured member ends (or turns out to be an object/array)."""
        parts, self._value = self._value, None
        key, self._key = self._key, None
        if parts is None or key is None or structured or self._current is None:
            return
        text = b"".join(parts).strip(_WS)
        if text.startswith(b":"):
            text = text[1:].strip(_WS)
        if text:
            self._current.literals[key] = text
            self._check_done()

    def _check_done(self) -> None:
        # One object: stop once it is known to be a request or a response (long lines
        # usually say so in their first bytes). A batch is read to its end.
        if self._member_depth != 1 or self._current is None:
            return
        found = self._current
        if "id" in found.literals and ("method" in found.literals or found.keys & {"result", "error"}):
            self._done = True

