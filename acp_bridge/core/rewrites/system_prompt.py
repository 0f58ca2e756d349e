"""System prompt injection (bridge-rules.md section 3; acp-notes.md section 7).

Owns: putting the configured system prompt into every session setup request toward the
agent, in the dialect the agent understands, and remembering which new sessions still owe
their first prompt the text (the first-prompt dialect). Must never: change a response
(responses are only read, to learn session ids and to log what happened), mutate a message
(copy on write along `params`), or rewrite anything before the client's `initialize`.

Spec dialect, the agent advertised `systemPrompt` (v1 `agentCapabilities.sessionCapabilities`,
v2 `capabilities.session`):

    Before: {"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
    After:  {"method":"session/new","params":{"cwd":"/w","mcpServers":[],
             "systemPrompt":{"mode":"append","content":[{"type":"text","text":"TEXT"}]}}}

Meta dialect (claude-agent-acp without the capability):

    After:  {"method":"session/new","params":{"cwd":"/w","mcpServers":[],
             "_meta":{"systemPrompt":{"append":"TEXT"}}}}

First-prompt dialect: the session/new goes out unchanged; its response names the session, and
the next `session/prompt` of that session gets `{"type":"text","text":"TEXT"}` in front.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.messages import TO_AGENT, Direction, Frame, brief, id_key
from acp_bridge.core.methods import SESSION_CLOSERS
from acp_bridge.core.protocol import Json
from acp_bridge.core.rewrites.base import PASS, Emit, Outcome, Replace, Rule
from acp_bridge.core.rewrites.system_prompt_options import NAME
from acp_bridge.core.rewrites.system_prompt_shapes import (
    ANY_SETUP,
    CREATES,
    Dialect,
    Plan,
    SystemPromptSettings,
    choose_plan,
    inject_setup,
    json_type,
    odd_shape,
    prepend_text,
    refusal_data,
    setup_methods,
)
from acp_bridge.core.session import HeldStates

if TYPE_CHECKING:
    from acp_bridge.core.session import Connection, Pending

log = logging.getLogger("acp_bridge.system_prompt")

# Sessions whose state is kept at once (the agent names the sessions, and a long-lived bridge
# may see a million set up); past it, the session used longest ago is forgotten: a first
# prompt it still owed goes out without the text, and its dialect may be logged again.
MAX_SESSIONS = 1024


@dataclass(slots=True)
class SystemPromptState:
    """What this rule keeps per ACP session (`Connection.state_for(SystemPromptState, id)`)."""

    first_prompt_due: bool = False  # first-prompt dialect: inject into the next prompt
    first_prompt_request: Any = None  # id_key of the prompt that carried it, until answered
    dialect: str | None = None  # how the system prompt reached it (logged once)


def agent_system_prompt(session: Connection) -> Json | None:
    """The agent's `systemPrompt` session capability (v1 `sessionCapabilities`, v2
    `session`), or None if not advertised."""
    caps = session.agent_caps
    value = p.get_path(caps, "sessionCapabilities", p.SYSTEM_PROMPT)
    if value is None:
        value = p.get_path(caps, "session", p.SYSTEM_PROMPT)
    return value if isinstance(value, dict) else None



class SystemPrompt(Rule):
    """Inject the configured system prompt into session setup (see the module docstring)."""

    name = NAME

    def __init__(self, config: SystemPromptSettings) -> None:
        self.config = config
        self._warned_downgrade = False
        self._held = HeldStates(SystemPromptState, MAX_SESSIONS)  # the sessions it holds state for

    def plan(self, session: Connection) -> Plan:
        return choose_plan(self.config, agent_system_prompt(session), _agent_name(session), session.v2)

    def request(self, frame: Frame, session: Connection) -> Outcome:
        msg = frame.msg
        if (frame.direction is not TO_AGENT or not session.client_ready
                or msg is None or not isinstance(msg.get("params"), dict)):
            return PASS
        method = frame.method
        if method == p.SESSION_PROMPT:
            return self._prompt(frame, msg, session)
        if method not in ANY_SETUP or method not in setup_methods(session.v2):
            return PASS
        plan = self.plan(session)
        if plan.error is not None:
            log.warning("answered %s %s with an error instead of forwarding it: %s",
                        method, brief(frame.id), plan.error.removeprefix("acp-bridge: "))
            answer = p.error_response(frame.id, p.INTERNAL_ERROR, plan.error,
                                      refusal_data(method, _agent_name(session), session.v2))
            return Replace(None, then=(Emit(Direction.TO_CLIENT, answer),))
        if plan.downgraded and not self._warned_downgrade:
            self._warned_downgrade = True
            log.warning("%s does not advertise systemPrompt override mode; the system prompt is "
                        "sent in append mode (system_prompt.strict = true refuses instead)",
                        _who(session))
        changed = inject_setup(msg, plan, self.config)
        if self.config.client_prompt == "merge" and plan.dialect in (Dialect.SPEC, Dialect.META):
            self._log_merge(method, frame.id, plan, msg["params"], changed)
        return PASS if changed is None else Replace(changed)

    def _log_merge(self, method: str, id_: Any, plan: Plan, params: Json, changed: Json | None) -> None:
        """Say what was sent when the client's own prompt was not the plain shape to merge
        into, so that neither its prompt nor ours is lost without a word. Never the text."""
        if plan.dialect is Dialect.SPEC:
            client = params.get(p.SYSTEM_PROMPT)
            shape = None if client is None else odd_shape(client)
            if shape is None:
                return
            if changed is None:
                log.warning("%s %s: the client's systemPrompt is %s, which cannot be merged with the "
                            "configured one; forwarded as the client sent it, WITHOUT the configured "
                            "prompt (client_prompt = replace would send only the configured one)",
                            method, brief(id_), shape)
                return
            sent = changed["params"][p.SYSTEM_PROMPT]
            log.info("%s %s: the client's systemPrompt was %s; sent the ACP object instead: mode %s, "
                     "%d content blocks (the client's, then the configured text)",
                     method, brief(id_), shape, sent["mode"], len(sent["content"]))
            return
        meta = params.get(p.META)
        client = p.get_path(meta, p.SYSTEM_PROMPT)
        if changed is None and (client is not None or meta is not None):
            what = (f"_meta is {json_type(meta)}" if not isinstance(meta, dict)
                    else f"_meta.systemPrompt is {json_type(client)}"
                    + (" whose append is not a string" if isinstance(client, dict) else ""))
            log.warning("%s %s: the client's %s, which cannot be merged with the configured prompt; "
                        "forwarded as the client sent it, WITHOUT the configured prompt", method, brief(id_), what)

    def _prompt(self, frame: Frame, msg: Json, session: Connection) -> Outcome:
        state = session.existing_state(SystemPromptState, read.session_id_of(msg))
        if state is None or not state.first_prompt_due:
            return PASS
        assert self.config.text is not None
        changed = prepend_text(msg, self.config.text)
        if changed is None:
            return PASS
        state.first_prompt_due = False
        state.first_prompt_request = id_key(frame.id)
        return Replace(changed)

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        """Only reads: learns new session ids, re-arms a refused first prompt, logs."""
        if request.method in SESSION_CLOSERS:
            self._held.closed(session, request.session_id)
            return PASS
        msg = frame.msg
        if request.origin is not TO_AGENT or not session.client_ready or msg is None:
            return PASS
        if request.method == p.SESSION_PROMPT:
            state = session.existing_state(SystemPromptState, request.session_id)
            if (state is not None and "error" in msg
                    and state.first_prompt_request == id_key(request.id)):
                state.first_prompt_due = True  # the agent refused the prompt: try the next one
            if state is not None and state.first_prompt_request == id_key(request.id):
                state.first_prompt_request = None
            return PASS
        if (request.method not in ANY_SETUP or request.method not in setup_methods(session.v2)
                or not isinstance(request.params, dict)):
            return PASS
        plan = self.plan(session)
        injected = plan.dialect in (Dialect.SPEC, Dialect.META) and inject_setup(
            {"params": request.params}, plan, self.config) is not None
        if "error" in msg:
            if injected:
                error = msg.get("error")
                log.warning("the agent answered %s carrying the system prompt (%s dialect) with an "
                            "error, passed to the client unchanged: %s",
                            request.method, plan.dialect.value, brief(error))
            return PASS
        session_id = read.created_session_id(msg.get("result"))
        if request.method not in CREATES:
            session_id = request.session_id
        if session_id is None:
            return PASS
        state = self._held.get(session, session_id)
        if plan.dialect is Dialect.FIRST_PROMPT and request.method in CREATES:
            state.first_prompt_due = True
        if state.dialect is None:
            state.dialect = plan.dialect.value
            self._log_dialect(session, session_id, request.method, plan, injected)
        return PASS

    def _log_dialect(self, session: Connection, session_id: Any, method: str, plan: Plan,
                     injected: bool) -> None:
        """Once per session: which dialect carried the prompt, so a user can tell it took."""
        sid = session_id if isinstance(session_id, str) else brief(session_id)
        if plan.dialect is Dialect.SPEC:
            if injected:
                log.info("session %s: system prompt sent in the systemPrompt field (mode %s, "
                         "client_prompt %s)", sid, plan.mode, self.config.client_prompt)
            elif self.config.client_prompt == "keep":
                log.info("session %s: the client's own systemPrompt was kept (client_prompt = "
                         "keep); the configured prompt was not added", sid)
            else:
                log.warning("session %s: the client's own systemPrompt could not be merged; the "
                            "configured prompt was not added", sid)
            return
        missing = f"{_who(session)} does not advertise the systemPrompt capability"
        if plan.dialect is Dialect.META:
            if injected:
                log.warning("session %s: %s; system prompt sent as _meta.systemPrompt "
                            "(claude-agent-acp dialect, mode %s)", sid, missing, plan.mode)
            elif self.config.client_prompt == "keep":
                log.warning("session %s: %s; the client's own _meta.systemPrompt was kept "
                            "(client_prompt = keep)", sid, missing)
            else:
                log.warning("session %s: %s; the client's own _meta.systemPrompt could not be "
                            "merged, so the configured prompt was not added", sid, missing)
        elif plan.dialect is Dialect.FIRST_PROMPT:
            if method in CREATES:
                note = " (override cannot be expressed this way: the text is added as is)" \
                    if plan.mode == "override" else ""
                log.warning("session %s: %s; system prompt will be put in front of the first "
                            "session/prompt%s", sid, missing, note)
            else:
                log.warning("session %s: %s; the session was set up with %s, not created "
                            "through the bridge, so no first prompt carries the system prompt",
                            sid, missing, method)
        elif plan.dialect is Dialect.SKIP:
            log.warning("session %s: %s; system prompt NOT sent (on_unsupported = skip)",
                        sid, missing)


def _agent_name(session: Connection) -> str | None:
    name = session.agent_info.get("name")
    return name if isinstance(name, str) else None


def _who(session: Connection) -> str:
    name = _agent_name(session)
    return f'agent "{name}"' if name else "the agent"
