"""Connection: what the bridge knows about the ACP connection, shared by every rewrite.

Named for the connection, not an ACP session: an ACP session is one `sessionId`, and one
connection holds many (the hooks still receive it as `session`, as docs/rules.md teaches).

Owns: the requests in flight in each direction (keyed by origin and id, so both sides may
number from 0 and `1` is not `"1"`), the `initialize` exchange (the client's advertised
capabilities and the agent's answer), and a per-ACP-session state bag for rewrites, with
`HeldStates` for a rule that keeps such state for at most so many sessions.
Must never: change a message, or decide what a rule does with these facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from acp_bridge.core import protocol as p
from acp_bridge.core.literals import written_id
from acp_bridge.core.messages import Direction, Frame, id_key, loads
from acp_bridge.core.methods import SESSION_CLOSERS
from acp_bridge.core.protocol import Json

if TYPE_CHECKING:
    from acp_bridge.core.statistics import SessionStatistics

_UNREAD: Any = object()
_AS_SENT: Any = object()  # `Pending.sent_id` of a request that went on with its sender's id
# Where a response's request came from, by the response's direction: a dict rather than the
# `Direction.reverse` property, for it is asked for every response.
_ORIGIN = {direction: direction.reverse for direction in Direction}
T = TypeVar("T")


@dataclass(slots=True)
class Pending:
    """A request sent and not yet answered. `origin` is the direction it travelled in.

    It keeps the request's line rather than its parsed `params`: a request may wait long (a
    prompt turn) and many may be in flight, and bytes take less memory than the parsed
    object and nothing of the garbage collector's time (with 500,000 prompts in flight the
    parsed params cost the collector a third of the relay's time). Rules read `params` for
    a few methods only; it is parsed again from the line on first use.
    """

    origin: Direction
    id: Any
    method: str
    session_id: Any = None  # `params.sessionId`
    raw: bytes = b""  # the request's line as it came
    at: float = 0.0  # the shell's clock when the request went through
    # The id exactly as written, when the parsed `id` would not write back the same (an
    # integer beyond 64 bits, which orjson reads as a float; a lone surrogate): an
    # `orjson.Fragment`, so that an answer from the bridge carries the client's own id.
    id_text: Any = None
    _params: Any = field(default=_UNREAD, repr=False, compare=False)
    # The id it went on with, when a rule changed it (`Connection.sent_as`): the id its
    # answer carries, under which it is in flight. `id` stays the id its sender gave it.
    sent_id: Any = field(default=_AS_SENT, repr=False, compare=False)

    @property
    def reply_id(self) -> Any:
        """The id to put in an answer to this request toward its sender."""
        return self.id if self.id_text is None else self.id_text

    @property
    def key(self) -> tuple[Direction, Any]:
        """Where the request is in flight: its origin and the id its answer will carry."""
        return (self.origin, id_key(self.id if self.sent_id is _AS_SENT else self.sent_id))

    @property
    def params(self) -> Any:
        if self._params is _UNREAD:
            msg = loads(self.raw) if self.raw else None
            self._params = msg.get("params") if isinstance(msg, dict) else None
        return self._params


def _version_in(init: Json | None) -> int | None:
    version = p.get_path(init, "protocolVersion")
    return version if isinstance(version, int) and not isinstance(version, bool) else None


class Connection:
    """Connection-wide facts, updated by the relay before any rewrite runs."""

    def __init__(self) -> None:
        self._pending: dict[tuple[Direction, Any], Pending] = {}
        # Requests whose id was already in flight from the same side (a client bug): each
        # still gets its answer, in order. Empty in any correct connection.
        self._same_id: dict[tuple[Direction, Any], list[Pending]] = {}
        self.client_init: Json | None = None  # initialize params, as the client sent them
        self.agent_init: Json | None = None  # initialize result, as the agent sent it
        # Per ACP session (`sessionId`, compared as a JSON value), each rule's own state,
        # keyed by the rule's state class: a rule keeps its facts in its own module.
        self._states: dict[Any, dict[type, Any]] = {}
        self.unpaired_responses = 0
        # (agent_init, client_init) they were read from -> (agent's version, negotiated version)
        self._version: tuple[tuple[Json | None, Json | None], tuple[int | None, int | None]] = (
            (None, None), (None, None))
        self._client_caps: tuple[Json | None, Json] = (None, {})
        self._agent_caps: tuple[Json | None, Json] = (None, {})

    def __repr__(self) -> str:
        return (
            f"<Connection v{self.protocol_version} pending={len(self._pending)} "
            f"sessions={len(self._states)} client_init={self.client_init is not None} "
            f"agent_init={self.agent_init is not None}>"
        )

    # -- bookkeeping, called by the relay -----------------------------------------------

    def on_request(self, frame: Frame, at: float = 0.0) -> Pending:
        msg = frame.msg  # read here rather than through Frame's properties: once per request
        method: Any = ""
        params = id_ = id_text = None
        if msg is not None:
            method, params, id_ = msg.get("method"), msg.get("params"), msg.get("id")
            if not isinstance(method, str):
                method = ""
            if type(id_) is float:  # maybe an integer orjson could not hold
                written = written_id(frame.raw, id_)
                id_text = None if written is id_ else written
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        pending = self.track(Pending(frame.direction, id_, method, session_id, frame.raw, at, id_text))
        if method == p.INITIALIZE and frame.direction is Direction.TO_AGENT:
            self.client_init = params if isinstance(params, dict) else {}
        return pending

    def track(self, pending: Pending) -> Pending:
        """Note a request in flight (also one the relay knows only by its id and method)."""
        key = pending.key
        if key in self._pending:  # the same id again while in flight (a client bug)
            self._same_id.setdefault(key, []).append(pending)
        else:
            self._pending[key] = pending
        return pending

    def on_response(self, frame: Frame) -> Pending | None:
        """Pair a response with the request it answers (sent the other way), at most once."""
        pending = self.pair(frame.direction, frame.id)
        if pending is None:
            return None
        if pending.method == p.INITIALIZE and pending.origin is Direction.TO_AGENT:
            result = frame.msg.get("result") if frame.msg else None
            if isinstance(result, dict):
                self.agent_init = result
        elif pending.method in SESSION_CLOSERS and frame.msg is not None and "result" in frame.msg:
            self._states.pop(id_key(pending.session_id), None)  # nothing more will concern it
        return pending

    def pair(self, direction: Direction, id_: Any) -> Pending | None:
        """The oldest request in flight that a response travelling `direction` with `id_` answers."""
        key = (_ORIGIN[direction], id_key(id_))
        pending = self._pending.pop(key, None)
        if pending is None:
            self.unpaired_responses += 1
            return None
        if self._same_id:
            self._promote(key)
        return pending

    def _promote(self, key: tuple[Direction, Any]) -> None:
        """The request answered under `key` is gone: the next one with that id moves up."""
        later = self._same_id.get(key)
        if later:
            self._pending[key] = later.pop(0)
            if not later:
                del self._same_id[key]

    def sent_as(self, pending: Pending, id_: Any) -> None:
        """A rule sent the request on with the id `id_`: the answer will carry that one, so
        that is the id it is in flight under (its sender's stays `pending.id`)."""
        self.forget(pending)
        pending.sent_id = id_
        self.track(pending)

    def forget(self, pending: Pending) -> None:
        """The bridge answered this request itself; no response is expected any more."""
        key = pending.key
        if self._pending.get(key) is pending:
            self._pending.pop(key)
            self._promote(key)
        elif pending in self._same_id.get(key, ()):
            self._same_id[key].remove(pending)
            if not self._same_id[key]:
                del self._same_id[key]

    def pending(self, origin: Direction) -> list[Pending]:
        """Requests in flight that `origin`'s side sent (same ids in the order they came)."""
        out = [req for req in self._pending.values() if req.origin is origin]
        for later in self._same_id.values():
            out.extend(req for req in later if req.origin is origin)
        return out

    def reused(self) -> list[Pending]:
        """Requests that came with the id of one still in flight from the same side (a
        peer's bug), waiting behind it for their answer. Empty in any correct connection,
        and then as cheap as a truth test (the health watchdog asks after each read)."""
        if not self._same_id:
            return []
        return [req for later in self._same_id.values() for req in later]

    def in_flight(self, method: str, session_id: Any, origin: Direction = Direction.TO_AGENT) -> list[Pending]:
        key = id_key(session_id)  # "1" is not 1, and 1 is not true: compare as JSON values
        return [
            req
            for req in self._pending.values()
            if req.origin is origin and req.method == method and id_key(req.session_id) == key
        ]

    def state_for(self, kind: type[T], session_id: Any) -> T:
        """The state of type `kind` (a rule's own class) for this session, made on first use."""
        key = id_key(session_id)
        states = self._states.get(key)
        if states is None:
            states = self._states[key] = {}
        state = states.get(kind)
        if state is None:
            state = states[kind] = kind()
        return state

    def existing_state(self, kind: type[T], session_id: Any) -> T | None:
        """The state of type `kind` for this session if a rule made one, without making it."""
        if session_id is None:
            return None
        states = self._states.get(id_key(session_id))
        return None if states is None else states.get(kind)

    def drop_state(self, kind: type, session_id: Any) -> None:
        """Forget the state of type `kind` for this session (a rule with nothing left to
        remember there), and the session's entry once no rule holds state for it."""
        key = id_key(session_id)
        states = self._states.get(key)
        if states is not None:
            states.pop(kind, None)
            if not states:
                del self._states[key]

    @property
    def session_count(self) -> int:
        """ACP sessions some rule holds state for."""
        return len(self._states)

    def statistics(self) -> SessionStatistics:
        from acp_bridge.core.statistics import SessionStatistics  # only when asked: start-up

        return SessionStatistics(
            pending_to_agent=len(self.pending(Direction.TO_AGENT)),
            pending_to_client=len(self.pending(Direction.TO_CLIENT)),
            unpaired_responses=self.unpaired_responses,
            sessions=len(self._states),
        )

    # -- negotiated facts -----------------------------------------------------------------

    @property
    def client_ready(self) -> bool:
        """Rules may act once the client's `initialize` has passed (bridge-rules.md 1)."""
        return self.client_init is not None

    @property
    def protocol_version(self) -> int | None:
        """The negotiated version: the agent's answer, else what the client asked for."""
        return self._versions()[1]

    @property
    def agent_version(self) -> int | None:
        """The version the agent's `initialize` answer names: None before that answer, or
        when it names none. What health calls negotiated (a v1 shape on v2 is judged by it)."""
        return self._versions()[0]

    def _versions(self) -> tuple[int | None, int | None]:
        (agent, client), versions = self._version
        if agent is not self.agent_init or client is not self.client_init:
            # Rules ask on every request: look it up again only when initialize changed it.
            answered, asked = _version_in(self.agent_init), _version_in(self.client_init)
            versions = (answered, asked if answered is None else answered)
            self._version = ((self.agent_init, self.client_init), versions)
        return versions

    @property
    def v2(self) -> bool:
        version = self.protocol_version
        return version is not None and version >= 2

    @property
    def client_caps(self) -> Json:
        # Rules ask on every request; look it up again only when initialize changed it.
        if self._client_caps[0] is not self.client_init:
            self._client_caps = (self.client_init, p.client_capabilities(self.client_init))
        return self._client_caps[1]

    @property
    def agent_caps(self) -> Json:
        if self._agent_caps[0] is not self.agent_init:
            self._agent_caps = (self.agent_init, p.agent_capabilities(self.agent_init))
        return self._agent_caps[1]

    @property
    def agent_info(self) -> Json:
        info = p.get_path(self.agent_init, "agentInfo")
        if info is None:
            info = p.get_path(self.agent_init, "info")
        return info if isinstance(info, dict) else {}


class HeldStates(Generic[T]):
    """A rule's state of class `kind` for at most `limit` ACP sessions: past that, the one
    used longest ago is forgotten. The keys are kept in use order (id_key -> the session
    id); one the Connection forgot on `session/close` is let go at `closed`, or found stale
    when room is made."""

    def __init__(self, kind: type[T], limit: int) -> None:
        self.kind = kind
        self.limit = limit
        self._held: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._held)

    def existing(self, session: Connection, session_id: Any) -> T | None:
        """This session's state if it has one (now the one used last), without making it."""
        state = session.existing_state(self.kind, session_id)
        if state is not None:
            key = id_key(session_id)
            self._held[key] = self._held.pop(key, session_id)
        return state

    def get(self, session: Connection, session_id: Any) -> T:
        """This session's state, made on first use, within `limit` sessions."""
        state = self.existing(session, session_id)
        if state is None:
            if len(self._held) >= self.limit:
                self._held = {key: sid for key, sid in self._held.items()
                              if session.existing_state(self.kind, sid) is not None}
                if len(self._held) >= self.limit:
                    key, oldest = next(iter(self._held.items()))
                    session.drop_state(self.kind, oldest)
                    del self._held[key]
            state = session.state_for(self.kind, session_id)
            self._held[id_key(session_id)] = session_id
        return state

    def forget(self, session: Connection, session_id: Any) -> None:
        """The rule has nothing left to keep for this session: its state goes, and its place."""
        session.drop_state(self.kind, session_id)
        self._held.pop(id_key(session_id), None)

    def closed(self, session: Connection, session_id: Any) -> None:
        """A session closer was answered: the Connection has forgotten the session's state
        (if it closed), and so does this."""
        if self._held and session.existing_state(self.kind, session_id) is None:
            self._held.pop(id_key(session_id), None)
