"""What an ACP shape means (`core/shapes.py`): each reader, table-driven, on the shapes of the
spec and on what a peer may send instead (odd types read as nothing, never an exception)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core import shapes as read
from acp_bridge.core.shapes import LEGACY, NEW, LegacyPayload


def text(value: Any) -> dict[str, Any]:
    return {"type": "text", "text": value}


def notification(update: Any, session: Any = "s1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}}


LEGACY_UPDATE = {"sessionUpdate": "session_info_update",
                 "_meta": {"promptSuggestions": {"suggestions": [{"text": "Run the tests"}], "_meta": {"k": 1}}}}
NEW_UPDATE = {"sessionUpdate": "prompt_suggestions_update",
              "suggestions": [{"prompt": [text("Run"), text("the tests")]}]}


@pytest.mark.parametrize(("msg", "update", "kind", "session"), [
    (notification({"sessionUpdate": "plan"}), {"sessionUpdate": "plan"}, "plan", "s1"),
    (notification({"sessionUpdate": ["plan"]}, 7), {"sessionUpdate": ["plan"]}, None, 7),  # a list is no kind
    (notification({"other": 1}), {"other": 1}, None, "s1"),
    (notification([1]), None, None, "s1"),
    ({"method": "session/update", "params": []}, None, None, None),
    ({"method": "session/prompt", "params": {"sessionId": {"a": 1}}}, None, None, {"a": 1}),
    ("not a message", None, None, None),
    (None, None, None, None),
])
def test_update_kind_and_session(msg: Any, update: Any, kind: str | None, session: Any) -> None:
    assert read.update_of(msg) == update
    assert read.update_kind(update) == kind
    assert read.message_update_kind(msg) == kind
    assert read.session_id_of(msg) == session


@pytest.mark.parametrize(("update", "form", "items", "legacy"), [
    (NEW_UPDATE, NEW, NEW_UPDATE["suggestions"], None),
    ({"sessionUpdate": "prompt_suggestions_update", "suggestions": "x"}, NEW, "x", None),
    ({"sessionUpdate": "prompt_suggestions_update"}, NEW, None, None),
    (LEGACY_UPDATE, LEGACY, [{"text": "Run the tests"}], LegacyPayload([{"text": "Run the tests"}], {"k": 1})),
    ({"sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": {"suggestions": {}}}},
     LEGACY, {}, LegacyPayload(None)),
    ({"sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": []}}, LEGACY, None, LegacyPayload(None)),
    # A null value is no suggestion to check and the page; the rule strips the key all the same.
    ({"sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": None}}, None, None, LegacyPayload(None)),
    ({"sessionUpdate": "session_info_update", "title": "t"}, None, None, None),
    ({"sessionUpdate": "session_info_update", "_meta": []}, None, None, None),
    ({"sessionUpdate": "agent_message_chunk", "_meta": {"promptSuggestions": {"suggestions": []}}}, None, None, None),
    ({"sessionUpdate": "plan", "suggestions": [1]}, None, None, None),
])
def test_suggestions_of_an_update(update: dict[str, Any], form: str | None, items: Any,
                                  legacy: LegacyPayload | None) -> None:
    assert read.suggestion_form(update) == form
    assert read.suggestion_items(update) == items
    assert read.suggestion_items(update, form) == items
    assert read.read_legacy(update) == legacy


@pytest.mark.parametrize("update", [None, [], "prompt_suggestions_update", 1])
def test_no_update_carries_no_suggestions(update: Any) -> None:
    assert (read.suggestion_form(update), read.suggestion_items(update)) == (None, None)


@pytest.mark.parametrize(("item", "expected"), [
    ({"prompt": [text("Run"), text("the tests")]}, "Run the tests"),
    ({"prompt": [text("Run"), {"type": "image", "data": "", "mimeType": "image/png"}]}, "Run"),
    ({"prompt": "Run"}, ""),
    ({"text": "Run the tests"}, "Run the tests"),
    ({"text": 5}, 5),  # as sent: a caller checks the type
    ({"prompt": [text("new")], "text": "legacy"}, "new"),
    ({}, None),
    ("Run", None),
])
def test_suggestion_text(item: Any, expected: Any) -> None:
    assert read.suggestion_text(item) == expected


AIR = {"_meta": {"jetbrains": {"air": {"version": 1, "capabilities": []}}}}


@pytest.mark.parametrize(("caps", "advertised", "air", "form"), [
    ({"session": {"promptSuggestions": {}}}, {}, False, NEW),
    ({"session": {"promptSuggestions": {"image": {}}}, **AIR}, {"image": {}}, True, NEW),
    (AIR, None, True, LEGACY),
    ({"session": {"promptSuggestions": True}, **AIR}, None, True, LEGACY),
    ({"session": {"promptSuggestions": None}}, None, False, None),
    ({"session": {"promptSuggestions": []}}, None, False, None),
    ({"session": []}, None, False, None),
    ({"_meta": {"jetbrains": {"air": True}}}, None, False, None),
    ({"_meta": {"jetbrains": []}}, None, False, None),
    ({"fs": {"readTextFile": True}}, None, False, None),
    ({}, None, False, None),
    (None, None, False, None),
    ([AIR], None, False, None),
])
def test_the_form_a_client_reads(caps: Any, advertised: Any, air: bool, form: str | None) -> None:
    assert read.advertised_suggestions(caps) == advertised
    assert read.air_marker(caps) is air
    assert read.client_form(caps) == form


TOOL_CONTENT = {"type": "content", "content": text("out")}


@pytest.mark.parametrize(("content", "sep", "wrapped", "expected"), [
    (text("Hi"), "", True, "Hi"),
    ([text("a"), text("b")], "", True, "ab"),
    ([text("a"), text("b")], " ", True, "a b"),
    ([text("a"), text(""), text("b")], " ", True, "a b"),  # empty texts are left out, not joined
    ([text("a"), {"type": "image", "data": "", "mimeType": "image/png"}, text("b")], " | ", True, "a | b"),
    ([text("a"), [text("b"), [text("c")]]], "-", True, "a-b-c"),
    ([text("a"), [text("b")]], "-", False, "a"),
    ([text("a"), TOOL_CONTENT], " ", True, "a out"),
    ([text("a"), TOOL_CONTENT], " ", False, "a"),
    (TOOL_CONTENT, "", False, ""),
    ({"type": "text", "text": 5, "content": text("inner")}, "", True, "inner"),
    ({"text": "no type"}, "", True, ""),
    ({"type": "resource", "resource": {"uri": "f", "text": "body"}}, "", True, ""),
    ("just a string", "", True, ""),
    (None, "", True, ""),
    ([], " ", True, ""),
])
def test_content_text(content: Any, sep: str, wrapped: bool, expected: str) -> None:
    assert read.content_text(content, sep, wrapped=wrapped) == expected


def test_content_nested_deeper_than_the_stack_is_read() -> None:
    content: Any = text("deep")
    for n in range(100_000):
        content = [content] if n % 2 else {"type": "content", "content": content}
    assert read.content_text(content) == "deep"
    assert read.content_text(content, wrapped=False) == ""


def _recursive_text(content: Any, sep: str) -> str:
    """The page's reader as it was written before it moved to the core (recursive)."""
    if isinstance(content, list):
        return sep.join(filter(None, (_recursive_text(block, sep) for block in content)))
    if isinstance(content, dict):
        if content.get("type") == "text" and isinstance(content.get("text"), str):
            return str(content["text"])
        inner = content.get("content")
        if inner is not None and inner is not content:
            return _recursive_text(inner, sep) if isinstance(inner, (dict, list)) else ""
    return ""


