"""A line over the parse limit on its way through the proxy link, never held whole.

Owns: gathering a long line's head (`Head`: enough of it to say what the line is), and the
line's pieces after that (`Stream`: all of them go on, or, for a value being spliced into
another envelope, up to that value's end and then what closes the new one). Must never:
hold more of a line than its head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from acp_bridge.core.json_spans import ValueEnd
from acp_bridge.core.lines import Opaque
from acp_bridge.core.proxy_wire import terminator

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
