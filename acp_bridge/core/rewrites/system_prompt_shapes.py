"""System prompt shapes: pure decisions and edits for the system-prompt rule.

Owns: the dialects, choosing a `Plan` from the agent's capability and the configuration,
the `systemPrompt` and `_meta.systemPrompt` values, merging with a client's own prompt,
and copy-on-write edits of setup and prompt requests. Must never: keep state, log, or read
a `Connection` (the rule in `system_prompt.py` does that and passes plain values here).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core.protocol import Json

# The settings live in their own module, which the configuration loads without this one.
from acp_bridge.core.rewrites.settings import CLIENT_PROMPT_POLICIES as CLIENT_PROMPT_POLICIES
from acp_bridge.core.rewrites.settings import ON_UNSUPPORTED as ON_UNSUPPORTED
from acp_bridge.core.rewrites.settings import SYSTEM_PROMPT_MODES as SYSTEM_PROMPT_MODES
from acp_bridge.core.rewrites.settings import SystemPromptSettings as SystemPromptSettings

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


def supports_override(capability: Json) -> bool:
    """`{"mode": {"override": {}}}`: override advertised (present and non-null)."""
    return isinstance(p.get_path(capability, "mode", "override"), dict)


def choose_plan(
    config: SystemPromptSettings, capability: Json | None, agent_name: str | None, v2: bool = False
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
        return json_type(value)
    mode, content = value.get("mode"), value.get("content")
    if mode is None:
        return "an object without a mode"
    if not isinstance(mode, str):
        return f"an object whose mode is {json_type(mode)}"
    if content is None:
        return "an object without content"
    if not isinstance(content, list):
        return f"an object whose content is {json_type(content)}"
    return None


def json_type(value: Any) -> str:
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


def inject_setup(msg: Json, plan: Plan, config: SystemPromptSettings) -> Json | None:
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
