"""Forward: what the relay returns for each piece of input, and its verdict.

Owns: `Verdict`, `Forward` (bytes toward a direction, with what the bridge knows about them)
and splitting a run of untouched lines back into lines. Must never: decide anything (the
relay does) or copy bytes it does not have to.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from acp_bridge.core.messages import Direction, Frame
from acp_bridge.core.session import Pending


class Verdict(enum.Enum):
    PASS = "pass"  # forwarded as it came
    REWRITE = "rewrite"  # forwarded changed
    DROP = "drop"  # not forwarded
    OTHER = "other"  # not a JSON-RPC message; forwarded as it came
    OPAQUE = "opaque"  # part of a line over the parse limit; forwarded as it came
    ERROR = "error"  # a rewrite raised; forwarded as it came
    EMIT = "emit"  # written by the bridge itself
    DIVERTED = "diverted"  # stray agent output, sent to the bridge's stderr instead of the client

    __hash__ = object.__hash__  # see Direction


# Verdict's members as globals, for the same reason as Kind's (core/messages.py); named apart
# from Kind's OTHER and the rewrites' PASS and DROP.
VERDICT_PASS, VERDICT_REWRITE, VERDICT_DROP = Verdict.PASS, Verdict.REWRITE, Verdict.DROP
VERDICT_OTHER, VERDICT_OPAQUE, VERDICT_ERROR, VERDICT_EMIT = Verdict.OTHER, Verdict.OPAQUE, Verdict.ERROR, Verdict.EMIT
VERDICT_DIVERTED = Verdict.DIVERTED


@dataclass(slots=True)
class Forward:
    """Bytes to send toward `direction`, and what the bridge knows about them.

    Treat it as immutable; it is not frozen for the reason `Frame` is not.
    """

    direction: Direction
    data: bytes
    raw: bytes  # the line as it came in; b"" for a message the bridge wrote
    verdict: Verdict
    frame: Frame | None = None  # None: the line could concern no rule and was not parsed
    rules: tuple[str, ...] = ()
    request: Pending | None = None  # for a response: the request it answers
    error: str | None = None
    untouched_lines: bool = False  # `data` is one or more untouched lines, travelling as one
    before: bool = False  # an emit sent ahead of the line that made a rule write it

    @property
    def source(self) -> Direction:
        """The direction the input travelled in (an emit may go the other way)."""
        return self.frame.direction if self.frame is not None else self.direction

    @property
    def lines_ended(self) -> int:
        """How many lines this forward ends: one a line of a run, one for any other line or
        message the bridge wrote, and for a line over the parse limit, one with its last
        piece. The capture gives each its record and `seq`, in this order."""
        if self.verdict is Verdict.OPAQUE:
            return int(not self.raw or self.raw.endswith(b"\n"))
        if self.untouched_lines:
            return self.raw.count(b"\n")
        return 1

    def lines(self) -> list[Forward]:
        """One Forward per line (a run of untouched lines split up, e.g. for the capture)."""
        if not self.untouched_lines:
            return [self]
        return [Forward(self.direction, line, line, Verdict.PASS) for line in complete_lines(self.raw)]


def complete_lines(body: bytes) -> list[bytes]:
    """Lines of `body`, each with its "\n" (`body` ends with one; CR stays in the line)."""
    lines = body.split(b"\n")
    lines.pop()
    return [line + b"\n" for line in lines]
