"""What an ACP shape means: one reader for each protocol idea the bridge reads in more than one place.

Owns: reading, from a message as it came, the update a `session/update` carries and its kind,
the session a message names, the prompt suggestions an update carries (legacy
`_meta.promptSuggestions` and the new `prompt_suggestions_update`) and their texts, the form
of suggestions a client reads (from its `initialize` capabilities), the text of content
blocks, the dialect a rewritten request carried the system prompt in, and the end of a turn
(v1: the `session/prompt` result's `stopReason`; v2: an idle `state_update`). The rules,
health, telemetry, replay and the page all call these, so a verdict about what a rule did
reads the message as the rule read it. Writing shapes (the rules' conversions and edits)
stays with each rule (`rewrites/suggestion_shapes.py`, `rewrites/system_prompt_shapes.py`).
Must never: raise on any value from the wire (an unknown shape reads as None, "" or False),
mutate an argument, hold state, or do IO.

Shapes (acp-notes.md 4, 6, 8):

    update          {"method": "session/update", "params": {"sessionId": "s1", "update":
                     {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi"}}}}
    legacy          {"sessionUpdate": "session_info_update",
                     "_meta": {"promptSuggestions": {"suggestions": [{"text": "Run the tests"}]}}}
    new             {"sessionUpdate": "prompt_suggestions_update",
                     "suggestions": [{"prompt": [{"type": "text", "text": "Run the tests"}]}]}
    turn end, v1    {"id": 3, "result": {"stopReason": "end_turn"}}      (a session/prompt response)
    turn end, v2    {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core.protocol import Json

# The two forms of prompt suggestions (bridge-rules 2.1).
NEW = "new"
LEGACY = "legacy"

TOOL_CALL_UPDATES = frozenset({p.TOOL_CALL, p.TOOL_CALL_UPDATE})  # the updates that open, move or end a tool call


# -- session/update -------------------------------------------------------------------------------


def update_of(msg: Any) -> Json | None:
    """The update object a `session/update` carries (`params.update`); None when there is none.

    It does not look at the method: callers know what they hold (get_path spelled out, as this
    runs for messages on the live observers' paths).
    """
    params = msg.get("params") if type(msg) is dict else None
    update = params.get("update") if type(params) is dict else None
    return update if type(update) is dict else None


def update_kind(update: Any) -> str | None:
    """An update's `sessionUpdate`, when it is a string (a list or an object is no kind)."""
    kind = update.get("sessionUpdate") if type(update) is dict else None
    return kind if isinstance(kind, str) else None


def message_update_kind(msg: Any) -> str | None:
    """The `sessionUpdate` of the update a message carries (None: no update, or no kind)."""
    return update_kind(update_of(msg))


def session_id_of(msg: Any) -> Any:
    """The session a request or notification names (`params.sessionId`, as sent; None: none)."""
    params = msg.get("params") if type(msg) is dict else None
    return params.get("sessionId") if type(params) is dict else None


def created_session_id(result: Any) -> Any:
    """The session a setup response's result names (`sessionId`, as sent; None: none): the
    one a `session/new` or `session/fork` creates."""
    return result.get("sessionId") if type(result) is dict else None


def tool_call_id(update: Any) -> Any:
    """The tool call an update opens, moves or ends (`toolCallId`, as sent; None: none)."""
    return update.get("toolCallId") if type(update) is dict else None


def permission_tool_call_id(params: Any) -> Any:
    """The tool call a `session/request_permission` asks about (`params.toolCall.toolCallId`,
    as sent; None: none)."""
    return p.get_path(params, "toolCall", "toolCallId")


def session_named(msg: Any, *, response: bool = False, request_session: Any = None) -> str | int | None:
    """The session a message concerns, as its capture record and findings name it:
    `params.sessionId`; for a response, its result's `sessionId` (the answer that creates a
    session), else the session of the request it answers. Only a string or an integer names
    one (a bool, an object or a list does not)."""
    session = session_id_of(msg)
    if session is None and response:
        session = created_session_id(msg.get("result") if type(msg) is dict else None)
        if session is None:
            session = request_session
    return session if isinstance(session, (str, int)) and not isinstance(session, bool) else None


# -- prompt suggestions (bridge-rules 2) -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyPayload:
    """What a `session_info_update` carries under `_meta.promptSuggestions`.

    `items` is None when the value is not `{"suggestions": [...]}` (a shape we do not know).
    `meta` is the `_meta` inside `promptSuggestions` (it maps to the new update's `_meta`).
    """

    items: list[Any] | None
    meta: Any = None


def read_legacy(update: Json) -> LegacyPayload | None:
    """The legacy payload of an update, or None if it carries no `_meta.promptSuggestions`."""
    if update.get("sessionUpdate") != p.SESSION_INFO_UPDATE:
        return None
    meta = update.get(p.META)
    if not isinstance(meta, dict) or p.PROMPT_SUGGESTIONS not in meta:
        return None
    value = meta[p.PROMPT_SUGGESTIONS]
    items = p.get_path(value, "suggestions")
    if not isinstance(items, list):
        return LegacyPayload(None)
    return LegacyPayload(items, value.get(p.META))


def suggestion_form(update: Any) -> str | None:
    """The form of suggestions an update carries: NEW (`prompt_suggestions_update`), LEGACY
    (a `session_info_update` with a non-null `_meta.promptSuggestions`), or None."""
    if type(update) is not dict:
        return None
    kind = update.get("sessionUpdate")
    if kind == p.PROMPT_SUGGESTIONS_UPDATE:
        return NEW
    if kind == p.SESSION_INFO_UPDATE and p.get_path(update, p.META, p.PROMPT_SUGGESTIONS) is not None:
        return LEGACY
    return None


def suggestion_items(update: Any, form: str | None = None) -> Any:
    """The list of suggestions an update carries in its form (`form`: when already read), as
    sent: the new update's `suggestions`, the legacy `_meta.promptSuggestions.suggestions`
    (None when the update carries none; not checked to be a list)."""
    form = form or suggestion_form(update)
    if form == LEGACY:
        return p.get_path(update, p.META, p.PROMPT_SUGGESTIONS, "suggestions")
    if form == NEW:
        return p.get_path(update, "suggestions")
    return None


def suggestion_text(item: Any) -> Any:
    """The text of one suggestion: a new one's `prompt` blocks joined with spaces, a legacy
    item's `text` as sent (None: neither)."""
    if not isinstance(item, dict):
        return None
    return content_text(item.get("prompt"), " ") if "prompt" in item else item.get("text")


# -- a client's form (bridge-rules 2.1) -------------------------------------------------------------


def advertised_suggestions(client_caps: Any) -> Json | None:
    """The client's `session.promptSuggestions` capability (an object), or None if not advertised."""
    value = p.get_path(client_caps, "session", p.PROMPT_SUGGESTIONS)
    return value if isinstance(value, dict) else None


def air_marker(client_caps: Any) -> bool:
    """The client carries the JetBrains AIR marker (`_meta.jetbrains.air` is an object)."""
    return isinstance(p.get_path(client_caps, p.META, "jetbrains", "air"), dict)


def client_form(client_caps: Any) -> str | None:
    """The form a client with these capabilities reads: NEW when it advertises
    `session.promptSuggestions` (whatever else it carries), else LEGACY when it carries the
    AIR marker, else None (it reads neither)."""
    if advertised_suggestions(client_caps) is not None:
        return NEW
    if air_marker(client_caps):
        return LEGACY
    return None


# -- content ------------------------------------------------------------------------------------------


def content_text(content: Any, sep: str = "", *, wrapped: bool = True) -> str:
    """The text of content: of a content block, or of a list of them, the texts of its `text`
    blocks (a string `text`) joined by `sep`, empty ones left out.

    `wrapped`: also the blocks inside another object's `content` (a tool call's
    `{"type": "content", "content": block}`) and inside lists within the list. Walked without
    recursion, so content nested a thousand deep costs no stack.
    """
    texts: list[str] = []
    stack = [content]
    while stack:
        item = stack.pop()
        if type(item) is list:
            if wrapped or item is content:
                stack.extend(reversed(item))
        elif type(item) is dict:
            text = item.get("text")
            if item.get("type") == "text" and isinstance(text, str):
                if text:
                    texts.append(text)
            elif wrapped:
                inner = item.get("content")
                if type(inner) is dict or type(inner) is list:
                    stack.append(inner)
    return sep.join(texts)


# -- the system prompt (bridge-rules 3) --------------------------------------------------------------


def system_prompt_dialect(method: Any, sent: Any) -> str | None:
    """How a request the system-prompt rule rewrote (`sent`: as it went out) carried the
    prompt: "spec" (`params.systemPrompt`), "meta" (`params._meta.systemPrompt`),
    "first-prompt" (a `session/prompt`), or None when it cannot tell."""
    if method == p.SESSION_PROMPT:
        return "first-prompt"
    params = p.get_path(sent, "params")
    if p.get_path(params, p.SYSTEM_PROMPT) is not None:
        return "spec"
    if p.get_path(params, p.META, p.SYSTEM_PROMPT) is not None:
        return "meta"
    return None


# -- the end of a turn ------------------------------------------------------------------------------


def ends_turn_v2(update: Any) -> bool:
    """Is this update v2's end of a turn (a `state_update` whose `state` is `idle`)? v1 ends a
    turn with the `session/prompt` response, which v2 sends when it accepts the prompt."""
    return type(update) is dict and update.get("sessionUpdate") == p.STATE_UPDATE and update.get("state") == "idle"


def stop_reason(end: Any, default: Any = None) -> Any:
    """The `stopReason` a turn ended with, as sent, from what ends it: a `session/prompt`
    result (v1) or an idle `state_update` (v2); `default` when it names none."""
    return end.get("stopReason", default) if type(end) is dict else default
