"""Fields of ACP messages as span attributes: small pure readers for the builder.

Owns: token usage, a permission request's outcome, prompt blocks as GenAI message parts,
ids and values as attribute text, and the bounds on what one attribute or span may hold.
Must never: raise on any shape from the wire (anything unexpected is left out), or do IO.
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.messages import id_key
from acp_bridge.telemetry import spans as s
from acp_bridge.telemetry.spans import SpanRecord

MAX_CONTENT = 64 * 1024  # characters of one content attribute
MAX_EVENTS = 128  # per span
MAX_NAME = 1024  # characters of a name, id or title from the wire
MAX_METRIC_VALUES = 256  # distinct values of one metric attribute from the wire (then "other")


def add_event(span: SpanRecord, name: str, wall: float, attrs: dict[str, Any]) -> None:
    if len(span.events) < MAX_EVENTS:
        span.events.append((name, wall, attrs))


def usage_attributes(span: SpanRecord, result: Any) -> None:
    usage = result.get("usage") if type(result) is dict else None
    if type(usage) is not dict:
        return
    for attr, key in ((s.INPUT_TOKENS, "inputTokens"), (s.OUTPUT_TOKENS, "outputTokens")):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
            span.attributes[attr] = value


def permission_attributes(span: SpanRecord, request: Any, result: Any) -> None:
    outcome = p.get_path(result, "outcome", "outcome")
    if isinstance(outcome, str):
        span.attributes[s.PERMISSION_OUTCOME] = outcome
    option = p.get_path(result, "outcome", "optionId")
    if isinstance(option, str):
        span.attributes[s.PERMISSION_OPTION] = option
        options = p.get_path(request, "params", "options")
        for entry in options if isinstance(options, list) else ():
            if type(entry) is dict and entry.get("optionId") == option and isinstance(entry.get("kind"), str):
                span.attributes[s.PERMISSION_OPTION_KIND] = entry["kind"]
                break
    tool_id = read.permission_tool_call_id(p.get_path(request, "params"))
    if tool_id is not None:
        span.attributes[s.TOOL_CALL_ID] = text_of(tool_id)


def message_parts(prompt: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in prompt if isinstance(prompt, list) else ():
        if type(block) is dict and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "content": block["text"][:MAX_CONTENT]})
        elif type(block) is dict:
            parts.append({"type": str(block.get("type"))})  # images, files: named, not sent
    return parts


def key_of(value: Any) -> Any:
    return id_key(value)


def text_of(value: Any) -> str:
    """A value from the wire as attribute text (an id, a name), at most MAX_NAME characters:
    a peer that sends a megabyte as a sessionId or a title does not have it exported."""
    return (value if isinstance(value, str) else json_text(value))[:MAX_NAME]


def id_text(value: Any) -> str | None:
    if value is None:
        return None
    return text_of(value)


def json_text(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # nested past what orjson writes, or not UTF-8
        text = "<not representable>"
    return text[:MAX_CONTENT]


def suggestion_count(msg: Any) -> int:
    """How many prompt suggestions a suggestion update carries, in either form (-1: none found)."""
    items = read.suggestion_items(read.update_of(msg))
    return len(items) if isinstance(items, list) else -1
