"""The rule interface: hooks that look at one message and return an outcome.

Owns: `Rule` (`Rewrite`, the built-ins' older name, is an alias kept for API_VERSION 1), the outcomes `PASS` (or
None), `DROP`, `Replace`, and `Emit` (a message the bridge itself sends, in either
direction, after the message or `before` it), and `SessionFacts`, what a hook may read of
the session. The built-in rules and the user's (`acp_bridge.rules`, the public surface) are
written against this one module. Must never: do IO or mutate a message it was given (copy along the path you
change, so the capture can still show the original).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from acp_bridge.core.messages import Direction, Frame
from acp_bridge.core.protocol import Json

if TYPE_CHECKING:
    from acp_bridge.core.session import Connection, Pending

T = TypeVar("T")


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
Outcome = _Pass | Replace | None  # None (a hook that returns nothing) passes, as PASS does

# `triggers` for a rule whose `notification` must see every notification: the empty string
# is in every line, so every line is parsed (and the relay's shortcut for runs of untouched
# lines never applies). Costly on streamed chunks: name real trigger bytes where you can.
EVERY_LINE: tuple[bytes, ...] = (b"",)


class SessionFacts(Protocol):
    """What a hook may read of the connection (`Connection` is the one implementation).

    Read-only: a hook must not change what these return (the capabilities are the
    messages' own objects). `state_for` is the exception: it is the rule's own per-session
    state, keyed by the rule's state class, made on first use.
    """

    @property
    def client_ready(self) -> bool: ...  # the client's `initialize` has passed

    @property
    def protocol_version(self) -> int | None: ...  # negotiated (agent's answer, else asked)

    @property
    def v2(self) -> bool: ...

    @property
    def client_caps(self) -> Json: ...  # v1 clientCapabilities / v2 capabilities

    @property
    def agent_caps(self) -> Json: ...  # {} until the agent's initialize response

    @property
    def agent_info(self) -> Json: ...

    def pending(self, origin: Direction) -> list[Pending]: ...  # requests in flight from `origin`

    def in_flight(self, method: str, session_id: Any, origin: Direction = ...) -> list[Pending]: ...

    def state_for(self, kind: type[T], session_id: Any) -> T: ...


class Rule:
    """Base class: override only the hooks you need; each returns PASS by default, and a
    hook that returns nothing (None) passes too.

    A rule's `name` is its provenance everywhere (capture records, `stats`, `check`, logs):
    the class's name unless it says otherwise. `triggers` lists byte strings that a
    notification must contain for `notification` to be called with it (or a `\\u` escape,
    which could spell them); the relay skips parsing lines that no rule's triggers are in.
    Requests and responses are always parsed. A subclass that overrides `notification` must
    declare its triggers (or `EVERY_LINE`), or decorate it with a `Match`, whose triggers
    it then takes: without them it would never be called, so defining one is a `TypeError`.
    """

    name = "Rule"
    triggers: tuple[bytes, ...] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__
        if cls.notification is not Rule.notification and not cls.triggers:
            # A notification hook decorated with a `Match` brings the match's triggers.
            cls.triggers = getattr(cls.notification, "triggers", ())
            if not cls.triggers:
                raise TypeError(
                    f"{cls.__name__} overrides notification() but declares no triggers: name the "
                    "bytes a notification it acts on must contain, or use EVERY_LINE")

    def request(self, frame: Frame, session: Connection) -> Outcome:
        return PASS

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        return PASS

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        return PASS

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


Rewrite = Rule  # the built-ins' older name, kept for API_VERSION 1: the package says Rule
