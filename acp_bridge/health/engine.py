"""The findings engine: timed messages in, findings out (docs/health.md).

Owns: the rules that turn traffic into findings (unanswered requests and their timers, ids
answered twice or never asked, sessions never opened or already closed, malformed updates,
ignored cancels, v1 shapes on v2, the migration facts), counting each code per session,
and telling listeners. Fed the same way live (`watchdog`, from what the relay already
parsed) and post hoc (`posthoc`, from every record of a capture).

Must never: do IO, read a clock (every call says when), parse bytes (it is given parsed
messages), or grow without bound: requests tracked, sessions known and codes counted are
capped, and what is past a cap is counted, not remembered.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from acp_bridge.config import HealthConfig
from acp_bridge.core import protocol as p
from acp_bridge.core.frames import Direction, brief, id_key
from acp_bridge.core.protocol import Json
from acp_bridge.health.findings import CODES, Finding

TO_AGENT, TO_CLIENT = Direction.TO_AGENT, Direction.TO_CLIENT
INF = math.inf

# Agent requests that wait on a person or on a command by design: no threshold unless
# `[health] methods` sets one.
WAIT_BY_DESIGN = frozenset({"session/request_permission", "terminal/wait_for_exit"})
SESSION_OPENERS = frozenset({p.SESSION_NEW, p.SESSION_FORK})  # their response names the session
SESSION_REOPENERS = frozenset({p.SESSION_LOAD, p.SESSION_RESUME})  # the request names it
# Removed in v2 (spec/acp-notes.md 2.4, 3.2).
V1_ONLY_METHODS = frozenset({
    "session/load", "session/set_mode", "authenticate", "fs/read_text_file", "fs/write_text_file",
    "terminal/create", "terminal/output", "terminal/release", "terminal/wait_for_exit", "terminal/kill",
})
V1_ONLY_UPDATES = frozenset({"current_mode_update", "tool_call", "plan"})

Listener = Callable[[Finding], None]


class _Request:
    __slots__ = ("at", "direction", "id", "method", "seq", "session")

    def __init__(self, direction: Direction, id_: Any, method: Any, session: Any, at: float,
                 seq: int | None) -> None:
        self.direction, self.id, self.method, self.session, self.at, self.seq = (
            direction, id_, method, session, at, seq)


class _Queue:
    """Requests with one threshold, oldest first (so the first is the next due)."""

    __slots__ = ("code", "entries", "from_output", "seconds")

    def __init__(self, seconds: float, code: str, from_output: bool) -> None:
        self.seconds, self.code, self.from_output = seconds, code, from_output
        self.entries: OrderedDict[Any, _Request] = OrderedDict()


class Engine:
    """Findings from one connection's traffic, in the order it went by.

    Args:
        config: thresholds (`[health]`).
        notify: how many occurrences of one code and session are told to listeners (the
            rest are only counted): 1 live, more post hoc (for the seqs in the report).
        max_tracked, max_sessions, max_counted: memory caps (see the module docstring).
    """

    def __init__(self, config: HealthConfig | None = None, *, notify: int = 1, max_tracked: int = 100_000,
                 max_sessions: int = 100_000, max_counted: int = 10_000) -> None:
        self.config = config or HealthConfig()
        self.notify = notify
        self.listeners: list[Listener] = []  # called with each finding told (OpenTelemetry can add one)
        self.counts: dict[tuple[str, Any], int] = {}
        self.max_tracked, self.max_sessions, self.max_counted = max_tracked, max_sessions, max_counted
        self.untracked = 0  # requests past the cap: not timed
        self.last_out = -INF  # when the agent last wrote anything (the prompt's clock)
        self.soonest = INF  # no timer is due before this (lowered as timers are added)
        self.client_init: Json | None = None
        self.agent_init: Json | None = None
        self.version: int | None = None
        self._pending: dict[Any, _Request] = {}
        self._queues: dict[tuple[Direction, str], _Queue | None] = {}
        self._by_seconds: dict[tuple[float, str, bool], _Queue] = {}
        self._answered: set[Any] = set()  # recently answered keys, two generations
        self._answered_old: set[Any] = set()
        self._reused: dict[Any, int] = {}  # keys with extra requests in flight
        self._sessions: dict[Any, bool] = {}  # True open, False closed
        self._sessions_full = False
        self._opening = 0  # session/new and session/fork in flight
        self._maybe: dict[Any, tuple[Any, float, int | None]] = {}  # updates for a session being created
        self._cancels: OrderedDict[Any, tuple[Any, float, int | None]] = OrderedDict()
        self._running: dict[Any, bool] = {}  # v2: the last state_update of a session said running
        self._prompts: dict[Any, Any] = {}  # v1: session key -> key of its prompt in flight

    def __repr__(self) -> str:
        return (f"<Engine pending={len(self._pending)} sessions={len(self._sessions)} "
                f"findings={sum(self.counts.values())}>")

    # -- findings ---------------------------------------------------------------------------

    def found(self, code: str, session: Any, at: float, seq: int | None, text: str, *,
              direction: Direction | None = None, method: str | None = None, id_: Any = None) -> None:
        """Count one occurrence; tell the listeners about the first `notify` of its code and session."""
        key = (code, _session_key(session))
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
        finding = Finding(code, CODES[code].level, _plain(session), text, at, seq,
                          None if direction is None else direction.value, method, _plain(id_), n)
        for listener in self.listeners:
            listener(finding)

    # -- requests and responses --------------------------------------------------------------

    def request(self, direction: Direction, msg: Json, at: float, seq: int | None = None) -> float:
        """A request went by; return when its timer is due (INF: none)."""
        id_ = msg.get("id")
        method = msg.get("method")
        key = (direction, id_key(id_))
        if key in self._pending:
            self._reused[key] = self._reused.get(key, 0) + 1
            self.found("request-id-reused", _session_of(msg), at, seq,
                       f"request {method} reuses id {_brief(id_)}, still in flight",
                       direction=direction, method=method, id_=id_)
            return INF
        if method in _SPECIAL:
            self._special_request(direction, method, msg, at, seq)
        queue = self._queues.get((direction, method), _UNSET) if isinstance(method, str) else None
        if queue is _UNSET:
            queue = self._queue_for(direction, method)
        if len(self._pending) >= self.max_tracked:
            self.untracked += 1
            return INF
        request = _Request(direction, id_, method, _session_of(msg), at, seq)
        self._pending[key] = request
        if method == p.SESSION_PROMPT and direction is TO_AGENT:
            self._prompts[_session_key(request.session)] = key
        if queue is None:
            return INF
        queue.entries[key] = request
        if len(queue.entries) == 1:
            due: float = at + queue.seconds
            self.soonest = min(self.soonest, due)
            return due
        return INF

    def response(self, direction: Direction, msg: Json, at: float, paired: bool,
                 seq: int | None = None) -> None:
        """A response went by. `paired`: the relay matched it with a request (perhaps one
        this engine never saw: a line over the parse limit, a batch)."""
        id_ = msg.get("id")
        if "result" in msg and "error" in msg:
            self.found("response-result-and-error", None, at, seq,
                       f"response {_brief(id_)} has both result and error", direction=direction, id_=id_)
        key = (direction.reverse, id_key(id_))
        request = self._pending.pop(key, None)
        if request is None:
            extra = self._reused.get(key)
            if extra:
                if extra == 1:
                    del self._reused[key]
                else:
                    self._reused[key] = extra - 1
            elif not paired and not self.untracked:
                if key in self._answered or key in self._answered_old:
                    self.found("response-duplicate", None, at, seq,
                               f"a second response for id {_brief(id_)}", direction=direction, id_=id_)
                else:
                    self.found("response-unknown-id", None, at, seq,
                               f"response for id {_brief(id_)}, which no request in flight has",
                               direction=direction, id_=id_)
            self._remember(key)
            return
        self._remember(key)
        method = request.method
        queue = self._queues.get((request.direction, method))
        if queue is not None:
            queue.entries.pop(key, None)
        if method in _SPECIAL:
            self._special_response(request, msg, at, seq)

    def _remember(self, key: Any) -> None:
        answered = self._answered
        answered.add(key)
        if len(answered) > 4096:
            self._answered_old, self._answered = answered, set()

    def _queue_for(self, direction: Direction, method: Any) -> _Queue | None:
        config = self.config
        seconds = _threshold(config, direction, method)
        from_output = method == p.SESSION_PROMPT and direction is TO_AGENT
        if direction is TO_AGENT:
            code = "prompt-stalled" if from_output else "request-unanswered"
        else:
            code = "client-request-unanswered"
        queue = None
        if seconds > 0:
            shared = (seconds, code, from_output)
            queue = self._by_seconds.get(shared)
            if queue is None:
                queue = self._by_seconds[shared] = _Queue(seconds, code, from_output)
        if len(self._queues) < 1000:  # methods are the peer's to choose: cache a bounded number
            self._queues[(direction, method)] = queue
        return queue

    # -- timers -----------------------------------------------------------------------------

    def advance(self, now: float) -> float:
        """Report every timer due by `now`; return when the next one is due (INF: none)."""
        nearest = INF
        for queue in self._by_seconds.values():
            entries = queue.entries
            while entries:
                key, request = next(iter(entries.items()))
                start = max(request.at, self.last_out) if queue.from_output else request.at
                due = start + queue.seconds
                if due > now:
                    nearest = min(nearest, due)
                    break
                del entries[key]  # still in flight: an answer later is no finding of its own
                self._overdue(queue, request, now)
        while self._cancels:
            key, (session, at, seq) = next(iter(self._cancels.items()))
            due = at + self.config.cancel_seconds
            if due > now:
                nearest = min(nearest, due)
                break
            del self._cancels[key]
            self.found("cancel-ignored", session, now, seq,
                       f"session/cancel for {_brief(session)} was not followed by stopReason "
                       f"cancelled within {self.config.cancel_seconds:g}s", direction=TO_AGENT,
                       method=p.SESSION_CANCEL)
        self.soonest = nearest
        return nearest

    def _overdue(self, queue: _Queue, request: _Request, now: float) -> None:
        waited = now - request.at
        if queue.from_output:
            text = (f"session/prompt {_brief(request.id)} unanswered for {waited:.0f}s, the agent silent for "
                    f"{now - max(request.at, self.last_out):.0f}s")
        elif request.direction is TO_AGENT:
            text = f"{request.method} {_brief(request.id)} unanswered by the agent for {waited:.0f}s"
        else:
            text = f"{request.method} {_brief(request.id)} from the agent unanswered by the client for {waited:.0f}s"
        self.found(queue.code, request.session, now, request.seq, text, direction=request.direction,
                   method=request.method, id_=request.id)

    @property
    def watching_cancel(self) -> bool:
        """A v2 cancel waits for its idle state_update (the watchdog then looks for it)."""
        return bool(self._cancels) and self.version is not None and self.version >= 2

    # -- notifications ------------------------------------------------------------------------

    def notification(self, direction: Direction, msg: Json, at: float, seq: int | None = None) -> None:
        method = msg.get("method")
        if method == p.SESSION_UPDATE and direction is TO_CLIENT:
            self._update(msg, at, seq)
        elif method == p.SESSION_CANCEL and direction is TO_AGENT:
            self._cancel(msg, at, seq)

    def _update(self, msg: Json, at: float, seq: int | None) -> None:
        params = msg.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        update = params.get("update") if isinstance(params, dict) else None
        if session is None or not isinstance(update, dict):
            missing = "params" if not isinstance(params, dict) else "sessionId" if session is None else "update"
            self.found("update-malformed", session, at, seq, f"session/update without {missing} (an object)",
                       direction=TO_CLIENT, method=p.SESSION_UPDATE)
            return
        skey = _session_key(session)
        state = self._sessions.get(skey)
        if state is None and not self._sessions_full:
            if self._opening:
                if len(self._maybe) < 64:
                    self._maybe.setdefault(skey, (session, at, seq))
            else:
                self.found("update-unknown-session", session, at, seq,
                           f"session/update for {_brief(session)}, which was never created, loaded or resumed",
                           direction=TO_CLIENT, method=p.SESSION_UPDATE)
        elif state is False:
            self.found("update-closed-session", session, at, seq,
                       f"session/update for {_brief(session)} after its session/close",
                       direction=TO_CLIENT, method=p.SESSION_UPDATE)
        kind = update.get("sessionUpdate")
        if kind == p.SESSION_INFO_UPDATE:
            if p.get_path(update, p.META, p.PROMPT_SUGGESTIONS) is not None:
                self.found("legacy-suggestions", session, at, seq,
                           "the agent sent a legacy suggestion (_meta.promptSuggestions)",
                           direction=TO_CLIENT, method=p.SESSION_UPDATE)
        elif kind == p.PROMPT_SUGGESTIONS_UPDATE:
            if not isinstance(p.get_path(p.client_capabilities(self.client_init), "session",
                                         p.PROMPT_SUGGESTIONS), dict):
                self.found("suggestions-unadvertised", session, at, seq,
                           "the agent sent prompt_suggestions_update; the client never advertised "
                           "session.promptSuggestions", direction=TO_CLIENT, method=p.SESSION_UPDATE)
        elif kind == "state_update":
            state_now = update.get("state")
            if state_now == "running":
                self._running[skey] = True
            elif state_now == "idle":
                self._running.pop(skey, None)
                if skey in self._cancels:
                    del self._cancels[skey]
                    if update.get("stopReason") != "cancelled":
                        self._ignored(session, at, seq, update.get("stopReason"))
        elif kind in V1_ONLY_UPDATES and self.version is not None and self.version >= 2:
            self.found("v1-shape-on-v2", session, at, seq, f"update kind {kind}, removed in v2",
                       direction=TO_CLIENT, method=p.SESSION_UPDATE)

    def _cancel(self, msg: Json, at: float, seq: int | None) -> None:
        session = p.get_path(msg, "params", "sessionId")
        skey = _session_key(session)
        if self.version is not None and self.version >= 2:
            watch = self._running.get(skey, False)  # v2: only a running turn answers a cancel
        else:
            watch = self._prompts.get(skey) in self._pending
        if watch and skey not in self._cancels and len(self._cancels) < 10_000:
            self._cancels[skey] = (session, at, seq)
            self.soonest = min(self.soonest, at + self.config.cancel_seconds)

    def _ignored(self, session: Any, at: float, seq: int | None, reason: Any) -> None:
        self.found("cancel-ignored", session, at, seq,
                   f"the turn cancelled with session/cancel ended with stopReason {_brief(reason)}, "
                   f"not cancelled", direction=TO_AGENT, method=p.SESSION_CANCEL)

    # -- requests that teach something --------------------------------------------------------

    def _special_request(self, direction: Direction, method: str, msg: Json, at: float, seq: int | None) -> None:
        if method == p.INITIALIZE and direction is TO_AGENT:
            params = msg.get("params")
            self.client_init = params if isinstance(params, dict) else {}
            caps = p.client_capabilities(self.client_init)
            air = isinstance(p.get_path(caps, p.META, "jetbrains", "air"), dict)
            if air and not isinstance(p.get_path(caps, "session", p.PROMPT_SUGGESTIONS), dict):
                self.found("air-only-client", None, at, seq,
                           "the client is JetBrains AIR only (legacy suggestion form, no session.promptSuggestions)",
                           direction=direction, method=method)
        elif method in SESSION_REOPENERS and direction is TO_AGENT:
            self._open(p.get_path(msg, "params", "sessionId"))
        elif method in SESSION_OPENERS and direction is TO_AGENT:
            self._opening += 1
        if method in V1_ONLY_METHODS and self.version is not None and self.version >= 2:
            self.found("v1-shape-on-v2", _session_of(msg), at, seq, f"method {method}, removed in v2",
                       direction=direction, method=method)

    def _special_response(self, request: _Request, msg: Json, at: float, seq: int | None) -> None:
        method = request.method
        result = msg.get("result")
        if method == p.INITIALIZE and request.direction is TO_AGENT and isinstance(result, dict):
            self.agent_init = result
            version = result.get("protocolVersion")
            self.version = version if isinstance(version, int) and not isinstance(version, bool) else None
            if self.version is not None and self.version >= 2:
                old = [k for k in ("agentCapabilities", "agentInfo") if k in result]
                old += [k for k in ("clientCapabilities", "clientInfo") if k in (self.client_init or {})]
                if old:
                    self.found("v1-shape-on-v2", None, at, seq, f"v1 initialize keys on v2: {', '.join(old)}",
                               direction=request.direction, method=method)
        elif method in SESSION_OPENERS:
            self._opening = max(0, self._opening - 1)
            created = p.get_path(result, "sessionId")
            if created is not None:
                self._open(created)
                self._maybe.pop(_session_key(created), None)
            if not self._opening:
                self._flush_maybe()
        elif method == p.SESSION_CLOSE and "result" in msg:
            skey = _session_key(request.session)
            if skey in self._sessions:
                self._sessions[skey] = False
        elif method == p.SESSION_PROMPT and request.direction is TO_AGENT:
            skey = _session_key(request.session)
            self._prompts.pop(skey, None)
            if skey in self._cancels and (self.version is None or self.version < 2):
                del self._cancels[skey]
                reason = p.get_path(result, "stopReason")
                if reason != "cancelled":
                    self._ignored(request.session, at, seq, reason if "result" in msg else "(an error)")

    def _open(self, session: Any) -> None:
        if session is None:
            return
        if len(self._sessions) >= self.max_sessions:
            self._sessions_full = True  # past the cap, no session can be called unknown
            return
        self._sessions[_session_key(session)] = True

    def _flush_maybe(self) -> None:
        maybe, self._maybe = self._maybe, {}
        for skey, (session, at, seq) in maybe.items():
            if skey not in self._sessions:
                self.found("update-unknown-session", session, at, seq,
                           f"session/update for {_brief(session)}, which was never created, loaded or resumed",
                           direction=TO_CLIENT, method=p.SESSION_UPDATE)

    # -- what the rules did --------------------------------------------------------------------

    def system_prompt_sent(self, method: str | None, out: Any, session: Any, at: float, seq: int | None) -> None:
        """The system-prompt rule rewrote a request: note the dialect when it is not the spec's."""
        dialect = system_prompt_dialect(method, out)
        if dialect in ("meta", "first-prompt"):
            self.found("system-prompt-fallback", None, at, seq,
                       f"the system prompt went through {dialect}: the agent lacks the systemPrompt capability",
                       direction=TO_AGENT, method=method)

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


