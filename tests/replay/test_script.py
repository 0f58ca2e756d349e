"""The pure parts of replay: a capture read into segments, live requests matched to
recorded ones, and the compact JSON diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.files import read_lines
from acp_bridge.capture.reader import CaptureReader, UnreadableCapture
from acp_bridge.replay.diff import compact_diff
from acp_bridge.replay.script import (
    AwaitAnswer,
    Matcher,
    RecordedRequest,
    Send,
    build_script,
    messages,
    parse_capture,
)
from tests.replay.drive import GOLDEN


def golden(name: str) -> bytes:
    return (GOLDEN / f"{name}.jsonl").read_bytes()


def test_the_script_groups_the_agent_side_by_the_client_request_it_followed() -> None:
    """v1-new-client-unlock, as the client received it: each prompt's segment is the agent's
    fs request, a chunk, the answer, then the suggestion the bridge converted; the wait for
    the client's fs answer sits where the recorded answer came; the withdrawal the bridge sent
    on the second prompt opens that prompt's segment."""
    script = build_script(parse_capture(golden("v1-new-client-unlock")))
    assert [(r.method, r.session, r.id, r.answered) for r in script.requests] == [
        ("initialize", None, 0, True), ("session/new", None, 1, True),
        ("session/prompt", "sess_new_1", 2, True), ("session/prompt", "sess_new_1", 3, True)]
    assert script.opening == []

    def shape(step: Any) -> tuple[Any, ...]:
        if isinstance(step, AwaitAnswer):
            return ("await", step.method)
        msg = orjson.loads(step.data)
        update = msg.get("params", {}).get("update", {}).get("sessionUpdate")
        return ("send", msg.get("method") or "answer", update, step.answers)

    assert [shape(s) for s in script.requests[3].steps] == [
        ("send", "session/update", "prompt_suggestions_update", None),  # the withdrawal
        ("send", "fs/read_text_file", None, None),
        ("send", "session/update", "agent_message_chunk", None),
        ("send", "answer", None, 3),
        ("send", "session/update", "prompt_suggestions_update", None),  # converted
        ("await", "fs/read_text_file"),
    ]


def test_before_rules_the_script_holds_what_the_agent_sent() -> None:
    """--before-rules: the legacy suggestion the bridge dropped is there, the messages the
    bridge wrote are not."""
    script = build_script(parse_capture(golden("v1-new-client-unlock")), before_rules=True)
    updates = [orjson.loads(s.data)["params"]["update"]["sessionUpdate"] for s in script.requests[3].steps
               if isinstance(s, Send) and b"session/update" in s.data]
    assert updates == ["agent_message_chunk", "session_info_update"]


def test_a_capture_without_its_end_is_read_to_its_last_record() -> None:
    data = golden("v1-new-client-unlock")
    whole, cut = parse_capture(data), parse_capture(data[:data.rindex(b'{"type":"end"')])
    assert (whole.ended, cut.ended) == (False, False)  # not known before the records are read
    assert len(list(messages(cut))) == len(list(messages(whole))) == 20
    assert (whole.ended, cut.ended) == (True, False)


def request(index: int, method: str, session: Any) -> RecordedRequest:
    return RecordedRequest(index, method, session, index, 0.0)


def test_requests_match_in_order_per_method_and_session() -> None:
    """Two sessions whose prompts the live client sends in another order than recorded: each
    gets its own session's next prompt; what is expected next is the earliest unmatched."""
    matcher = Matcher([request(0, "session/prompt", "a"), request(1, "session/prompt", "b"),
                       request(2, "session/prompt", "a"), request(3, "session/prompt", 1)])
    first_b = matcher.match("session/prompt", "b")
    assert first_b is not None and first_b.index == 1
    assert matcher.expected_next() is matcher.requests[0]
    assert [m.index if m else None for m in (matcher.match("session/prompt", "a"),
                                             matcher.match("session/prompt", "a"),
                                             matcher.match("session/prompt", "a"),
                                             matcher.match("session/prompt", "1"))] == [0, 2, None, None]
    last = matcher.match("session/prompt", 1)  # 1 and "1" are different session ids
    assert last is not None and last.index == 3
    assert matcher.expected_next() is None


