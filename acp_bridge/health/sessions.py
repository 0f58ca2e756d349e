"""Session facts for the findings engine: which sessions exist, their updates, and cancels.

Owns: the rules that read `session/update` and `session/cancel` (updates for sessions never
opened or already closed, malformed updates, the suggestion forms the agent uses, v1 update
kinds on v2, cancels the agent ignores) and the sessions each connection opened and closed.
A mixin of `engine.Engine`, which owns counting and telling; kept apart so that each module
stays readable. Must never: do IO, read a clock, or grow without bound (sessions and turn
states are capped like the engine's other tables), nor with sessions that have ended: a
closed session leaves only its place among the last `max_closed` closed.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from acp_bridge.config import HealthConfig
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.messages import TO_AGENT, TO_CLIENT, Direction, id_key
from acp_bridge.core.protocol import Json
from acp_bridge.core.session import Connection, Pending

INF = float("inf")
V1_ONLY_UPDATES = frozenset({"current_mode_update", "tool_call", "plan"})  # removed in v2 (acp-notes 4.2)
CLOSED_KEPT = 1024  # closed sessions remembered live, for update-closed-session


class SessionRules:
    """The session and cancel rules (see the module docstring); `Engine` mixes them in."""

    config: HealthConfig
    session: Connection
    soonest: float
    max_sessions: int
    max_closed: int
    notify: int
    counts: dict[tuple[str, Any], int]

    def __init__(self) -> None:
        self._sessions: dict[Any, bool] = {}  # the open ones (True)
        self._sessions_full = False
        # The last `max_closed` sessions closed, oldest first: an update for one of them is
        # update-closed-session. Older ones are forgotten (nothing may grow with sessions
        # that ended); an update for one of those is then reported as not open.
        # (Each with the method that closed it: `session/close` or `session/archive`.)
        self._closed: OrderedDict[Any, str] = OrderedDict()
        self._closed_forgotten = False
        self._opening = 0  # session/new and session/fork in flight
        # Updates for a session that a session/new or session/fork in flight may be creating:
        # session key -> the updates (time, seq), the first `notify` of them kept, all counted.
        self._maybe: dict[Any, tuple[Any, list[tuple[float, int | None]], list[int]]] = {}
        self._cancels: OrderedDict[Any, tuple[Any, float, int | None]] = OrderedDict()
        self._running: dict[Any, bool] = {}  # v2: the last state_update of a session said running

    @property
    def v2(self) -> bool:
        """The agent answered `initialize` with version 2 or later: what a v1 shape is judged
        by (the version the client asked for alone negotiates nothing)."""
        version = self.session.agent_version
        return version is not None and version >= 2

    def flag(self, code: str, session: Any, at: float, seq: int | None, text: str, *args: Any,
              direction: Direction | None = None, method: str | None = None, id_: Any = None) -> None:
        raise NotImplementedError  # Engine.flag

    @property
    def cancels_waiting(self) -> bool:
        """A cancel waits for its turn to end (an answered prompt then teaches something)."""
        return bool(self._cancels)

    @property
    def watching_cancel(self) -> bool:
        """A v2 cancel waits for its idle state_update (the watchdog then looks for it)."""
        return bool(self._cancels) and self.v2

    def _due_cancels(self, now: float) -> float:
        """Report the cancels that waited past `cancel_seconds`; when the next is due.

        Called by each timer scan, and before any message that may end a cancelled turn or
        cancel another is judged: a cancel overdue by then was ignored, said of the cancel,
        whether or not a scan has come since (live, the timer task may run after the read
        that came past the deadline; post hoc, scans are spaced out). `cancel_seconds` 0
        turns the timeout off (a cancelled turn's stop reason is still checked)."""
        if self.config.cancel_seconds <= 0:
            return INF
        while self._cancels:
            key, (session, at, seq) = next(iter(self._cancels.items()))
            due = at + self.config.cancel_seconds
            if due > now:
                return due
            del self._cancels[key]
            self.flag("cancel-ignored", session, now, seq,
                       "session/cancel for {} was not followed by stopReason cancelled within {}s", session,
                       f"{self.config.cancel_seconds:g}", direction=TO_AGENT, method=p.SESSION_CANCEL)
        return INF

    # -- notifications ------------------------------------------------------------------------

    def notification(self, direction: Direction, msg: Json, at: float, seq: int | None = None,
                     later: frozenset[int] = frozenset()) -> None:
        """A notification went by. `later`: ids of the requests the session already holds
        that came after it (live, the relay has read the whole chunk before the watchdog)."""
        method = msg.get("method")
        if self._cancels:
            self._due_cancels(at)
        if method == p.SESSION_UPDATE and direction is TO_CLIENT:
            self._update(msg, at, seq)
        elif method == p.SESSION_CANCEL and direction is TO_AGENT:
            self._cancel(msg, at, seq, later)

    def _update(self, msg: Json, at: float, seq: int | None) -> None:
        params = msg.get("params")
        session = read.session_id_of(msg)
        update = read.update_of(msg)
        if session is None or update is None:
            missing = "params" if not isinstance(params, dict) else "sessionId" if session is None else "update"
            self.flag("update-malformed", session, at, seq, "session/update without {} (an object)", missing,
                       direction=TO_CLIENT, method=p.SESSION_UPDATE)
            return
        skey = _session_key(session)
        if skey in self._sessions:
            pass
        elif skey in self._closed:
            self.flag("update-closed-session", session, at, seq,
                       "session/update for {} after its {}", session, self._closed[skey],
                       direction=TO_CLIENT, method=p.SESSION_UPDATE)
        elif not self._sessions_full:
            if self._opening:
                held = self._maybe.get(skey)
                if held is None and len(self._maybe) < 64:
                    held = self._maybe[skey] = (session, [], [0])
                if held is not None:
                    if len(held[1]) < self.notify:
                        held[1].append((at, seq))
                    held[2][0] += 1
            else:
                self._unknown(session, at, seq)
        kind = read.update_kind(update)
        if kind is None:  # a peer's value: a list or an object is no kind at all
            return
        if kind == p.SESSION_INFO_UPDATE:
            if read.suggestion_form(update) == read.LEGACY:
                self.flag("legacy-suggestions", session, at, seq,
                           "the agent sent a legacy suggestion (_meta.promptSuggestions)",
                           direction=TO_CLIENT, method=p.SESSION_UPDATE)
        elif kind == p.PROMPT_SUGGESTIONS_UPDATE:
            if read.advertised_suggestions(self.session.client_caps) is None:
                self.flag("suggestions-unadvertised", session, at, seq,
                           "the agent sent prompt_suggestions_update; the client never advertised "
                           "session.promptSuggestions", direction=TO_CLIENT, method=p.SESSION_UPDATE)
        elif kind == p.STATE_UPDATE:
            state_now = update.get("state")
            if state_now == "running":
                if len(self._running) < self.max_sessions:
                    self._running[skey] = True
            elif read.ends_turn_v2(update):
                self._running.pop(skey, None)
                if skey in self._cancels:
                    del self._cancels[skey]
                    reason = read.stop_reason(update)
                    if reason != "cancelled":
                        self._ignored(session, at, seq, reason)
        elif kind in V1_ONLY_UPDATES and self.v2:
            self.flag("v1-shape-on-v2", session, at, seq, "update kind {}, removed in v2", kind,
                       direction=TO_CLIENT, method=p.SESSION_UPDATE)

    def _cancel(self, msg: Json, at: float, seq: int | None, later: frozenset[int] = frozenset()) -> None:
        session = read.session_id_of(msg)
        skey = _session_key(session)
        if self.v2:
            watch = self._running.get(skey, False)  # v2: only a running turn answers a cancel
        else:  # v1: a prompt of that session in flight
            watch = any(id(r) not in later for r in self.session.in_flight(p.SESSION_PROMPT, session))
        if watch and skey not in self._cancels and len(self._cancels) < 10_000:
            self._cancels[skey] = (session, at, seq)
            if self.config.cancel_seconds > 0:
                self.soonest = min(self.soonest, at + self.config.cancel_seconds)

    def _ignored(self, session: Any, at: float, seq: int | None, reason: Any) -> None:
        self.flag("cancel-ignored", session, at, seq,
                   "the turn cancelled with session/cancel ended with stopReason {}, not cancelled", reason,
                   direction=TO_AGENT, method=p.SESSION_CANCEL)

    def _prompt_answered(self, request: Pending, msg: Json, at: float, seq: int | None) -> None:
        """v1: the answer to a cancelled prompt must say `cancelled`."""
        self._due_cancels(at)
        skey = _session_key(request.session_id)
        if skey in self._cancels and not self.v2:
            del self._cancels[skey]
            reason = read.stop_reason(msg.get("result"))
            if reason != "cancelled":
                self._ignored(request.session_id, at, seq, reason if "result" in msg else "(an error)")

    def _unknown(self, session: Any, at: float, seq: int | None) -> None:
        text = ("session/update for {}, which is not open (never created, loaded or resumed, or closed long ago)"
                if self._closed_forgotten else "session/update for {}, which was never created, loaded or resumed")
        self.flag("update-unknown-session", session, at, seq, text, session,
                   direction=TO_CLIENT, method=p.SESSION_UPDATE)

    def _open(self, session: Any) -> None:
        if session is None:
            return
        skey = _session_key(session)
        self._closed.pop(skey, None)  # loaded or resumed again
        if len(self._sessions) >= self.max_sessions:
            self._sessions_full = True  # past the cap, no session can be called unknown
            return
        self._sessions[skey] = True

    def _close(self, session: Any, method: str = p.SESSION_CLOSE) -> None:
        """`method` (`session/close`, `session/archive`) succeeded: the session's own facts go;
        its id joins the last closed."""
        skey = _session_key(session)
        self._running.pop(skey, None)
        if self._sessions.pop(skey, None) is None:
            return  # never known open (or past the cap): nothing to tell later updates by
        self._closed[skey] = method
        if len(self._closed) > self.max_closed:
            self._closed.popitem(last=False)
            self._closed_forgotten = True

    def _flush_maybe(self) -> None:
        maybe, self._maybe = self._maybe, {}
        for skey, (session, kept, (count,)) in maybe.items():
            if skey in self._sessions or skey in self._closed:
                continue
            for at, seq in kept:
                self._unknown(session, at, seq)
            if count > len(kept):
                key = ("update-unknown-session", skey)
                if key in self.counts:
                    self.counts[key] += count - len(kept)


def _session_key(session: Any) -> Any:
    return None if session is None else id_key(session)
