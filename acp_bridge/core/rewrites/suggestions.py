"""Prompt suggestions: each client gets suggestions in the one form it reads (bridge-rules.md 2).

Owns: the decisions of the rule. Which form a client receives (new client: the
`prompt_suggestions_update`; AIR client: the legacy `_meta.promptSuggestions`; neither:
nothing), the conversions and filtering (done by `suggestion_shapes`), the lifetime rules
that keep the agent's promises toward the client (withdraw on the next prompt, drop stale
legacy predictions, nothing during replay, no repeats), and the `initialize` capability edits.
Must never: change a line it does not have to (it returns PASS, so the relay forwards the very
bytes that came in), drop a field it does not own, or act before the client's `initialize`.

Before (<- agent, to a new client):
    {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":
     {"sessionUpdate":"session_info_update","_meta":{"promptSuggestions":
      {"suggestions":[{"text":"Run the tests"}]}}}}}
After (<- client):
    {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":
     {"sessionUpdate":"prompt_suggestions_update","suggestions":
      [{"prompt":[{"type":"text","text":"Run the tests"}]}]}}}
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.messages import TO_AGENT, TO_CLIENT, Direction, Frame, brief, id_key
from acp_bridge.core.methods import SESSION_CLOSERS
from acp_bridge.core.pointer import same_json
from acp_bridge.core.rewrites import suggestion_shapes as shapes
from acp_bridge.core.rewrites.base import DROP, PASS, Emit, Outcome, Replace, Rule
from acp_bridge.core.rewrites.options import FLAG, OFF_FLAG, BuiltIn, Option
from acp_bridge.core.rewrites.settings import SuggestionsSettings
from acp_bridge.core.session import Connection, HeldStates, Pending
from acp_bridge.core.shapes import LEGACY, NEW

log = logging.getLogger("acp_bridge.suggestions")


# Requests after `initialize` that change what the client holds: a new prompt withdraws the
# list, a history replay empties it (bridge-rules 2.4; `is_replay` tells which load/resume does).
_SESSION_REQUESTS = frozenset({p.SESSION_PROMPT, p.SESSION_LOAD, p.SESSION_RESUME})
# Sessions whose suggestion state is kept at once (the agent names the sessions, and may
# name a million); past it, the session used longest ago is forgotten: a later prompt there
# withdraws nothing.
MAX_SESSIONS = 1024


@dataclass(slots=True)
class SuggestionsState:
    """What this rule keeps per ACP session (`Connection.state_for(SuggestionsState, id)`)."""

    offered: list[Any] = field(default_factory=list)  # suggestions the client now holds
    offered_form: str | None = None  # NEW or LEGACY, the form `offered` was sent in
    agent_forms: set[str] = field(default_factory=set)  # suggestion forms the agent sent here


def client_suggestions(session: Connection) -> p.Json | None:
    """The client's `session.promptSuggestions` capability, or None if not advertised."""
    return read.advertised_suggestions(session.client_caps)


def legacy_client(session: Connection) -> bool:
    """The client carries the JetBrains AIR marker (`_meta.jetbrains.air` is an object)."""
    return read.air_marker(session.client_caps)


def agent_accepts(session: Connection, capability: str) -> bool:
    """Does the agent accept this prompt content type (`image`, `audio`, `embeddedContext`)?

    v1 uses booleans under `promptCapabilities`; v2 uses `{}` markers under
    `capabilities.session.prompt` (present and non-null = supported).
    """
    caps = session.agent_caps
    if p.get_path(caps, "promptCapabilities", capability) is True:
        return True
    return isinstance(p.get_path(caps, "session", "prompt", capability), dict)


def client_form(session: Connection) -> str | None:
    """The form this client reads (bridge-rules 2.1): NEW, LEGACY, or None for neither
    (`core/shapes.client_form`, which `check`'s migration verdict calls too)."""
    return read.client_form(session.client_caps)


