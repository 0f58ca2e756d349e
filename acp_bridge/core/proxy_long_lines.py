"""A line over the parse limit on its way through the proxy link, never held whole.

Owns: gathering a long line's head (`Head`: enough of it to say what the line is), where
the line goes, decided from its head (`LongLines`, a mixin of core/proxy_link.py's
`ProxyLink`: unwrapped, wrapped, an answer's id put back, or answered as malformed and not
passed on; toward the successor `outgoing` decides, from the line's first `HEAD` bytes,
which the relay reads too to answer a request the link does not wrap as one), and the
line's pieces after that (`Stream`: all of them go on, or, for a value being spliced into
another envelope, up to that value's end and then what closes the new one). Must never:
hold more of a line than its head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from acp_bridge.core.json_spans import ValueEnd, head_members
from acp_bridge.core.lines import Opaque
from acp_bridge.core.proxy_wire import Dialect, small_string, small_value, terminator

if TYPE_CHECKING:
    from acp_bridge.core.proxy_ids import LinkIds

# Where a piece the conductor sent goes: into the relay as the client's (toward the agent),
# into the relay as the agent's (toward the client), or straight back to the conductor.
FROM_CLIENT, FROM_AGENT, CONDUCTOR = "client", "agent", "conductor"
Routed = tuple[str, bytes]
DROPPED = "dropped"  # a stream whose pieces go nowhere: the line was answered, not passed on


@dataclass(slots=True)
class Stream:
    """A line over the parse limit on its way through: where its pieces go, and, when it
    is being unwrapped or wrapped, where the wrapped value ends and what closes it."""

    to: str
    value: ValueEnd | None = None  # following the spliced value to its end
    close: bytes = b""  # written once the value has ended
    done: bool = False  # the value has ended: the rest of the line is the envelope's

    def through(self, data: bytes, end: bool, say_once: Callable[[str, str], None]) -> list[bytes]:
        """The bytes of a long line's piece that go on: all of them, or, for a value being
        spliced, up to its end and then what closes it (the envelope's own rest is left)."""
        parts: list[bytes] = []
        if self.value is None or self.done:
            if self.value is None and self.to != DROPPED:
                parts.append(data)
        else:
            stop = self.value.feed(data)
            if stop is None:
                parts.append(data)
            else:
                parts.append(data[:stop] + self.close)
                self.done = True
        if end and self.value is not None and self.to != DROPPED:
            if not self.done:  # the line ended inside the value: it goes on as it is, torn
                say_once("torn", "a long line from the conductor ended inside the message it wraps")
            parts.append(terminator(data) or b"\n")
        return parts


HEAD = 64 * 1024  # how much of a long line is read before deciding where it goes


@dataclass(slots=True)
class Head:
    """The first `HEAD` bytes of a long line, gathered from its pieces (a parse limit below
    that cuts a line's first piece short of the members that say what it is)."""

    parts: list[bytes] = field(default_factory=list)
    size: int = 0

    def take(self, piece: Opaque, enough: int) -> bytes | None:
        """The head once there is `enough` of it (or the line ends), else None (held)."""
        self.parts.append(piece.data)
        self.size += len(piece.data)
        if self.size < enough and not piece.end:
            return None
        head = b"".join(self.parts)
        self.parts.clear()
        self.size = 0
        return head


class LongLines:
    """Where a line over the parse limit goes, both ways, decided from its head; `ProxyLink`
    mixes it in (it owns the state below, and how an envelope's head is written)."""

    dialect: Dialect
    head: int
    _ids: LinkIds
    _in: Stream | None  # the long line from the conductor under way
    _out: Stream | None  # the long line to the conductor under way
    _heads: tuple[Head, Head]  # from, to the conductor

    def _say_once(self, kind: str, message: str, *args: object) -> None:
        raise NotImplementedError  # ProxyLink._say_once

    def _malformed(self, raw_id: bytes | None, why: str) -> list[Routed]:
        raise NotImplementedError  # ProxyLink._malformed

    def _unwrapped_head(self, envelope_id: bytes | None, method: bytes) -> bytes:
        raise NotImplementedError  # ProxyLink._unwrapped_head

    def _envelope_head(self, client_id: bytes | None, method: bytes) -> bytes:
        raise NotImplementedError  # ProxyLink._envelope_head

    # -- from the conductor ------------------------------------------------------------

    def _from_conductor_opaque(self, piece: Opaque) -> list[Routed]:
        out: list[Routed] = []
        if self._in is None:
            head = self._heads[0].take(piece, self.head)
            if head is None:
                return out
            self._in, data = self._open_incoming(head, out)
        else:
            data = piece.data
        stream = self._in
        out.extend((stream.to, part) for part in stream.through(data, piece.end, self._say_once) if part)
        if piece.end:
            self._in = None
        return out

    def _open_incoming(self, head: bytes, out: list[Routed]) -> tuple[Stream, bytes]:
        """The head of a line over the parse limit: decide from its first members where
        it goes; return the stream and the bytes of the head still to go through it."""
        outer = {key: (start, end) for key, start, end in head_members(head)}
        method = small_string(head, outer.get("method"))
        raw_id = small_value(head, outer.get("id"))
        if method in (self.dialect.request, self.dialect.notification):
            refused = self._long_envelope_refused(method, "id" in outer)
            if refused is not None:
                out.extend(self._malformed(raw_id, refused))
                return Stream(DROPPED, done=True), b""
            return self._open_unwrap(head, outer, raw_id, out)
        if method is None and raw_id is not None:
            start, end = outer["id"]  # small: it ended
            client_id = self._ids.wrapped_answer(raw_id)
            if client_id is not None:
                return Stream(FROM_AGENT), head[:start] + client_id + head[end:]
            rule_id = self._ids.emitted_answer(raw_id)
            if rule_id is not None:
                return Stream(FROM_CLIENT), head[:start] + rule_id + head[end:]
        return Stream(FROM_CLIENT), head

    def _long_envelope_refused(self, method: str, has_id: bool) -> str | None:
        """Why a long envelope is not unwrapped, as `ProxyLink._unwrap` says it of a short one (an id
        its kind has no room for, or none where it needs one); None when it is unwrapped."""
        if not self.dialect.one_envelope and has_id != (method == self.dialect.request):
            return f"{method} {'with' if has_id else 'without'} an id"
        return None

    def _open_unwrap(self, head: bytes, outer: dict[str, tuple[int, int | None]], raw_id: bytes | None,
                     out: list[Routed]) -> tuple[Stream, bytes]:
        params = outer.get("params")
        inner = {key: (start, end) for key, start, end in head_members(head, params[0])} if params else {}
        inner_method = small_value(head, inner.get("method"))
        value = inner.get("params")
        if params is None or inner_method is None or value is None or head[value[0]] not in b"{[":
            # The long value is not the wrapped params, or the keys come in an order that
            # would need the whole line: answered, and the line is not passed on.
            out.extend(self._malformed(raw_id, "a line over the parse limit whose wrapped method does not come "
                                               "before its wrapped params"))
            return Stream(DROPPED, done=True), b""
        out.append((FROM_AGENT, self._unwrapped_head(raw_id, inner_method) + b',"params":'))
        return Stream(FROM_AGENT, ValueEnd(), close=b"}"), head[value[0]:]

    # -- toward the successor ----------------------------------------------------------

    def _to_successor_opaque(self, piece: Opaque) -> bytes:
        if self._out is None:
            head = self._heads[1].take(piece, self.head)
            if head is None:
                return b""
            self._out, data, prefix = self._open_outgoing(head)
        else:
            data, prefix = piece.data, b""
        stream = self._out
        parts = [prefix, *stream.through(data, piece.end, self._say_once)] if stream.to != DROPPED else []
        if piece.end:
            self._out = None
        return b"".join(parts)

    def _open_outgoing(self, head: bytes) -> tuple[Stream, bytes, bytes]:
        found = outgoing(head[:self.head])  # the relay reads the same bytes (core/uncarried.py)
        if found.answer:
            start, end = found.members["id"]  # small: it ended
            envelope_id = self._ids.upstream_answer(head[start:end])
            if envelope_id is not None:
                return Stream("successor"), head[end:], head[:start] + envelope_id
        if found.method is not None and found.params is not None:
            prefix = self._envelope_head(found.raw_id, found.method) + b',"params":'
            return Stream("successor", ValueEnd(), close=b"}}"), head[found.params:], prefix
        if not found.message and head.lstrip()[:1] != b"[":  # the relay answers a batch or a message, and says so
            self._say_once("long-unwrappable", "a line over the parse limit toward the successor cannot be wrapped "
                                               "(its method and id do not come before its params); not sent")
        return Stream(DROPPED, done=True), b"", b""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """What the head of a line over the parse limit toward the successor says it is, and so
    how the link sends it: in an envelope as it streams (its method a string and its params
    an object or array, both begun in the head; a request only if its id ended there too),
    as an answer to a request of the successor's (an id, and no method or params), or not
    at all. The relay reads the same head to answer a request the link does not wrap as one."""

    members: dict[str, tuple[int, int | None]]
    method: bytes | None = None  # the method as written, when the line is wrapped
    raw_id: bytes | None = None  # the id as written, when it ended in the head
    params: int | None = None  # where the params begin, when the line is wrapped

    @property
    def answer(self) -> bool:
        return self.raw_id is not None and "method" not in self.members and "params" not in self.members

    @property
    def message(self) -> bool:
        """A request or notification, as far as the head tells (the relay judges it at its end)."""
        return "method" in self.members or "params" in self.members

    @property
    def wrapped_request(self) -> bool:
        return self.params is not None and self.raw_id is not None


def outgoing(head: bytes) -> Outgoing:
    """What the link makes of a long line toward the successor whose first bytes are `head`."""
    members = {key: (start, end) for key, start, end in head_members(head)}
    raw_id = small_value(head, members.get("id"))
    params = members.get("params")
    method = members.get("method")
    if small_string(head, method) is not None and params is not None and head[params[0]] in b"{[":
        return Outgoing(members, small_value(head, method), raw_id, params[0])
    return Outgoing(members, raw_id=raw_id)