def test_compact_diff_names_each_place_that_differs() -> None:
    old = {"a": 1, "b": [1, 2, 3], "c": {"d": "x"}, "e/f": True, "g": 1}
    new = {"a": 1, "b": [1, 5], "c": {"d": "y", "n": None}, "e/f": 1, "h": 2}
    assert compact_diff(old, new) == {
        "/b/1": {"was": 2, "now": 5}, "/b/2": {"was": 3}, "/c/d": {"was": "x", "now": "y"},
        "/c/n": {"now": None}, "/e~1f": {"was": True, "now": 1}, "/g": {"was": 1}, "/h": {"now": 2}}
    assert compact_diff([1], {"a": 1}) == {"": {"was": [1], "now": {"a": 1}}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(0.5, 2) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=12)


@given(json_values, json_values)
def test_compact_diff_is_empty_exactly_for_the_same_json(old: Any, new: Any) -> None:
    """No difference exactly when both are written the same (1, 1.0 and true differ)."""
    assert compact_diff(old, old) == {}
    same = orjson.dumps(old, option=orjson.OPT_SORT_KEYS) == orjson.dumps(new, option=orjson.OPT_SORT_KEYS)
    assert (compact_diff(old, new) == {}) == same


def test_a_difference_nested_past_what_can_be_written_is_a_note() -> None:
    from acp_bridge.replay.diff import showable

    deep: Any = []
    for _ in range(300):
        deep = [deep]
    assert showable({"": {"now": deep}}) == {"": {"note": "the messages differ, nested deeper than can be written"}}
    assert showable({"/a": {"was": 1}}) == {"/a": {"was": 1}}


# -- bad input the reader refuses, and a killed bridge's torn tail -------------------------

HEADER = b'{"type":"header","format":1}\n'


def test_a_record_longer_than_the_limit_is_refused_without_being_held(tmp_path: Path) -> None:
    """The long line is scanned for its end in pieces, never held (the reader's limit)."""
    data = HEADER + b'{"type":"message","pad":"' + b"x" * 5000 + b'"}\n{"type":"end"}\n'
    path = tmp_path / "long.jsonl"
    path.write_bytes(data)
    with path.open("rb") as file:
        capture = CaptureReader(str(path), read_lines(file, max_line=1024))
        with pytest.raises(UnreadableCapture) as caught:
            list(messages(capture))
        assert (caught.value.line, caught.value.problem) == (2, "a line longer than 1024 bytes, so not a capture record")


def test_a_torn_last_line_without_an_end_record_ends_the_records() -> None:
    message = b'{"type":"message","direction":"to-agent","kind":"request","method":"initialize","id":0}\n'
    capture = parse_capture(HEADER + message + b'{"type":"message","dire')
    assert [r["method"] for r in messages(capture)] == ["initialize"]
    assert (capture.torn, capture.ended) == (3, False)
    whole = parse_capture(HEADER + message)
    assert (len(list(messages(whole))), whole.torn) == (1, None)


@given(st.integers(min_value=1, max_value=200))
def test_a_valid_line_cut_anywhere_is_a_torn_tail(cut: int) -> None:
    """Wherever a killed writer stopped inside the last record, the records before it are read."""
    last = b'{"type":"message","direction":"to-client","kind":"notification","method":"session/update"}'
    capture = parse_capture(HEADER + last[:min(cut, len(last) - 1)])
    assert list(messages(capture)) == [] and capture.torn == 2


def test_a_reused_client_id_is_answered_in_the_order_the_bridge_paired_it() -> None:
    """Two client requests of one id in flight (a client's bug): the first answer is the
    first request's, as the live bridge paired it (capture/pairs.py), not the second's."""
    def line(seq: int, direction: str, kind: str, msg: dict[str, Any]) -> bytes:
        return orjson.dumps({"type": "message", "seq": seq, "direction": direction, "kind": kind,
                             "method": msg.get("method"), "id": msg.get("id"), "mono": float(seq),
                             "raw": orjson.dumps(msg).decode()}) + b"\n"

    ask = {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
    done = {"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "end_turn"}}
    capture = (orjson.dumps({"type": "header", "format": 1}) + b"\n" + line(1, "to-agent", "request", ask)
               + line(2, "to-agent", "request", ask) + line(3, "to-client", "response", done))
    script = build_script(parse_capture(capture))
    assert [(r.index, r.answered) for r in script.requests] == [(0, True), (1, False)]
    assert [step.answers for step in script.requests[1].steps if isinstance(step, Send)] == [0]