def is_replay(method: str, params: Any, v2: bool) -> bool:
    """Does this request replay history (v1 `session/load`; v2 `session/resume` with
    `replayFrom`)? Suggestions are not history (RFD "Replay and resuming")."""
    if v2:
        return method == p.SESSION_RESUME and p.get_path(params, "replayFrom") is not None
    return method == p.SESSION_LOAD


# The methods that can replay history (`is_replay`): a request with any other method is no
# replay whatever its params, so an answer to it needs no parse of the request's line.
_REPLAY_METHODS = frozenset({p.SESSION_LOAD, p.SESSION_RESUME})


def replays(request: Pending, session: Connection) -> bool:
    """`is_replay` of a request in flight. Its params are parsed again from its line (see
    `Pending.params`), so only for a method that can replay: not for every prompt's answer."""
    return request.method in _REPLAY_METHODS and is_replay(request.method, request.params, session.v2)


def replaying(session: Connection, session_id: Any) -> bool:
    """Is a history replay of this session in flight (requested, not yet answered)?"""
    method = p.SESSION_RESUME if session.v2 else p.SESSION_LOAD
    return any(is_replay(req.method, req.params, session.v2) for req in session.in_flight(method, session_id))


def allowed_types(session: Connection) -> frozenset[str]:
    return shapes.allowed_block_types(client_suggestions(session) or {},
                                      lambda capability: agent_accepts(session, capability))


def offer(state: SuggestionsState, form: str, items: list[Any]) -> bool:
    """Record `items` as the client's list; False (send nothing) when it already holds exactly
    that list, which also covers a withdrawal of an empty list (bridge-rules 2.4). Exactly
    that list, as the bridge writes JSON (`same_json`: `[true]` is not `[1]`)."""
    if same_json(items, state.offered):
        return False
    state.offered, state.offered_form = list(items), form
    return True


