"""replay/compare.py and replay/turns.py: two captures' records aligned by session, turn and
message, and what differs (the engine of `acp-bridge diff` and of `drive`'s report)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.replay.compare import DiffOptions, align, compare_captures
from acp_bridge.replay.turns import tracks


def rec(seq: int, direction: str, kind: str, method: str | None, session: Any, msg: Any) -> dict[str, Any]:
    return {"type": "message", "seq": seq, "direction": direction, "kind": kind, "method": method, "id": msg.get("id"),
            "session": session, "raw": orjson.dumps(msg).decode() + "\n"}


def capture(sid: str = "s1", *, text: str = "hi", tool: str = "read", stop: str = "end_turn",
            second_turn: bool = False, rid: int = 1) -> list[dict[str, Any]]:
    """A small session: initialize, session/new, a prompt with a chunk and a tool call."""
    out = [
        {"type": "header", "format": 1},
        rec(1, "to-agent", "request", "initialize", None, {"id": 0, "method": "initialize", "params": {}}),
        rec(2, "to-client", "response", "initialize", None, {"id": 0, "result": {"protocolVersion": 1}}),
        rec(3, "to-agent", "request", "session/new", None, {"id": rid, "method": "session/new", "params": {}}),
        rec(4, "to-client", "response", "session/new", sid, {"id": rid, "result": {"sessionId": sid}}),
    ]
    for turn in range(2 if second_turn else 1):
        base, pid = 5 + 4 * turn, rid + 1 + turn
        out += [
            rec(base, "to-agent", "request", "session/prompt", sid,
                {"id": pid, "method": "session/prompt", "params": {"sessionId": sid, "prompt": []}}),
            rec(base + 1, "to-client", "notification", "session/update", sid, update(sid, "agent_message_chunk", text)),
            rec(base + 2, "to-client", "notification", "session/update", sid,
                {"method": "session/update", "params": {"sessionId": sid, "update": {
                    "sessionUpdate": "tool_call", "toolCallId": f"t{sid}", "kind": tool}}}),
            rec(base + 3, "to-client", "response", "session/prompt", sid, {"id": pid, "result": {"stopReason": stop}}),
        ]
    return out


def update(sid: str, kind: str, text: str) -> dict[str, Any]:
    return {"method": "session/update", "params": {"sessionId": sid, "update": {
        "sessionUpdate": kind, "content": {"type": "text", "text": text}}}}


def test_the_request_that_creates_a_session_belongs_to_it() -> None:
    """session/new's record names no session (it has none yet); its answer does."""
    connection, session = tracks(capture())
    assert [m.seq for m in connection.turns[0]] == [1, 2]
    assert [[m.seq for m in turn] for turn in session.turns] == [[3, 4], [5, 6, 7, 8]]
    assert session.label(0) == "session 1 setup" and session.label(1) == "session 1 turn 1"


def without(records: list[dict[str, Any]], seq: int) -> list[dict[str, Any]]:
    return [r for r in records if r.get("seq") != seq]


CASES = [
    pytest.param(capture(), capture(), DiffOptions(), [], id="same"),
    pytest.param(capture(), capture("other", rid=7), DiffOptions(), [], id="ids-and-session-ids-ignored"),
    pytest.param(capture(), capture("other", rid=7), DiffOptions(strict_ids=True), [
        "session 1 setup: A seq 3 / B seq 3 -> session/new: /id 1 -> 7",
        'session 1 setup: A seq 4 / B seq 4 <- response session/new: /id 1 -> 7; /result/sessionId "s1" -> "other"',
        'session 1 turn 1: A seq 5 / B seq 5 -> session/prompt: /id 2 -> 8; /params/sessionId "s1" -> "other"',
        'session 1 turn 1: A seq 6 / B seq 6 <- session/update agent_message_chunk: /params/sessionId "s1" -> "other"',
        'session 1 turn 1: A seq 7 / B seq 7 <- session/update tool_call: /params/sessionId "s1" -> "other"; '
        '/params/update/toolCallId "ts1" -> "tother"',
        "session 1 turn 1: A seq 8 / B seq 8 <- response session/prompt: /id 2 -> 8",
    ], id="strict-ids"),
    pytest.param(capture(), capture(tool="edit", stop="refusal"), DiffOptions(), [
        'session 1 turn 1: A seq 7 / B seq 7 <- session/update tool_call: /params/update/kind "read" -> "edit"',
        'session 1 turn 1: A seq 8 / B seq 8 <- response session/prompt: /result/stopReason "end_turn" -> "refusal"',
    ], id="changed-values"),
    pytest.param(capture(tool="edit"), capture(tool="x"), DiffOptions(ignore=("/params/update/kind",)), [],
                 id="ignored-pointer"),
    pytest.param(capture(), without(capture(), 6), DiffOptions(), [
        "session 1 turn 1: missing from B: A seq 6 <- session/update agent_message_chunk",
    ], id="missing"),
    pytest.param(without(capture(), 7), capture(), DiffOptions(), [
        "session 1 turn 1: extra in B: B seq 7 (before A seq 8) <- session/update tool_call",
    ], id="extra"),
    pytest.param(capture(second_turn=True), capture(text="yo", second_turn=True), DiffOptions(), [
        'session 1 turn 1: A seq 6 / B seq 6 <- session/update agent_message_chunk: /params/update/content/text "hi" -> "yo"',
        'session 1 turn 2: A seq 10 / B seq 10 <- session/update agent_message_chunk: /params/update/content/text "hi" -> "yo"',
    ], id="turns"),
    pytest.param(capture(second_turn=True), capture(), DiffOptions(), [
        "session 1 turn 2: missing from B: A seq 9 -> session/prompt",
        "session 1 turn 2: missing from B: A seq 10 <- session/update agent_message_chunk",
        "session 1 turn 2: missing from B: A seq 11 <- session/update tool_call",
        "session 1 turn 2: missing from B: A seq 12 <- response session/prompt",
    ], id="a-turn-only-in-A"),
]


