"""Line framing: chunks of a byte stream in, complete lines (with their terminators) out.

Owns: the partial line between reads, and the switch to opaque streaming for a line longer
than `max_line`. Must never: parse JSON, drop or reorder a byte, or hold more than `max_line`
bytes of one line (an over-long line leaves as `Opaque` pieces as soon as they arrive).

ACP frames messages by `\\n` (transports.mdx); a `\\r` before it stays part of the line, so a
CRLF stream comes back out as CRLF.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Opaque:
    """A piece of a line too long to parse; `end` is true on the piece that ends the line."""

    data: bytes
    end: bool


Piece = bytes | Opaque


class LineSplitter:
    """Split a byte stream into lines; linear in the input however the chunks fall."""

    def __init__(self, max_line: int = 16 * MIB) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self.max_line = max_line
        self._parts: list[bytes] = []  # the partial line, in pieces (no quadratic joins)
        self._size = 0
        self._opaque = False  # inside an over-long line whose head has already gone out

    def __repr__(self) -> str:
        state = "opaque" if self._opaque else f"buffered={self._size}"
        return f"<LineSplitter {state} max_line={self.max_line}>"

    @property
    def idle(self) -> bool:
        """At a line boundary: nothing held back, not inside an over-long line."""
        return not self._parts and not self._opaque

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete line held back."""
        return self._size

    def feed(self, chunk: bytes) -> list[Piece]:
        """Take the next chunk; return every line it completes and any opaque pieces."""
        out: list[Piece] = []
        if not chunk:
            return out
        if self._opaque:
            end = chunk.find(b"\n")
            if end < 0:
                out.append(Opaque(chunk, end=False))
                return out
            out.append(Opaque(chunk[: end + 1], end=True))
            self._opaque = False
            chunk = chunk[end + 1 :]
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if lines:
            if self._parts:
                self._parts.append(lines[0])
                lines[0] = b"".join(self._parts)
                self._parts.clear()
                self._size = 0
            if len(lines[0]) >= self.max_line or len(chunk) > self.max_line:
                out.extend(self._whole(line + b"\n") for line in lines)
            else:
                out.extend([line + b"\n" for line in lines])
        if tail:
            self._parts.append(tail)
            self._size += len(tail)
            if self._size > self.max_line:
                out.append(Opaque(b"".join(self._parts), end=False))
                self._parts.clear()
                self._size = 0
                self._opaque = True
        return out

    def feed_eof(self) -> list[Piece]:
        """End of stream: a leftover partial line comes out as it is, without a terminator."""
        if self._opaque:
            self._opaque = False
            return [Opaque(b"", end=True)]
        if not self._parts:
            return []
        rest = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return [self._whole(rest)]

    def _whole(self, line: bytes) -> Piece:
        # A complete line that arrived in one read can still be over the limit: stream it
        # on unparsed all the same, so the limit means one thing.
        if len(line) > self.max_line:
            return Opaque(line, end=True)
        return line
