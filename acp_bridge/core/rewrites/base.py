"""The rewrite interface: hooks that look at one message and return an outcome.

Owns: `Rewrite`, the outcomes `PASS`, `DROP`, `Replace`, and `Emit` (a message the bridge
itself sends, in either direction, after the message or `before` it). Must never: do IO or
mutate a message it was given (copy along the path you change, so the capture can still show
the original).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from acp_bridge.core.messages import Direction, Frame
from acp_bridge.core.protocol import Json

if TYPE_CHECKING:
    from acp_bridge.core.session import Pending, Session


@dataclass(frozen=True, slots=True)
class Emit:
    """A message the bridge writes on its own, toward `direction`."""

    direction: Direction
    msg: Json


@dataclass(frozen=True, slots=True)
class Replace:
    """Forward `msg` instead of the original (None: forward nothing), then send `then`.

    `before`: messages to send ahead of it, for what must reach the peer first (the tool
    calls a turn left open are closed before the message that ends the turn). `Replace(
    frame.msg, ...)`, the message itself, forwards the line as the very bytes it came as.
    """

    msg: Json | None
    then: tuple[Emit, ...] = ()
    before: tuple[Emit, ...] = ()


class _Pass:
    __slots__ = ()

    def __repr__(self) -> str:
        return "PASS"


PASS = _Pass()
DROP = Replace(None)
Outcome = _Pass | Replace

# `triggers` for a rule whose `notification` must see every notification: the empty string
# is in every line, so every line is parsed (and the relay's shortcut for runs of untouched
# lines never applies). Costly on streamed chunks: name real trigger bytes where you can.
EVERY_LINE: tuple[bytes, ...] = (b"",)


class Rewrite:
    """Base class: override only the hooks you need; each returns PASS by default.

    `triggers` lists byte strings that a notification must contain for `notification` to be
    able to concern this rewrite; the relay skips parsing lines that contain none of them.
    Requests and responses are always parsed. A subclass that overrides `notification` must
    declare its triggers (or `EVERY_LINE`): without them it would be called only on lines
    that happen to be parsed for another reason, so defining one is a `TypeError`.
    """

    name = "rewrite"
    triggers: tuple[bytes, ...] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.notification is not Rewrite.notification and not cls.triggers:
            raise TypeError(
                f"{cls.__name__} overrides notification() but declares no triggers: name the "
                "bytes a notification it acts on must contain, or use EVERY_LINE")

    def request(self, frame: Frame, session: Session) -> Outcome:
        return PASS

    def response(self, frame: Frame, request: Pending, session: Session) -> Outcome:
        return PASS

    def notification(self, frame: Frame, session: Session) -> Outcome:
        return PASS

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