@pytest.mark.parametrize(("a", "b", "options", "expected"), CASES)
def test_differences(a: list[dict[str, Any]], b: list[dict[str, Any]], options: DiffOptions,
                     expected: list[str]) -> None:
    result = compare_captures(a, b, options)
    assert [d.line() for d in result.differences] == expected
    assert result.same is (not expected)
    assert result.lines()[-1] == result.summary()


def test_a_session_only_one_side_has_is_said() -> None:
    a = capture()
    b = a + [rec(20, "to-agent", "request", "session/new", None, {"id": 9, "method": "session/new"}),
             rec(21, "to-client", "response", "session/new", "s2", {"id": 9, "result": {"sessionId": "s2"}})]
    result = compare_captures(a, b)
    assert result.notes == ["session 2 is only in B"]
    assert [d.line() for d in result.differences] == [
        "session 2 setup: extra in B: B seq 20 -> session/new",
        "session 2 setup: extra in B: B seq 21 <- response session/new",
    ]
    assert result.as_json()["counts"] == {"missing": 0, "extra": 2, "changed": 0}


def test_a_turn_past_the_bound_is_aligned_by_position_and_said() -> None:
    kinds = ["agent_message_chunk", "tool_call", "plan"]
    a = built([[(kind, "x") for kind in kinds]])
    b = built([[(kind, "x") for kind in reversed(kinds)]])
    exact = compare_captures(a, b)
    assert [d.what for d in exact.differences] == ["missing", "missing", "extra", "extra"]  # plan kept
    result = compare_captures(a, b, DiffOptions(max_cells=4))
    assert result.notes == ["session 1 turn 1: 4 x 4 messages is past the exact alignment's bound (4 cells): "
                            "aligned by position"]
    # By position, the chunk meets the plan and the plan the chunk; the tool calls pair.
    assert [(d.what, d.a and d.a.seq, d.b and d.b.seq) for d in result.differences] == [
        ("missing", 6, None), ("extra", None, 6), ("missing", 8, None), ("extra", None, 8)]


def test_the_turns_together_are_bounded_too() -> None:
    """Each turn under the bound, but their tables together past the comparison's: the
    turns after that are aligned by position, and said (a hundred turns of a thousand
    messages each took 38 s and would take ten times that for a capture ten times longer)."""
    kinds = ["agent_message_chunk", "tool_call", "plan"]
    a = built([[(kind, "x") for kind in kinds]] * 3)
    b = built([[(kind, "x") for kind in reversed(kinds)]] * 3)
    result = compare_captures(a, b, DiffOptions(max_cells=16, max_total_cells=20))
    assert result.notes == ["session 1 turn 2: 4 x 4 messages is past what is left of the comparison's bound "
                            "(20 cells in all): aligned by position, and so is every turn after it that would "
                            "need a table"]  # once, not once per turn
    assert [d.what for d in result.differences] == ["missing", "missing", "extra", "extra",
                                                    *["missing", "extra", "missing", "extra"] * 2]
    assert result.cells == 16


