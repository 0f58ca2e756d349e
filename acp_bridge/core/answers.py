"""What the bridge writes itself, and where it lands.

Owns: the JSON-RPC errors the bridge writes for requests it answers instead of the agent (the
agent is gone, the bridge stops; an id that cannot be written back gets JSON-RPC's null id)
or instead of what a rule dropped (a request, or the answer to one: `dropped_answer`),
`fail_pending`, and placing every message the bridge writes (these answers and what the rules
emit) between whole lines of its destination. Must never: put one of them inside a line, or
answer a request twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core.direction_state import DirectionState
from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.messages import RESPONSE, TO_AGENT, TO_CLIENT, Direction, Frame, Kind, Unencodable, encode, id_key
from acp_bridge.core.session import Connection, Pending

# The rule the bridge's own answers name (for a gone agent, or as it stops itself):
# its own work, a name no user rule may take (config/rules.py).
BRIDGE = "bridge"


class Answers:
    """The relay's own messages: the answers it gives when nobody else can, and where
    everything it writes goes in its destination stream."""

    def __init__(self, session: Connection, directions: dict[Direction, DirectionState]) -> None:
        self.session = session
        self.agent_gone: tuple[str, Any] | None = None  # (message, data) once the agent is gone
        # Each direction's long line, torn end and held messages (the relay's records): what
        # the bridge writes itself must land between whole lines of its destination.
        self.directions = directions
        # What must reach the client ahead of an answer the bridge gives itself (the relay
        # asks the rules: such an answer may end a turn, and the tool calls it left open
        # are closed before it); None: nothing.
        self.ahead_of_answer: Callable[[Pending, Forward], list[Forward]] | None = None

    def emit(self, fwd: Forward, out: list[Forward]) -> None:
        """Place a message the bridge wrote: never inside a line of its destination."""
        state = self.directions[fwd.direction]
        if state.long is not None:  # a long line is streaming there: after it
            state.held.append(fwd)
            return
        if state.torn:
            state.torn = False
            fwd.data = b"\n" + fwd.data
        out.append(fwd)

    def release_held(self, direction: Direction, out: list[Forward]) -> None:
        state = self.directions[direction]
        held, state.held = state.held, []
        for fwd in held:
            self.emit(fwd, out)

    # -- requests the bridge answers ------------------------------------------------------------

    def note_request(self, pending: Pending, out: list[Forward]) -> None:
        """A request the rules cannot read: in flight, or answered here if the agent is gone."""
        if self.agent_gone is not None and pending.origin is Direction.TO_AGENT:
            self.refuse(None, pending.reply_id, out)
        else:
            self.session.track(pending)

    def refuse(self, frame: Frame | None, id_: Any, out: list[Forward]) -> None:
        """The agent is gone: answer a client request here instead of forwarding it."""
        assert self.agent_gone is not None
        message, data = self.agent_gone
        if frame is not None and frame.kind is Kind.REQUEST:
            out.append(Forward(frame.direction, b"", frame.raw, Verdict.DROP, frame, (BRIDGE,)))
        self.emit(answer(id_, message, data, frame), out)

    def in_flight_again(self, unsent: Iterable[Forward]) -> None:
        """Forwards that will not be sent: a response among them answered nobody."""
        for fwd in unsent:
            request = fwd.request
            if (request is not None and request.origin is TO_AGENT and fwd.direction is not TO_AGENT
                    and (fwd.frame is None or fwd.frame.kind is RESPONSE)):
                self.session.track(request)

    def fail_pending(self, message: str, data: Any = None, *, unsent: Sequence[Forward] = (),
                     cut: bool | None = None) -> list[Forward]:
        """The agent is gone, or the bridge stops: answer every client request still in
        flight with a JSON-RPC error, oldest first, and every later one as it comes
        (nothing else can answer).

        Args:
            unsent: forwards the relay returned that will not be sent (the bridge stops):
                a response among them answered nobody, so its request is in flight again.
            cut: the stream toward the client ends here (the bridge stops), inside a line
                when True: the answers neither wait for a long line to end nor glue on.
        """
        self.in_flight_again(unsent)
        if cut is not None:
            state = self.directions[Direction.TO_CLIENT]
            state.long, state.held, state.torn = None, [], cut
        self.agent_gone = (message, data)
        out: list[Forward] = []
        for request in self.session.pending(Direction.TO_AGENT):
            self.session.forget(request)
            fwd = answer(request.reply_id, message, data)
            fwd.request = request
            if self.ahead_of_answer is not None:
                for ahead in self.ahead_of_answer(request, fwd):
                    self.emit(ahead, out)
            self.emit(fwd, out)
        return out


def answer(id_: Any, message: str, data: Any, source: Frame | None = None, *,
           toward: Direction = Direction.TO_CLIENT, rules: tuple[str, ...] = (BRIDGE,),
           terminator: bytes = b"\n") -> Forward:
    """The bridge's JSON-RPC error for the request `id_` (the client's, unless `toward` is
    the agent), made by `rules` (the bridge's own answers: "bridge")."""
    msg = p.error_response(id_, p.INTERNAL_ERROR, message, data)
    try:
        encoded = encode(msg, terminator, source=source)
    except Unencodable:  # an id nested past what can be written: JSON-RPC's null id
        encoded = encode(p.error_response(None, p.INTERNAL_ERROR, message, data), terminator)
    return Forward(toward, encoded, b"", Verdict.EMIT, None, rules)


def answered_by(emits: Iterable[Any], request: Pending) -> bool:
    """Does a message a rule emits answer `request` toward its sender (a rule that drops a
    request and answers it itself, as the system prompt's `error` mode does), or send it on
    in another form (`sends_on`)?"""
    return answers_sender(emits, request) or sends_on(emits, request)


def answers_sender(emits: Iterable[Any], request: Pending) -> bool:
    """Does a message a rule emits answer `request` toward its sender (its id, a result or
    an error)?"""
    key = id_key(request.id)
    for emit in emits:
        msg = emit.msg
        if (emit.direction is request.origin.reverse and "method" not in msg and ("result" in msg or "error" in msg)
                and id_key(msg.get("id")) == key):
            return True
    return False


def sends_on(emits: Iterable[Any], request: Pending) -> bool:
    """Does a message a rule emits send `request` on in another form: a request with its id
    toward where it was going? Then that is what is in flight."""
    key = id_key(request.id)
    return any(emit.direction is request.origin and "method" in emit.msg and "id" in emit.msg
               and id_key(emit.msg["id"]) == key for emit in emits)


def dropped_answer(frame: Frame, request: Pending, rule: str, rules: tuple[str, ...], *,
                   notified: bool = False) -> Forward:
    """The error that stands in for what rule `rule` dropped: the request `frame`, which its
    sender would wait for an answer to for ever, or the answer `frame` to `request`.
    `notified`: the rule sent the request on as a notification, which nobody answers."""
    toward = "agent" if frame.direction is TO_AGENT else "client"
    if notified:
        text = f"sent this request on as a notification: the {toward} will not answer it"
    elif frame.kind is Kind.REQUEST:
        text = f"dropped this request: it was not sent to the {toward}"
    else:
        answerer = "agent" if frame.direction is TO_CLIENT else "client"
        text = f"dropped the {answerer}'s answer to this request ({request.method})"
    return answer(request.reply_id, f"acp-bridge: rule {rule!r} {text}", {"rule": rule},
                  toward=request.origin.reverse, rules=rules, terminator=frame.terminator or b"\n")