def stated_list_key(fwd: Forward) -> tuple[str, Any] | None:
    """For a message the bridge writes toward the client that states a session's whole
    suggestion list (a withdrawal, a converted list): a key naming that session; None for
    anything else. Each such update replaces the list (the RFD), so of two with one key,
    still unsent, the later makes the earlier moot: the queue toward a client that reads
    nothing keeps only the latest (shell/streams.py `Outlet.put_keyed`)."""
    if fwd.verdict is not Verdict.EMIT or fwd.direction is not TO_CLIENT:
        return None
    try:
        msg = orjson.loads(fwd.data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(msg, dict) or msg.get("method") != p.SESSION_UPDATE or "id" in msg:
        return None
    params = msg.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(update, dict) or not isinstance(params, dict):
        return None
    if update.get("sessionUpdate") == p.PROMPT_SUGGESTIONS_UPDATE:
        states_list = True
    else:  # legacy: a session_info_update whose only field is _meta.promptSuggestions
        meta = update.get(p.META)
        states_list = (shapes.read_legacy(update) is not None and update.keys() == {"sessionUpdate", p.META}
                       and isinstance(meta, dict) and meta.keys() == {p.PROMPT_SUGGESTIONS})
    return (PromptSuggestions.name, id_key(params.get("sessionId"))) if states_list else None


class PromptSuggestions(Rule):
    """Convert, filter or drop prompt suggestions to match what the client advertised."""

    name = "suggestions"
    # One scan finds both `promptSuggestions` and `prompt_suggestions_update`; a chunk of text
    # that merely mentions "suggestions" is parsed for nothing and passes.
    triggers = (b"uggestions",)

    def __init__(self, config: SuggestionsSettings) -> None:
        self.config = config
        self._unlock_explained = False  # why an asked-for unlock did nothing is said once
        # `client_form` of the client capabilities it was last worked out for: they change
        # only with `initialize`, and every prompt asks (the caps object is held, so its
        # identity cannot be reused).
        self._form_of: tuple[object, str | None] = (object(), None)
        self._held = HeldStates(SuggestionsState, MAX_SESSIONS)  # the sessions it holds state for

    def __repr__(self) -> str:
        return f"<PromptSuggestions unlock_legacy_agent={self.config.unlock_legacy_agent}>"

    # -- client -> agent ---------------------------------------------------------------------

    def request(self, frame: Frame, session: Connection) -> Outcome:
        if frame.direction is not TO_AGENT or not session.client_ready or frame.msg is None:
            return PASS
        method, params = frame.method or "", frame.params
        if method == p.INITIALIZE:
            return self._initialize(frame.msg, session)
        if method not in _SESSION_REQUESTS:  # the rest of the requests concern no rule here
            return PASS
        form = self._client_form(session)
        session_id = read.session_id_of(frame.msg)
        if form is None or session_id is None:
            return PASS
        state = self._held.existing(session, session_id)
        if state is None:  # nothing offered there, nothing to withdraw
            return PASS
        if method == p.SESSION_PROMPT:
            return self._withdraw_on_prompt(frame.msg, state, form, session_id)
        if is_replay(method, params, session.v2):
            state.offered = []  # a replayed session starts with an empty list
        return PASS

    def _client_form(self, session: Connection) -> str | None:
        """`client_form(session)`, worked out again only when the capabilities changed."""
        caps = session.client_caps
        if self._form_of[0] is not caps:
            self._form_of = (caps, client_form(session))
        return self._form_of[1]

    def _initialize(self, msg: p.Json, session: Connection) -> Outcome:
        params = msg.get("params")
        if not isinstance(params, dict):
            return PASS
        form = client_form(session)
        changed: p.Json | None = None
        if form == LEGACY:
            # The agent may speak the new form; ask for it, and convert it back (2.5).
            changed = shapes.with_suggestions_capability(params)
        elif form == NEW and self.config.unlock_legacy_agent and not legacy_client(session):
            changed = shapes.with_air_marker(params)
        if self.config.unlock_legacy_agent and (form != NEW or changed is None):
            self._explain_no_unlock(session, form)
        return PASS if changed is None else Replace({**msg, "params": changed})

    def _explain_no_unlock(self, session: Connection, form: str | None) -> None:
        """--unlock-legacy-agent was asked for and unlocked nothing: say why, once (at -v)."""
        if self._unlock_explained:
            return
        self._unlock_explained = True
        name = p.get_path(session.client_init, "clientInfo", "name")
        if not isinstance(name, str):
            name = p.get_path(session.client_init, "info", "name")
        who = f'client "{name}"' if isinstance(name, str) else "the client"
        if legacy_client(session):
            why = (f"{who} already carries the JetBrains AIR marker (_meta.jetbrains.air), so legacy "
                   "agents already send it suggestions")
        elif form is None:
            why = (f"{who} does not advertise session.promptSuggestions, so it would not show the "
                   "suggestions a legacy agent sends (the AIR marker is added only for clients that do)")
        else:
            why = ("the AIR marker has no place in the client's capabilities (_meta.jetbrains.air "
                   "holds a value, or something on the way is not an object)")
        log.info("--unlock-legacy-agent: nothing unlocked: %s", why)

    def _withdraw_on_prompt(self, msg: p.Json, state: SuggestionsState, form: str, session_id: Any) -> Outcome:
        """A prompt makes the offered list out of date: withdraw it toward the client."""
        if not state.offered:
            return PASS
        state.offered, state.offered_form = [], form
        emit = Emit(Direction.TO_CLIENT, p.session_update(session_id, shapes.withdrawal(form)))
        return Replace(msg, then=(emit,))  # the prompt itself goes on unchanged

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        if request.method in SESSION_CLOSERS:
            self._held.closed(session, request.session_id)
            return PASS
        if (
            frame.direction is TO_CLIENT
            and session.client_ready
            and request.session_id is not None
            and replays(request, session)
            and (state := self._held.existing(session, request.session_id)) is not None
        ):
            state.offered = []
        return PASS

    # -- agent -> client -------------------------------------------------------------------------

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        if (
            frame.direction is not TO_CLIENT
            or frame.method != p.SESSION_UPDATE
            or not session.client_ready
            or frame.msg is None
        ):
            return PASS
        update = read.update_of(frame.msg)
        if update is None:
            return PASS
        session_id = read.session_id_of(frame.msg)
        if update.get("sessionUpdate") == p.PROMPT_SUGGESTIONS_UPDATE:
            return self._new_form(frame.msg, update, session, session_id)
        legacy = read.read_legacy(update)
        if legacy is not None:
            return self._legacy_form(frame.msg, update, legacy, session, session_id)
        return PASS

    def _new_form(self, msg: p.Json, update: p.Json, session: Connection, session_id: Any) -> Outcome:
        form = client_form(session)
        suggestions = update.get("suggestions")
        if form is None:
            return DROP  # the client never advertised the update (v1's union is closed)
        if not isinstance(suggestions, list):
            log.debug("dropped a prompt_suggestions_update without a suggestions list (%s)", brief(session_id))
            return DROP  # cannot be vetted, so it is not delivered
        state = self._held.get(session, session_id)
        state.agent_forms.add(NEW)
        if replaying(session, session_id):
            state.offered = []
            return DROP
        if form == NEW:
            kept = shapes.filter_suggestions(suggestions, allowed_types(session))
            if not offer(state, NEW, kept):
                return DROP
            if len(kept) == len(suggestions):
                return PASS
            return Replace(shapes.with_update(msg, {**update, "suggestions": kept}))
        if LEGACY in state.agent_forms:
            return DROP  # the agent also speaks legacy here: its own legacy copy is the one
        items = shapes.to_legacy_shape(suggestions)
        if not offer(state, LEGACY, items):
            return DROP
        return Replace(shapes.with_update(msg, shapes.legacy_update(items, update.get(p.META))))

    def _legacy_form(
        self, msg: p.Json, update: p.Json, legacy: read.LegacyPayload, session: Connection, session_id: Any
    ) -> Outcome:
        form = client_form(session)
        if form == LEGACY and legacy.items is None:
            return PASS  # a shape we do not know, to the client that reads this key: untouched
        stripped = shapes.strip_legacy(update)
        rest = Replace(None if stripped is None else shapes.with_update(msg, stripped))
        if form is None or legacy.items is None:
            return rest
        state = self._held.get(session, session_id)
        state.agent_forms.add(LEGACY)
        items = shapes.clean_legacy(legacy.items)
        if replaying(session, session_id):
            state.offered = []
            return rest
        if items and session.in_flight(p.SESSION_PROMPT, session_id):
            return rest  # predicted for a conversation that has moved on; a clear still counts
        if form == NEW:
            if NEW in state.agent_forms:
                return rest  # the agent also speaks the new form: its update is the one
            converted = shapes.filter_suggestions(shapes.to_new_shape(items), allowed_types(session))
            if not offer(state, NEW, converted):
                return rest
            emit = Emit(Direction.TO_CLIENT, shapes.with_update(msg, shapes.new_update(converted, legacy.meta)))
            return Replace(rest.msg, then=(emit,))
        if not offer(state, LEGACY, items):
            return rest
        if len(items) == len(legacy.items):
            return PASS
        return Replace(shapes.with_update(msg, shapes.with_legacy_items(update, items)))


DECLARED = BuiltIn(
    PromptSuggestions.name, switch="suggestions.enabled", rule=PromptSuggestions, settings="suggestions",
    rank=20, options=(
        Option("unlock_legacy_agent", "suggestions.unlock_legacy_agent", "--unlock-legacy-agent",
               "ACP_BRIDGE_UNLOCK_LEGACY_AGENT",
               "Mark a new client as JetBrains AIR toward the agent so legacy agents send suggestions "
               "(changes other output of those agents; see docs/suggestions.md).", FLAG, default=False),
        Option("no_suggestions", "suggestions.enabled", "--no-suggestions", "ACP_BRIDGE_NO_SUGGESTIONS",
               "Leave prompt suggestions of either form untouched.", OFF_FLAG, default=True),
    ),
)