def test_the_json_of_a_difference() -> None:
    result = compare_captures(capture(), capture(tool="edit"))
    assert result.as_json() == {
        "same": False, "counts": {"missing": 0, "extra": 0, "changed": 1}, "aligned": 8,
        "messages": {"a": 8, "b": 8}, "notes": [],
        "differences": [{"what": "changed", "where": "session 1 turn 1", "session": 1, "turn": 1, "a_seq": 7,
                         "b_seq": 7, "anchor": 7, "direction": "to-client", "kind": "notification",
                         "method": "session/update", "update": "tool_call",
                         "pointers": {"/params/update/kind": {"was": "read", "now": "edit"}}}],
    }


def test_control_characters_in_values_are_escaped_in_the_lines() -> None:
    result = compare_captures(capture(), capture(text="\x1b]0;pwned\x07"))
    assert result.lines()[0] == ('session 1 turn 1: A seq 6 / B seq 6 <- session/update agent_message_chunk: '
                                 '/params/update/content/text "hi" -> "\\u001b]0;pwned\\u0007"')


@pytest.mark.parametrize(("a", "b", "pairs"), [
    ("", "", []),
    ("abc", "abc", [(0, 0), (1, 1), (2, 2)]),
    ("abc", "", [(0, None), (1, None), (2, None)]),
    ("axc", "ayc", [(0, 0), (1, None), (None, 1), (2, 2)]),
    ("abcd", "acd", [(0, 0), (1, None), (2, 1), (3, 2)]),
    ("ab", "ba", [(0, None), (1, 0), (None, 1)]),
])
def test_align(a: str, b: str, pairs: list[tuple[int | None, int | None]]) -> None:
    assert align(a, b) == (pairs, True)


def lcs_length(a: str, b: str) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        previous, row = row, [0]
        for j, y in enumerate(b):
            row.append(previous[j] + 1 if x == y else max(previous[j + 1], row[j]))
    return row[-1]


@given(st.text("abc", max_size=30), st.text("abc", max_size=30))
def test_align_is_a_longest_common_subsequence(a: str, b: str) -> None:
    pairs, exact = align(a, b)
    matched = [(i, j) for i, j in pairs if i is not None and j is not None]
    assert exact and len(matched) == lcs_length(a, b)
    assert all(a[i] == b[j] for i, j in matched)
    assert [i for i, _ in pairs if i is not None] == list(range(len(a)))
    assert [j for _, j in pairs if j is not None] == list(range(len(b)))


SESSION_MESSAGES = st.lists(st.tuples(st.sampled_from(["agent_message_chunk", "tool_call", "plan"]),
                                      st.sampled_from(["x", "y"])), max_size=8)


def built(turns: list[list[tuple[str, str]]]) -> list[dict[str, Any]]:
    records = capture()[:5]
    seq = 5
    for number, updates in enumerate(turns):
        records.append(rec(seq, "to-agent", "request", "session/prompt", "s1",
                           {"id": 10 + number, "method": "session/prompt", "params": {"sessionId": "s1"}}))
        seq += 1
        for kind, text in updates:
            records.append(rec(seq, "to-client", "notification", "session/update", "s1", update("s1", kind, text)))
            seq += 1
    return records


@given(st.lists(SESSION_MESSAGES, max_size=3), st.lists(SESSION_MESSAGES, max_size=3))
def test_a_capture_is_the_same_as_itself_and_counts_are_symmetric(
        turns_a: list[list[tuple[str, str]]], turns_b: list[list[tuple[str, str]]]) -> None:
    a, b = built(turns_a), built(turns_b)
    assert compare_captures(a, a).differences == []
    there, back = compare_captures(a, b).counts(), compare_captures(b, a).counts()
    assert (there["missing"], there["extra"]) == (back["extra"], back["missing"])


def _with_number(literal: str) -> list[dict[str, Any]]:
    records = capture()
    records[2]["raw"] = '{"id":0,"result":{"protocolVersion":' + literal + "}}\n"
    return records


@pytest.mark.parametrize(("a", "b"), [
    ("9" * 30, "9" * 29 + "8"),  # one double reads both
    ("18446744073709551617", "18446744073709551616"),  # 2**64 + 1 and 2**64
    ("-9223372036854775809", "-9223372036854775810"),  # below -(2**63)
])
def test_integers_beyond_64_bits_are_compared_and_shown_with_all_their_digits(a: str, b: str) -> None:
    """orjson reads an integer past 64 bits as a double: two that differ read the same, and
    diff (and drive's comparison) said "same"; one was shown as 1e+30."""
    result = compare_captures(_with_number(a), _with_number(b))
    assert result.lines()[0] == f"connection: A seq 2 / B seq 2 <- response initialize: /result/protocolVersion {a} -> {b}"
    assert result.as_json()["differences"][0]["pointers"] == {"/result/protocolVersion": {"was": int(a), "now": int(b)}}
    assert compare_captures(_with_number(a), _with_number(a)).same
