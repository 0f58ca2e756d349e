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

import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp_bridge.core import protocol as p
from acp_bridge.core.frames import Direction, Frame, brief, id_key
from acp_bridge.core.protocol import Json
from acp_bridge.core.rewrites.base import PASS, Emit, Outcome, Replace, Rewrite

if TYPE_CHECKING:
    from acp_bridge.config import SystemPromptConfig
    from acp_bridge.core.session import Pending, Session

log = logging.getLogger("acp_bridge.system_prompt")

# agentInfo names (v1 `agentInfo.name`, v2 `info.name`) of agents known to read the
# claude-agent-acp `_meta.systemPrompt` dialect (a string replaces the Claude Code prompt, an
# object `{"append": ...}` adds to it). `auto` picks `meta` for these when they do not
# advertise the spec capability; an agent that advertises it always gets the spec field.
#   @zed-industries/claude-agent-acp        reads `_meta` only (0.23.1, no capability)
#   @agentclientprotocol/claude-agent-acp   reads `_meta` and, from 0.92, the spec field
#   @zed-industries/claude-code-acp         the same adapter under its earlier package name
META_READERS = frozenset({
    "@zed-industries/claude-agent-acp",
    "@agentclientprotocol/claude-agent-acp",
    "@zed-industries/claude-code-acp",
})

# Session setup requests that carry `systemPrompt` (acp-notes.md 7.1): v2 has no session/load.
SETUP_V1 = frozenset({p.SESSION_NEW, p.SESSION_LOAD, p.SESSION_RESUME, p.SESSION_FORK})
SETUP_V2 = frozenset({p.SESSION_NEW, p.SESSION_RESUME, p.SESSION_FORK})
ANY_SETUP = SETUP_V1 | SETUP_V2  # a first test that spares most messages the version lookup
# Setup requests whose response names a session that did not exist before.
CREATES = frozenset({p.SESSION_NEW, p.SESSION_FORK})

CAPABILITY_PATH_V1 = "agentCapabilities.sessionCapabilities.systemPrompt"
CAPABILITY_PATH_V2 = "capabilities.session.systemPrompt"
META_JOIN = "\n\n"  # between a client's own `_meta.systemPrompt` text and ours (merge)


class Dialect(enum.Enum):
    SPEC = "spec"  # the ACP `systemPrompt` field
    META = "meta"  # claude-agent-acp's `_meta.systemPrompt`
    FIRST_PROMPT = "first-prompt"  # a text block in front of the first prompt
    ERROR = "error"  # refuse the request
    SKIP = "skip"  # send nothing


@dataclass(frozen=True, slots=True)
class Plan:
    """How the configured prompt reaches this agent; `error` set: refuse the request."""

    dialect: Dialect
    mode: str  # the mode actually used ("append" or "override")
    downgraded: bool = False  # override was configured, the agent only takes append
    error: str | None = None


# -- pure functions -----------------------------------------------------------------------


@dataclass(slots=True)
class SystemPromptState:
    """What this rule keeps per ACP session (`Session.state_for(SystemPromptState, id)`)."""

    first_prompt_due: bool = False  # first-prompt dialect: inject into the next prompt
    first_prompt_request: Any = None  # id_key of the prompt that carried it, until answered
    dialect: str | None = None  # how the system prompt reached it (logged once)


def agent_system_prompt(session: Session) -> Json | None:
    """The agent's `systemPrompt` session capability (v1 `sessionCapabilities`, v2
    `session`), or None if not advertised."""
    caps = session.agent_caps
    value = p.get_path(caps, "sessionCapabilities", p.SYSTEM_PROMPT)
    if value is None:
        value = p.get_path(caps, "session", p.SYSTEM_PROMPT)
    return value if isinstance(value, dict) else None


def supports_override(capability: Json) -> bool:
    """`{"mode": {"override": {}}}`: override advertised (present and non-null)."""
    return isinstance(p.get_path(capability, "mode", "override"), dict)


def choose_plan(
    config: SystemPromptConfig, capability: Json | None, agent_name: str | None, v2: bool = False
) -> Plan:
    """Decide the dialect from the agent's `systemPrompt` capability (None: not advertised)."""
    path = CAPABILITY_PATH_V2 if v2 else CAPABILITY_PATH_V1
    who = f'agent "{agent_name}"' if agent_name else "the agent (no agentInfo name seen)"
    if capability is not None:
        if config.mode == "override" and not supports_override(capability):
            if config.strict:
                return Plan(Dialect.SPEC, "override", error=(
                    f"acp-bridge: {who} does not advertise systemPrompt override mode "
                    f"({path}.mode.override) and system_prompt.strict forbids falling back to append"
                ))
            return Plan(Dialect.SPEC, "append", downgraded=True)
        return Plan(Dialect.SPEC, config.mode)
    choice = config.on_unsupported
    if choice == "auto":
        choice = "meta" if agent_name in META_READERS else "first-prompt"
    dialect = Dialect(choice)
    if dialect is Dialect.ERROR:
        return Plan(dialect, config.mode, error=(
            f"acp-bridge: {who} does not advertise the systemPrompt capability ({path}); "
            f"a system prompt is configured and system_prompt.on_unsupported is \"error\""
        ))
    return Plan(dialect, config.mode)


