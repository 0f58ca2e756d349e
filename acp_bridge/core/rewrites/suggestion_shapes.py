"""Prompt suggestion shapes: filtering, legacy <-> new conversion, capability edits.

Owns: the pure functions behind the prompt-suggestions rule (bridge-rules.md 2.2, 2.3, 2.5):
which suggestions a client may receive, how a legacy `_meta.promptSuggestions` list maps to a
`prompt_suggestions_update` and back, and how the `initialize` capabilities are extended.
Reading an update's suggestions and a client's form is `core/shapes.py`'s, for everyone.
Must never: mutate an argument (every function copies along the path it changes and shares
the rest), keep state, or know about frames, directions or sessions.

Shapes (acp-notes.md 0, 6, 8):

    legacy  {"sessionUpdate": "session_info_update",
             "_meta": {"promptSuggestions": {"suggestions": [{"text": "Run the tests"}]}}}
    new     {"sessionUpdate": "prompt_suggestions_update",
             "suggestions": [{"prompt": [{"type": "text", "text": "Run the tests"}]}]}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core.protocol import Json

# The forms and the legacy reader are the core's (`core/shapes.py`), named here for the rule.
from acp_bridge.core.shapes import LEGACY as LEGACY
from acp_bridge.core.shapes import NEW as NEW
from acp_bridge.core.shapes import LegacyPayload as LegacyPayload
from acp_bridge.core.shapes import content_text
from acp_bridge.core.shapes import read_legacy as read_legacy

# What the bridge declares for a new client when unlocking a legacy agent (bridge-rules 2.5):
# the object shape AIR sends, with no AIR sub-capability claimed.
AIR_MARKER_VERSION = 1

# Required string fields per content block type (acp-notes.md 4.3). `resource` is checked
# apart: its required fields sit one level down.
_REQUIRED_STRINGS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
}
TEXT_ONLY = frozenset({"text"})


# -- content filtering (bridge-rules 2.3) -------------------------------------------------------


def opted_in(value: Any) -> bool:
    """A client opt-in marker: present and non-null means yes (`{}`); `false` is read as no."""
    return value is not None and value is not False


def allowed_block_types(client_opt_ins: Json, agent_accepts: Callable[[str], bool]) -> frozenset[str]:
    """Block types both sides allow in a suggestion: text and resource_link always, and each
    gated type only when the client opted in under `promptSuggestions` AND the agent's prompt
    capabilities accept it (RFD "Suggestion content")."""
    gated = {
        block
        for block, capability in p.GATED_BLOCKS.items()
        if opted_in(client_opt_ins.get(capability)) and agent_accepts(capability)
    }
    return p.BASELINE_BLOCKS | gated


def well_formed_block(block: Any) -> bool:
    """A content block with a known type and its required string fields."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if not isinstance(kind, str):
        return False
    if kind == "resource":
        res = block.get("resource")
        return (
            isinstance(res, dict)
            and isinstance(res.get("uri"), str)
            and (isinstance(res.get("text"), str) or isinstance(res.get("blob"), str))
        )
    fields = _REQUIRED_STRINGS.get(kind)
    return fields is not None and all(isinstance(block.get(name), str) for name in fields)


def usable_suggestion(suggestion: Any, allowed: frozenset[str]) -> bool:
    """May this suggestion reach the client whole? (it is never trimmed: dropping a block would
    change what the prompt asks for, RFD "Suggestion content")."""
    if not isinstance(suggestion, dict):
        return False
    prompt = suggestion.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        return False
    for block in prompt:
        if not well_formed_block(block) or block["type"] not in allowed:
            return False
    if all(block["type"] == "text" for block in prompt):
        return bool(content_text(prompt, wrapped=False).strip())
    return True


def filter_suggestions(suggestions: Iterable[Any], allowed: frozenset[str]) -> list[Any]:
    """The usable suggestions, in order, each kept whole (the same objects)."""
    return [s for s in suggestions if usable_suggestion(s, allowed)]


# -- legacy <-> new (bridge-rules 2.2) -----------------------------------------------------------


def legacy_item_ok(item: Any) -> bool:
    """A legacy item with a non-blank string `text` (others are dropped, bridge-rules 2.3)."""
    return isinstance(item, dict) and isinstance(item.get("text"), str) and bool(item["text"].strip())


def clean_legacy(items: Iterable[Any]) -> list[Any]:
    """The legacy items worth offering, in order (the same objects)."""
    return [item for item in items if legacy_item_ok(item)]


