"""The findings engine: timed messages in, findings out (docs/health.md).

Owns: the rules that turn traffic into findings (unanswered requests and their timers, ids
answered twice or never asked, sessions never opened or already closed, malformed updates,
ignored cancels, v1 shapes on v2, the migration facts), counting each code per session,
and telling listeners. The session and cancel rules are `sessions`', the findings on the
bridge's own work (a rule that failed, a system prompt's fallback) `work`'s: mixins of the
engine. Fed the same way live (`watchdog`, from what the relay already parsed) and post hoc
(`offline`, from every record of a capture).

Requests in flight are not tracked here but read from a `core.session.Connection`: the relay's
own live (so the forwarding path pays nothing per request for the timers), one kept by the
caller post hoc. Timers are one scan of that table when the earliest deadline has come.

Must never: do IO, read a clock (every call says when), parse bytes (it is given parsed
messages), or grow without bound: what it remembers beside the session (reported requests,
seqs, sessions known, codes counted) is capped or pruned, and what is past a cap is counted.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from acp_bridge.config import HealthConfig
from acp_bridge.core import methods as m
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.literals import integer_id
from acp_bridge.core.messages import TO_AGENT, TO_CLIENT, Direction, brief, id_key
from acp_bridge.core.protocol import Json
from acp_bridge.core.session import Connection, Pending
from acp_bridge.health.findings import CODES, Finding
from acp_bridge.health.sessions import CLOSED_KEPT, SessionRules
from acp_bridge.health.sessions import V1_ONLY_UPDATES as V1_ONLY_UPDATES
from acp_bridge.health.work import WorkRules

INF = math.inf
RECENT = 256  # answered requests remembered, to tell a second answer from an unknown id

# Agent requests that wait on a person or on a command by design: no threshold unless
# `[health] methods` sets one. What each group holds is `core/methods.py`'s.
WAIT_BY_DESIGN = m.WAIT_BY_DESIGN
SESSION_OPENERS = m.SESSION_OPENERS  # their response names the session
SESSION_REOPENERS = m.SESSION_REOPENERS  # the request names it
SESSION_CLOSERS = m.SESSION_CLOSERS  # their success ends the session they name
V1_ONLY_METHODS = m.V1_ONLY  # removed in v2 (spec/acp-notes.md 2.4, 3.2)
# Client requests the agent answers only after streaming updates (a turn; a history replayed
# by session/load, or session/resume with replayFrom): their time counts from its last output.
STREAMED = frozenset({p.SESSION_PROMPT, p.SESSION_LOAD, p.SESSION_RESUME})

Listener = Callable[[Finding], None]
_UNSET: Any = object()


class Engine(SessionRules, WorkRules):
    """Findings from one connection's traffic, in the order it went by.

    Args:
        config: thresholds (`[health]`).
        notify: how many occurrences of one code and session are passed to listeners (the
            rest are only counted): 1 live, more post hoc (for the seqs in the report).
        max_tracked, max_sessions, max_counted: memory caps (see the module docstring).
        max_closed: closed sessions remembered (`sessions.CLOSED_KEPT` live).
    """

    def __init__(self, config: HealthConfig | None = None, session: Connection | None = None, *, notify: int = 1,
                 max_tracked: int = 100_000, max_sessions: int = 100_000, max_counted: int = 10_000,
                 max_closed: int = CLOSED_KEPT) -> None:
        super().__init__()
        self.config = config or HealthConfig()
        self.session = session if session is not None else Connection()  # requests in flight
        self.notify = notify
        self.listeners: list[Listener] = []  # called with each finding reported (OpenTelemetry can add one)
        self.counts: dict[tuple[str, Any], int] = {}
        self.told: tuple[str, Any] = ("", None)  # the count key of the finding being told, for a listener
        self.max_tracked, self.max_sessions, self.max_counted = max_tracked, max_sessions, max_counted
        self.max_closed = max_closed
        self.last_out = -INF  # when the agent last wrote anything (the prompt's clock)
        self.soonest = INF  # the next timer is not due before this
        self.seqs: dict[int, int] = {}  # id(Pending) -> seq of its record, when known
        self._reported: dict[int, Pending] = {}  # overdue requests already reported (kept: ids stay unique)
        self._reused: dict[int, Pending] = {}  # requests with a reused id already reported
        # The last RECENT requests answered (a second answer to one is a duplicate), and their
        # (origin, id key)s as a set, made when an unpaired response needs it and kept until
        # the next answer: not 256 comparisons a response toward a busy agent, and only two
        # cheap steps an answer.
        # (The watchdog appends to `recent` itself, and clears `recent_keys`, for answers that
        # teach nothing else: one call less on the forwarding path.)
        self.recent: deque[Pending] = deque(maxlen=RECENT)
        self.recent_keys: set[tuple[Direction, Any]] | None = None
        self._thresholds: dict[tuple[Direction, Any], float] = {}
        config = self.config
        # The shortest threshold there is: nothing can be due sooner after a request.
        self.min_threshold = min((v for v in (config.request_seconds, config.prompt_seconds,
                                              config.client_request_seconds, *config.methods.values()) if v > 0),
                                 default=INF)

    def __repr__(self) -> str:
        return (f"<Engine {self.session!r} sessions={len(self._sessions)} "
                f"findings={sum(self.counts.values())}>")

    # -- findings ---------------------------------------------------------------------------

    def flag(self, code: str, session: Any, at: float, seq: int | None, text: str, *args: Any,
              direction: Direction | None = None, method: str | None = None, id_: Any = None,
              per: Any = _UNSET) -> None:
        """Count one occurrence; tell the listeners about the first `notify` of its code and
        session (or of its code and `per`, when given: what it is counted by instead). With
        `args`, `text` is a `str.format` template for them (shown briefly), filled in only when
        a listener is told: most occurrences are only counted."""
        key: tuple[str, Any] = (code, (None if session is None else id_key(session)) if per is _UNSET else per)
        n = self.counts.get(key)
        if n is None:
            if len(self.counts) >= self.max_counted:
                key = (code, "(more sessions)")
                n = self.counts.get(key, 0)
            else:
                n = 0
        n += 1
        self.counts[key] = n
        if n > self.notify or not self.listeners:
            return
        if args:
            text = text.format(*(_brief(arg) for arg in args))
        finding = Finding(code, CODES[code].level, _plain(session), text, at, seq,
                          None if direction is None else direction.value, method, _plain(id_), n)
        self.told = key
        for listener in self.listeners:
            listener(finding)

    # -- requests and responses --------------------------------------------------------------
    # The session pairs them; these calls are for what the pairing teaches.

    def request(self, pending: Pending, seq: int | None = None, msg: Json | None = None) -> None:
        """A request went by (live: only those whose method is in SPECIAL; the timers read
        the rest from the session)."""
        if seq is not None and len(self.seqs) < self.max_tracked:
            self.seqs[id(pending)] = seq
        if pending.method in SPECIAL:
            self._special_request(pending, msg or {}, seq)

    def answered(self, pending: Pending, msg: Json, at: float, seq: int | None = None) -> None:
        """A response the session paired with `pending` (live: only when SPECIAL has its
        method, or a cancel is waiting)."""
        self.recent.append(pending)
        self.recent_keys = None
        method = pending.method
        if method in SPECIAL:
            self._special_response(pending, msg, at, seq)
        elif self._cancels and method == p.SESSION_PROMPT and pending.origin is TO_AGENT:
            self._prompt_answered(pending, msg, at, seq)

    def unpaired(self, direction: Direction, id_: Any, at: float, seq: int | None = None, *,
                 written: Any = _UNSET) -> None:
        """A response that answers no request in flight: a second answer, or one for an id
        nobody asked. `id_` as the session read it (it pairs by that); `written`, when it
        differs, as the peer wrote it (an integer past 64 bits, which orjson reads as a
        float): what the finding names."""
        shown = id_ if written is _UNSET else written
        if self.recent and (direction.reverse, id_key(id_)) in self.answered_keys():
            self.flag("response-duplicate", None, at, seq, "a second response for id {}", shown,
                       direction=direction, id_=shown)
            return
        counts = self.counts
        n = counts.get(_UNKNOWN_ID)
        if n is not None and n >= self.notify:  # reported already: only counted (a peer may send thousands)
            counts[_UNKNOWN_ID] = n + 1
            return
        self.flag("response-unknown-id", None, at, seq, "response for id {}, which no request in flight has",
                   shown, direction=direction, id_=shown)

    def answered_keys(self) -> set[tuple[Direction, Any]]:
        """(origin, id key) of the requests answered lately (made when asked for after an answer)."""
        keys = self.recent_keys
        if keys is None:
            keys = self.recent_keys = {(r.origin, id_key(r.id)) for r in self.recent}
        return keys

    def unknown_reported(self) -> bool:
        """Has a response for an unknown id been reported already (later ones are only counted)?"""
        return self.counts.get(_UNKNOWN_ID, 0) >= self.notify

    def quiet_unknown(self) -> bool:
        """Would `unpaired` only count now (unknown ids reported already, no answer to tell a
        duplicate by)? Then a caller may count a read's unpaired responses at once."""
        return not self.recent and self.unknown_reported()

    def count_unknown(self, n: int) -> None:
        """`n` responses for ids nobody asked, already known to be only counted."""
        self.counts[_UNKNOWN_ID] = self.counts.get(_UNKNOWN_ID, 0) + n

    def result_and_error(self, direction: Direction, id_: Any, at: float, seq: int | None = None) -> None:
        self.flag("response-result-and-error", None, at, seq, "response {} has both result and error", id_,
                   direction=direction, id_=id_)

    def reused(self, at: float) -> None:
        """Look for requests that came with the id of one still in flight from the same side
        (the session keeps them waiting behind it); each is reported once."""
        for pending in self.session.reused():
            if id(pending) not in self._reused and len(self._reused) < self.max_tracked:
                self._reused[id(pending)] = pending
                self.flag("request-id-reused", pending.session_id, at, self.seqs.get(id(pending)),
                           "request {} reuses id {}, still in flight", pending.method, _written(pending),
                           direction=pending.origin, method=pending.method, id_=_written(pending))

    def threshold(self, origin: Direction, method: Any) -> float:
        key = (origin, method)
        seconds = self._thresholds.get(key)
        if seconds is None:
            seconds = _threshold(self.config, origin, method)
            if len(self._thresholds) < 1000:  # methods are the peer's to choose: cache a bounded number
                self._thresholds[key] = seconds
        return seconds

    # -- timers -----------------------------------------------------------------------------

    def advance(self, now: float) -> float:
        """Report every request and cancel overdue by `now` (one scan of the requests in
        flight); return when the next one is due (INF: none)."""
        nearest = INF
        in_flight = self.session.pending(TO_AGENT) + self.session.pending(TO_CLIENT)
        reported = self._reported
        last_out = self.last_out
        for pending in in_flight:
            if id(pending) in reported:
                continue
            seconds = self.threshold(pending.origin, pending.method)
            if seconds <= 0:
                continue
            streamed = pending.method in STREAMED and pending.origin is TO_AGENT
            due = (max(pending.at, last_out) if streamed else pending.at) + seconds
            if due > now:
                nearest = min(nearest, due)
            elif len(reported) < self.max_tracked:
                reported[id(pending)] = pending
                self._overdue(pending, streamed and pending.method == p.SESSION_PROMPT, now)
        if reported or self.seqs or self._reused:  # forget what is no longer in flight
            alive = {id(r) for r in in_flight}
            for table in (reported, self.seqs, self._reused):
                for gone in [k for k in table if k not in alive]:
                    del table[gone]
        nearest = min(nearest, self._due_cancels(now))
        self.soonest = nearest
        return nearest

    def late(self, pending: Pending, now: float) -> None:
        """`pending` is answered at `now`: report it if it was overdue by then and no scan
        reported it (post hoc, where scans are spaced out)."""
        if self._reported.pop(id(pending), None) is pending:
            return
        seconds = self.threshold(pending.origin, pending.method)
        streamed = pending.method in STREAMED and pending.origin is TO_AGENT
        if seconds > 0 and (max(pending.at, self.last_out) if streamed else pending.at) + seconds <= now:
            self._overdue(pending, streamed and pending.method == p.SESSION_PROMPT, now)

    def _overdue(self, pending: Pending, prompt: bool, now: float) -> None:
        origin, id_, method, at = pending.origin, _written(pending), pending.method, pending.at
        waited = f"{now - at:.0f}"
        if prompt:
            code, text = "prompt-stalled", "session/prompt {} unanswered for {}s, the agent silent for {}s"
            args: tuple[Any, ...] = (id_, waited, f"{now - max(at, self.last_out):.0f}")
        elif origin is TO_AGENT:
            code, text, args = "request-unanswered", "{} {} unanswered by the agent for {}s", (method, id_, waited)
        else:
            code, text = "client-request-unanswered", "{} {} from the agent unanswered by the client for {}s"
            args = (method, id_, waited)
        self.flag(code, pending.session_id, now, self.seqs.get(id(pending)), text, *args, direction=origin,
                   method=method, id_=id_)

    # -- requests that teach something --------------------------------------------------------

    def _special_request(self, pending: Pending, msg: Json, seq: int | None) -> None:
        direction, method, session, at = pending.origin, pending.method, pending.session_id, pending.at
        if method == p.INITIALIZE and direction is TO_AGENT:
            # This request's own params: live, the session may have taken a later
            # initialize of the same read already.
            if read.client_form(p.client_capabilities(msg.get("params"))) == read.LEGACY:
                self.flag("air-only-client", None, at, seq,
                           "the client is JetBrains AIR only (legacy suggestion form, no session.promptSuggestions)",
                           direction=direction, method=method)
        elif method in SESSION_REOPENERS and direction is TO_AGENT:
            self._open(session)
        elif method in SESSION_OPENERS and direction is TO_AGENT:
            self._opening += 1
        if method in V1_ONLY_METHODS and self.v2:
            self.flag("v1-shape-on-v2", session, at, seq, "method {}, removed in v2", method,
                       direction=direction, method=method)

    def _special_response(self, request: Pending, msg: Json, at: float, seq: int | None) -> None:
        method = request.method
        result = msg.get("result")
        if method == p.INITIALIZE and request.origin is TO_AGENT and isinstance(result, dict):
            if self.v2:  # the session has taken the answer already
                old = [k for k in ("agentCapabilities", "agentInfo") if k in result]
                old += [k for k in ("clientCapabilities", "clientInfo") if k in (self.session.client_init or {})]
                if old:
                    self.flag("v1-shape-on-v2", None, at, seq, f"v1 initialize keys on v2: {', '.join(old)}",
                               direction=request.origin, method=method)
        elif method in SESSION_OPENERS:
            self._opening = max(0, self._opening - 1)
            created = read.created_session_id(result)
            if created is not None:
                self._open(created)
                self._maybe.pop(_session_key(created), None)
            if not self._opening:
                self._flush_maybe()
        elif method in SESSION_CLOSERS and "result" in msg:
            self._close(request.session_id, method)

    # -- the end --------------------------------------------------------------------------------

    def finish(self, now: float) -> None:
        """The connection ended: report what was overdue by then."""
        self.advance(now)
        self._flush_maybe()

    def summary(self) -> dict[str, int]:
        """Occurrences per code (all sessions)."""
        out: dict[str, int] = {}
        for (code, _), n in self.counts.items():
            out[code] = out.get(code, 0) + n
        return out