def spec_value(text: str, mode: str) -> Json:
    """The ACP `systemPrompt` object for the configured text."""
    return {"mode": mode, "content": [{"type": "text", "text": text}]}


def meta_value(text: str, mode: str) -> Any:
    """claude-agent-acp's `_meta.systemPrompt`: a string replaces, `{"append": ...}` adds."""
    return text if mode == "override" else {"append": text}


class _Unchanged:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()


def text_block(text: str) -> Json:
    return {"type": "text", "text": text}


def combine_spec(client: Any, ours: Json, policy: str, sibling_mode: Any = None) -> Any:
    """The `systemPrompt` to send, given the client's own (None: it sent none).

    merge: see `merge_spec`; keep: the client's, untouched; replace: ours only. UNCHANGED
    when the value stays as the client sent it (kept, or a shape we cannot merge into).
    `sibling_mode` is the request's `systemPromptMode`, which the RFD's July draft sent
    beside a bare list of blocks.
    """
    if client is None or policy == "replace":
        return ours
    if policy == "keep":
        return UNCHANGED
    return merge_spec(client, ours, sibling_mode)


def merge_spec(client: Any, ours: Json, sibling_mode: Any = None) -> Any:
    """The client's prompt with our blocks after its blocks, as the ACP object.

    The spec's object keeps its mode, its `_meta` and its blocks as they are (blocks that are
    not objects too: they are the client's, and the agent judges them). Earlier drafts of the
    RFD (acp-notes.md 7.2) are read as what they meant, so the configured prompt is not lost:
    a string is one text block, a list is the blocks (its mode from `systemPromptMode` if that
    is a string), and each gets the configured mode; an object without `mode` gets the
    configured mode, and `content` that is missing, null or a string reads as `[]` or one
    text block. UNCHANGED for what has no sensible reading (a number, a boolean, a mode or
    content of another type): the agent then judges the client's value as without the bridge.
    """
    blocks = ours["content"]
    if isinstance(client, str):
        return {"mode": ours["mode"], "content": [text_block(client), *blocks]}
    if isinstance(client, list):
        mode = sibling_mode if isinstance(sibling_mode, str) else ours["mode"]
        return {"mode": mode, "content": [*client, *blocks]}
    if not isinstance(client, dict):
        return UNCHANGED
    mode = client.get("mode")
    if mode is None:
        mode = ours["mode"]
    elif not isinstance(mode, str):
        return UNCHANGED
    content = client.get("content")
    if content is None:
        content = []
    elif isinstance(content, str):
        content = [text_block(content)]
    elif not isinstance(content, list):
        return UNCHANGED
    return {**client, "mode": mode, "content": [*content, *blocks]}


def odd_shape(value: Any) -> str | None:
    """How a client's `systemPrompt` differs from the spec's object, for the log; None when
    it is the spec's shape (a string `mode`, a list `content`)."""
    if isinstance(value, str):
        return "a string (the RFD's first draft), not an object"
    if isinstance(value, list):
        return "a list of blocks (the RFD's July draft), not an object"
    if not isinstance(value, dict):
        return _json_type(value)
    mode, content = value.get("mode"), value.get("content")
    if mode is None:
        return "an object without a mode"
    if not isinstance(mode, str):
        return f"an object whose mode is {_json_type(mode)}"
    if content is None:
        return "an object without content"
    if not isinstance(content, list):
        return f"an object whose content is {_json_type(content)}"
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def combine_meta(client: Any, text: str, mode: str, policy: str) -> Any:
    """The `_meta.systemPrompt` to send, given the client's own (None: it sent none).

    merge keeps the client's form: a string (replace the whole prompt) gets our text after
    it; an object gets our text after its `append` (or as its `append`). UNCHANGED as for
    `combine_spec`.
    """
    if client is None or policy == "replace":
        return meta_value(text, mode)
    if policy == "keep":
        return UNCHANGED
    if isinstance(client, str):
        return client + META_JOIN + text
    if isinstance(client, dict):
        append = client.get("append")
        if append is None:
            return {**client, "append": text}
        if isinstance(append, str):
            return {**client, "append": append + META_JOIN + text}
    return UNCHANGED