blocks = st.recursive(
    st.one_of(st.builds(text, st.text(max_size=3)), st.builds(text, st.integers()), st.none(), st.text(max_size=2),
              st.just({"type": "image"}), st.just({"type": "content"})),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.builds(lambda c, t: {"type": t, "content": c}, inner,
                                      st.sampled_from(["content", "text", "x"]))),
    max_leaves=20)


@given(content=blocks, sep=st.sampled_from(["", " ", " | "]))
def test_content_text_is_the_recursive_reading(content: Any, sep: str) -> None:
    assert read.content_text(content, sep) == _recursive_text(content, sep)
    top = content if isinstance(content, list) else [content]
    assert read.content_text(content, sep, wrapped=False) == sep.join(
        b["text"] for b in top if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        and b["text"])


@pytest.mark.parametrize(("update", "ends", "reason"), [
    ({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}, True, "end_turn"),
    ({"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}, True, "cancelled"),
    ({"sessionUpdate": "state_update", "state": "idle"}, True, None),
    ({"sessionUpdate": "state_update", "state": "running"}, False, None),
    ({"sessionUpdate": "state_update", "state": "requires_action"}, False, None),
    ({"sessionUpdate": "agent_message_chunk", "state": "idle", "stopReason": "x"}, False, "x"),
    ({"sessionUpdate": ["state_update"], "state": "idle"}, False, None),
    (None, False, None),
    ([], False, None),
])
def test_a_v2_turn_ends_with_an_idle_state_update(update: Any, ends: bool, reason: Any) -> None:
    assert read.ends_turn_v2(update) is ends
    assert read.stop_reason(update) == reason


MISSING = object()


@pytest.mark.parametrize(("result", "reason"), [
    ({"stopReason": "end_turn"}, "end_turn"),  # v1: the session/prompt response ends the turn
    ({"stopReason": None}, None),
    ({"stopReason": 7}, 7),  # as sent: a caller checks the type
    ({"messageId": "msg_user_1"}, MISSING),  # v2: the response accepts the prompt; names no reason
    (None, MISSING),
    ("end_turn", MISSING),
])
def test_the_stop_reason_a_result_names(result: Any, reason: Any) -> None:
    assert read.stop_reason(result, MISSING) == reason
    assert read.stop_reason(result) == (None if reason is MISSING else reason)


def test_tool_call_updates_are_the_v1_and_v2_kinds() -> None:
    assert {"tool_call", "tool_call_update"} == read.TOOL_CALL_UPDATES
    assert read.update_kind({"sessionUpdate": ["tool_call"]}) not in read.TOOL_CALL_UPDATES  # no TypeError


@pytest.mark.parametrize(("msg", "response", "request_session", "named"), [
    ({"method": "session/prompt", "params": {"sessionId": "s1"}}, False, None, "s1"),
    ({"method": "session/prompt", "params": {"sessionId": 7}}, False, None, 7),
    ({"method": "session/prompt", "params": {"sessionId": True}}, False, None, None),  # a bool names none
    ({"method": "session/prompt", "params": {"sessionId": ["s1"]}}, False, None, None),
    ({"method": "session/prompt", "params": {}}, False, "s9", None),  # only a response falls back
    ({"id": 1, "result": {"sessionId": "s2"}}, True, "s9", "s2"),  # the answer that creates a session
    ({"id": 1, "result": {"stopReason": "end_turn"}}, True, "s9", "s9"),  # else its request's
    ({"id": 1, "result": {"sessionId": "s2"}}, False, None, None),
    ({"id": 1, "error": {"code": 1}}, True, None, None),
    (None, True, "s9", "s9"),
])
def test_the_session_a_message_names(msg: Any, response: bool, request_session: Any, named: Any) -> None:
    assert read.session_named(msg, response=response, request_session=request_session) == named


@pytest.mark.parametrize(("method", "sent", "dialect"), [
    ("session/new", {"params": {"cwd": "/", "systemPrompt": {"mode": "append", "content": []}}}, "spec"),
    ("session/new", {"params": {"systemPrompt": {}, "_meta": {"systemPrompt": "x"}}}, "spec"),
    ("session/load", {"params": {"_meta": {"systemPrompt": "Be brief"}}}, "meta"),
    ("session/prompt", {"params": {"prompt": [text("Be brief")]}}, "first-prompt"),
    ("session/prompt", None, "first-prompt"),
    ("session/new", {"params": {"systemPrompt": None}}, None),
    ("session/new", {"params": []}, None),
    ("session/new", None, None),
    (None, {"params": {"systemPrompt": "x"}}, "spec"),
])
def test_the_dialect_a_rewritten_request_carried_the_system_prompt_in(method: Any, sent: Any,
                                                                       dialect: str | None) -> None:
    assert read.system_prompt_dialect(method, sent) == dialect


@pytest.mark.parametrize(("update", "expected"), [
    ({"sessionUpdate": "tool_call", "toolCallId": "call_1", "status": "pending"}, "call_1"),
    ({"sessionUpdate": "tool_call_update", "toolCallId": 7}, 7),  # as sent: a caller checks the type
    ({"sessionUpdate": "tool_call_update"}, None),
    (["call_1"], None),
    (None, None),
])
def test_the_tool_call_an_update_concerns(update: Any, expected: Any) -> None:
    assert read.tool_call_id(update) == expected


@pytest.mark.parametrize(("params", "expected"), [
    ({"sessionId": "s1", "toolCall": {"toolCallId": "call_1"}, "options": []}, "call_1"),
    ({"toolCall": {"title": "Edit"}}, None),
    ({"toolCall": ["call_1"]}, None),
    ([], None),
])
def test_the_tool_call_a_permission_request_asks_about(params: Any, expected: Any) -> None:
    assert read.permission_tool_call_id(params) == expected


@pytest.mark.parametrize(("result", "expected"), [
    ({"sessionId": "s1", "availableCommands": []}, "s1"),
    ({"sessionId": 7}, 7),  # as sent: a caller checks the type
    ({"configOptions": []}, None),  # session/resume names no session in its answer
    ("s1", None),
    (None, None),
])
def test_the_session_a_setup_response_creates(result: Any, expected: Any) -> None:
    assert read.created_session_id(result) == expected