_UNSET: Any = object()
_SPECIAL = frozenset({p.INITIALIZE, p.SESSION_CLOSE, p.SESSION_PROMPT, *SESSION_OPENERS, *SESSION_REOPENERS,
                      *V1_ONLY_METHODS})


def system_prompt_dialect(method: str | None, out: Any) -> str | None:
    """How a request the system-prompt rule rewrote carried the prompt: spec, meta,
    first-prompt, or None when it cannot tell."""
    if method == p.SESSION_PROMPT:
        return "first-prompt"
    params = p.get_path(out, "params")
    if p.get_path(params, p.SYSTEM_PROMPT) is not None:
        return "spec"
    if p.get_path(params, p.META, p.SYSTEM_PROMPT) is not None:
        return "meta"
    return None


def _threshold(config: HealthConfig, direction: Direction, method: Any) -> float:
    methods: Mapping[str, float] = config.methods
    if isinstance(method, str) and method in methods:
        return methods[method]
    if direction is TO_AGENT:
        return config.prompt_seconds if method == p.SESSION_PROMPT else config.request_seconds
    return 0.0 if method in WAIT_BY_DESIGN else config.client_request_seconds


def _session_of(msg: Json) -> Any:
    params = msg.get("params")
    return params.get("sessionId") if isinstance(params, dict) else None


def _session_key(session: Any) -> Any:
    return None if session is None else id_key(session)


def _plain(value: Any) -> Any:
    """A session or id as a finding keeps it: JSON scalars as they are, else a short text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return _brief(value)


def _brief(value: Any) -> str:
    return value if isinstance(value, str) and len(value) <= 60 else brief(value)