def set_param(msg: Json, key: str, value: Any) -> Json:
    """A copy of `msg` with `params[key] = value` (only `msg` and `params` are copied)."""
    return {**msg, "params": {**msg["params"], key: value}}


def set_meta(msg: Json, key: str, value: Any) -> Json | None:
    """A copy with `params._meta[key] = value`, other `_meta` keys kept; None if `_meta`
    is there but not an object (a shape we do not own)."""
    meta = msg["params"].get(p.META)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        return None
    return set_param(msg, p.META, {**meta, key: value})


def prepend_text(msg: Json, text: str) -> Json | None:
    """A copy of a `session/prompt` with a text block in front; None if `prompt` is no list."""
    prompt = msg["params"].get("prompt")
    if not isinstance(prompt, list):
        return None
    return set_param(msg, "prompt", [{"type": "text", "text": text}, *prompt])


def inject_setup(msg: Json, plan: Plan, config: SystemPromptConfig) -> Json | None:
    """The setup request as it should reach the agent; None: forward it unchanged."""
    assert config.text is not None
    params = msg["params"]
    if plan.dialect is Dialect.SPEC:
        client = params.get(p.SYSTEM_PROMPT)
        value = combine_spec(client, spec_value(config.text, plan.mode), config.client_prompt,
                             params.get("systemPromptMode"))
        return None if value is UNCHANGED else set_param(msg, p.SYSTEM_PROMPT, value)
    if plan.dialect is Dialect.META:
        client = p.get_path(params, p.META, p.SYSTEM_PROMPT)
        value = combine_meta(client, config.text, plan.mode, config.client_prompt)
        return None if value is UNCHANGED else set_meta(msg, p.SYSTEM_PROMPT, value)
    return None  # first-prompt, skip: the setup request itself is not changed


def setup_methods(v2: bool) -> frozenset[str]:
    return SETUP_V2 if v2 else SETUP_V1


def refusal_data(method: str, agent_name: str | None, v2: bool) -> Json:
    return {
        "method": method,
        "agent": agent_name,
        "capability": CAPABILITY_PATH_V2 if v2 else CAPABILITY_PATH_V1,
    }


# -- the rewrite --------------------------------------------------------------------------


class SystemPrompt(Rewrite):
    """Inject the configured system prompt into session setup (see the module docstring)."""

    name = "system-prompt"

    def __init__(self, config: SystemPromptConfig) -> None:
        self.config = config
        self._warned_downgrade = False

    def plan(self, session: Session) -> Plan:
        return choose_plan(self.config, agent_system_prompt(session), _agent_name(session), session.v2)

    def request(self, frame: Frame, session: Session) -> Outcome:
        msg = frame.msg
        if (frame.direction is not Direction.TO_AGENT or not session.client_ready
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
            what = (f"_meta is {_json_type(meta)}" if not isinstance(meta, dict)
                    else f"_meta.systemPrompt is {_json_type(client)}"
                    + (" whose append is not a string" if isinstance(client, dict) else ""))
            log.warning("%s %s: the client's %s, which cannot be merged with the configured prompt; "
                        "forwarded as the client sent it, WITHOUT the configured prompt", method, brief(id_), what)

    def _prompt(self, frame: Frame, msg: Json, session: Session) -> Outcome:
        state = session.existing_state(SystemPromptState, msg["params"].get("sessionId"))
        if state is None or not state.first_prompt_due:
            return PASS
        assert self.config.text is not None
        changed = prepend_text(msg, self.config.text)
        if changed is None:
            return PASS
        state.first_prompt_due = False
        state.first_prompt_request = id_key(frame.id)
        return Replace(changed)

    def response(self, frame: Frame, request: Pending, session: Session) -> Outcome:
        """Only reads: learns new session ids, re-arms a refused first prompt, logs."""
        msg = frame.msg
        if request.origin is not Direction.TO_AGENT or not session.client_ready or msg is None:
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
        session_id = p.get_path(msg.get("result"), "sessionId")
        if request.method not in CREATES:
            session_id = request.session_id
        if session_id is None:
            return PASS
        state = session.state_for(SystemPromptState, session_id)
        if plan.dialect is Dialect.FIRST_PROMPT and request.method in CREATES:
            state.first_prompt_due = True
        if state.dialect is None:
            state.dialect = plan.dialect.value
            self._log_dialect(session, session_id, request.method, plan, injected)
        return PASS

    def _log_dialect(self, session: Session, session_id: Any, method: str, plan: Plan,
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


def _agent_name(session: Session) -> str | None:
    name = session.agent_info.get("name")
    return name if isinstance(name, str) else None


def _who(session: Session) -> str:
    name = _agent_name(session)
    return f'agent "{name}"' if name else "the agent"