def to_new_shape(items: Iterable[Any]) -> list[Json]:
    """Legacy `[{"text": T}]` -> new `[{"prompt": [{"type": "text", "text": T}]}]`.

    Blank and non-string items are dropped; an item's `_meta` moves to the suggestion's
    `_meta` (the new form has a place for it).
    """
    out: list[Json] = []
    for item in clean_legacy(items):
        suggestion: Json = {"prompt": [{"type": "text", "text": item["text"]}]}
        if item.get(p.META) is not None:
            suggestion[p.META] = item[p.META]
        out.append(suggestion)
    return out


def to_legacy_shape(suggestions: Iterable[Any]) -> list[Json]:
    """New suggestions -> legacy items: a text-only suggestion becomes `{"text": <its texts
    concatenated>}`; any other suggestion (another block type, malformed, blank) is skipped
    whole, because the legacy form cannot carry it. A suggestion's `_meta` is kept on the item.
    """
    out: list[Json] = []
    for suggestion in filter_suggestions(suggestions, TEXT_ONLY):
        item: Json = {"text": content_text(suggestion["prompt"], wrapped=False)}
        if suggestion.get(p.META) is not None:
            item[p.META] = suggestion[p.META]
        out.append(item)
    return out


def strip_legacy(update: Json) -> Json | None:
    """The update without `_meta.promptSuggestions` (and without `_meta` if that empties it);
    None when nothing but `sessionUpdate` is left (the notification is then not forwarded)."""
    meta = {k: v for k, v in update[p.META].items() if k != p.PROMPT_SUGGESTIONS}
    rest = {k: v for k, v in update.items() if k != p.META}
    if meta:
        rest[p.META] = meta
    if set(rest) == {"sessionUpdate"}:
        return None
    return rest


def with_legacy_items(update: Json, items: list[Any]) -> Json:
    """The update with `_meta.promptSuggestions.suggestions` replaced (all else kept)."""
    meta = update[p.META]
    value = {**meta[p.PROMPT_SUGGESTIONS], "suggestions": items}
    return {**update, p.META: {**meta, p.PROMPT_SUGGESTIONS: value}}


def new_update(suggestions: list[Any], meta: Any = None) -> Json:
    """A `prompt_suggestions_update` (an empty list withdraws)."""
    update: Json = {"sessionUpdate": p.PROMPT_SUGGESTIONS_UPDATE, "suggestions": suggestions}
    if meta is not None:
        update[p.META] = meta
    return update


def legacy_update(items: list[Any], meta: Any = None) -> Json:
    """A `session_info_update` whose only field is `_meta.promptSuggestions` (`[]` clears).

    A new update's `_meta` goes inside `promptSuggestions`, never beside it: in v2 the
    update's `_meta` patches the session's metadata by top-level key (acp-notes.md 4.2).
    """
    value: Json = {"suggestions": items}
    if meta is not None:
        value[p.META] = meta
    return {"sessionUpdate": p.SESSION_INFO_UPDATE, p.META: {p.PROMPT_SUGGESTIONS: value}}


def withdrawal(form: str) -> Json:
    """An empty list in the client's form."""
    return new_update([]) if form == NEW else legacy_update([])


def with_update(msg: Json, update: Json) -> Json:
    """A copy of a `session/update` notification carrying another update (envelope kept)."""
    return {**msg, "params": {**msg["params"], "update": update}}


# -- initialize (bridge-rules 2.5) -----------------------------------------------------------------


def capabilities_key(params: Json) -> str:
    """Where the client's capabilities live: v1 `clientCapabilities`, v2 `capabilities`."""
    for key in ("clientCapabilities", "capabilities"):
        if params.get(key) is not None:
            return key
    version = params.get("protocolVersion")
    is_v2 = isinstance(version, int) and not isinstance(version, bool) and version >= 2
    return "capabilities" if is_v2 else "clientCapabilities"


def set_if_missing(obj: Json, path: tuple[str, ...], value: Any) -> Json | None:
    """A copy of `obj` with `value` at `path`; objects on the way that are absent or null are
    created. None when the path already holds a value or crosses a non-object (left alone)."""
    key, rest = path[0], path[1:]
    current = obj.get(key)
    if not rest:
        return None if current is not None else {**obj, key: value}
    if current is None:
        current = {}
    if not isinstance(current, dict):
        return None
    inner = set_if_missing(current, rest, value)
    return None if inner is None else {**obj, key: inner}


def with_suggestions_capability(params: Json) -> Json | None:
    """`initialize` params declaring `session.promptSuggestions: {}` (None: nothing to add)."""
    return set_if_missing(params, (capabilities_key(params), "session", p.PROMPT_SUGGESTIONS), {})


def with_air_marker(params: Json) -> Json | None:
    """`initialize` params carrying the AIR marker (None: already there or no place for it)."""
    marker = {"version": AIR_MARKER_VERSION, "capabilities": []}
    return set_if_missing(params, (capabilities_key(params), p.META, "jetbrains", "air"), marker)