_UNKNOWN_ID = ("response-unknown-id", None)
# Methods whose requests or answers teach the engine something (capabilities, sessions).
SPECIAL = frozenset({p.INITIALIZE, *SESSION_CLOSERS, *SESSION_OPENERS, *SESSION_REOPENERS, *V1_ONLY_METHODS})


def answers_unreadable(msg: Json) -> bool:
    """An error with id null: JSON-RPC 2.0's answer to a line whose id could not be read (a
    parse error, an invalid request). Valid, and pairs with nothing: no unknown id."""
    return msg.get("id", 0) is None and "error" in msg and "result" not in msg


def _threshold(config: HealthConfig, direction: Direction, method: Any) -> float:
    methods: Mapping[str, float] = config.methods
    if isinstance(method, str) and method in methods:
        return methods[method]
    if direction is TO_AGENT:
        return config.prompt_seconds if method == p.SESSION_PROMPT else config.request_seconds
    return 0.0 if method in WAIT_BY_DESIGN else config.client_request_seconds


def _session_key(session: Any) -> Any:
    return None if session is None else id_key(session)


def _written(pending: Pending) -> Any:
    """A request's id as its line has it: orjson reads an integer past 64 bits as a float."""
    id_ = pending.id
    return integer_id(pending.raw, id_) if type(id_) is float and pending.raw else id_


def _plain(value: Any) -> Any:
    """A session or id as a finding keeps it: JSON scalars as they are, else a short text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return _brief(value)


def _brief(value: Any) -> str:
    if isinstance(value, str) and len(value) <= 60:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return brief(value)
