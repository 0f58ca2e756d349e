"""The exported page's rows (pure): previews, folding, links, groups, bounded state, escaping."""

from __future__ import annotations

import base64
import re
import tracemalloc
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.capture import html_rows
from acp_bridge.capture.html import render
from acp_bridge.capture.html_rows import RowBuilder
from acp_bridge.capture.previews import BODY_LIMIT, body_text, one_line, preview
from acp_bridge.capture.redaction import Redactor
from acp_bridge.capture.summary import summarize, utc_clock
from tests.capture.samples import page_rows, record, update
from tests.capture.secrets import IN_CLEAR


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


@pytest.mark.parametrize(("msg", "kind", "expected"), [
    ({"method": "session/prompt", "params": {"prompt": [text("Fix   the\nbuild"), {"type": "image"}]}},
     "request", "Fix the build"),
    (update("agent_message_chunk", content=text("Hello")), "notification", "Hello"),
    (update("agent_thought_chunk", content=text("hmm")), "notification", "hmm"),
    (update("tool_call", toolCallId="c1", title="Read a.py", kind="read", status="pending"), "notification",
     "Read a.py · read · pending"),
    (update("tool_call_update", toolCallId="c1", status="completed"), "notification", "completed"),
    (update("prompt_suggestions_update", suggestions=[{"prompt": [text("Run it")]}, {"prompt": [text("Ship")]}]),
     "notification", "Run it | Ship"),
    (update("session_info_update", _meta={"promptSuggestions": {"suggestions": [{"text": "Old way"}]}}),
     "notification", "Old way"),
    (update("session_info_update", title="Fixing CI"), "notification", "Fixing CI"),
    (update("plan", entries=[{}, {}]), "notification", "2 entries"),
    (update("available_commands_update", availableCommands=[{"name": "web"}, {"name": "test"}]),
     "notification", "/web /test"),
    ({"id": 1, "result": {"stopReason": "cancelled"}}, "response", "stopReason: cancelled"),
    ({"id": 1, "result": {"sessionId": "s9"}}, "response", "sessionId: s9"),
    ({"id": 1, "error": {"code": -32603, "message": "agent\nexited"}}, "response", "agent exited"),
    ({"id": 1, "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}, "response", "selected allow"),
    ({"method": "session/request_permission", "params": {"toolCall": {"title": "rm -rf build"}}}, "request",
     "rm -rf build"),
    ({"method": "fs/read_text_file", "params": {"path": "/src/a.py"}}, "request", "/src/a.py"),
    ({"method": "terminal/create", "params": {"command": "pytest"}}, "request", "pytest"),
    # Methods of the SDK 2.4.0 schemas (core/methods.py): the one param that tells them apart.
    ({"method": "session/set_title", "params": {"sessionId": "s", "title": "Fix\nCI"}}, "request", "Fix CI"),
    ({"method": "auth/status_update", "params": {"state": "unauthenticated"}}, "notification", "unauthenticated"),
    ({"method": "mcp/message", "params": {"serverId": "m", "requestId": 1, "method": "tools/call"}}, "request",
     "tools/call"),
    ({"method": "elicitation/create", "params": {"message": "Which branch?", "cwd": "/w"}}, "request",
     "Which branch?"),
    ({"method": "session/set_title", "params": {"title": ["not", "text"], "path": "/p"}}, "request", ""),
    ({"method": "session/prompt", "params": {"prompt": "not a list"}}, "request", ""),
    (update("tool_call", title=["not", "text"]), "notification", ""),
    ([1, 2], "other", ""),
    ({"method": "session/update", "params": {"update": {"sessionUpdate": [1]}}}, "notification", ""),
    ({"method": "session/update", "params": {"update": {"sessionUpdate": {"a": 1}}}}, "notification", ""),
    ({"method": "session/prompt", "params": {"prompt": [text("x" * 500)]}}, "request", "x" * 159 + "…"),
])
def test_preview(msg: Any, kind: str, expected: str) -> None:
    method = msg.get("method") if isinstance(msg, dict) else None
    assert preview(msg, method, kind) == expected


def rows_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    builder = RowBuilder(Redactor(()), utc_clock)
    out = [row for r in records for row in builder.add(r)]
    out.extend(builder.finish())
    assert builder.count == len(out)
    return out


def chunk(seq: int, value: str, kind: str = "agent_message_chunk", session: str = "s1") -> dict[str, Any]:
    msg = update(kind, content=text(value))
    msg["params"]["sessionId"] = session
    return record(seq, msg)


def test_a_run_of_chunks_is_one_row_with_the_text_joined_and_a_count() -> None:
    rows = rows_of([chunk(1, "a"), chunk(2, "b"), chunk(3, "c"), chunk(4, "t", "agent_thought_chunk"),
                    chunk(5, "d", session="s2"), chunk(6, "e", session="s2")])
    assert [(r.get("s"), r.get("s2"), r.get("n"), r.get("l"), r.get("b")) for r in rows] == [
        (None, None, None, None, None),  # the header of the "Setup" group
        (1, 3, 3, "session/update agent_message_chunk ×3", "abc"),
        (4, None, None, "session/update agent_thought_chunk", rows[2]["b"]),  # one alone keeps its JSON
        (5, 6, 2, "session/update agent_message_chunk ×2", "de"),
    ]
    assert rows[1]["m"] == 1.0 and rows[1]["m2"] == 3.0 and rows[1]["p"] == "abc"
    assert rows[2]["b"].startswith('{"jsonrpc":"2.0"')


def test_a_folded_row_keeps_a_bounded_text_and_counts_the_rest() -> None:
    piece = "x" * 1000
    rows = rows_of([chunk(i, piece) for i in range(1, 101)])  # 100,000 characters
    body = rows[1]["b"]
    assert rows[1]["n"] == 100 and len(body) < BODY_LIMIT + 200
    assert body.endswith(f"\n… ({100_000 - BODY_LIMIT} more characters not shown)")


def test_links_a_response_to_its_request_and_the_bridge_s_message_to_its_cause() -> None:
    prompt = {"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": []}}
    legacy = update("session_info_update", _meta={"promptSuggestions": {"suggestions": [{"text": "go"}]}})
    new = update("prompt_suggestions_update", suggestions=[{"prompt": [text("go")]}])
    rows = rows_of([
        record(1, prompt, "to-agent"),
        record(2, {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}, latency=1.0),
        record(3, legacy, verdict="drop", out=None, mono=5.0),
        {**record(4, new, verdict="emit", mono=5.0, out=orjson.dumps(new).decode()), "raw": ""},
        {**record(5, new, verdict="emit", mono=6.0, out=orjson.dumps(new).decode()), "raw": ""},
        record(6, {"jsonrpc": "2.0", "id": 7, "result": {}}),  # a second answer: nothing to link
    ])
    assert [(r.get("h"), r.get("s"), r.get("q"), r.get("f"), r.get("sr")) for r in rows] == [
        ("turn", None, 1, None, None), (None, 1, None, None, None), (None, 2, 1, None, "end_turn"),
        ("outside", None, None, None, None), (None, 3, None, None, None), (None, 4, None, 4, None),
        (None, 5, None, None, None), (None, 6, None, None, None)]
    assert rows[2]["lat"] == 1.0 and rows[4]["o"] is None and "o" in rows[4]


def test_a_reused_id_links_each_answer_to_its_own_request_oldest_first() -> None:
    """Two requests of one id in flight (a peer's bug): each answer links to the request the
    live bridge paired it with, the first to the first (capture/pairs.py)."""
    ask = {"jsonrpc": "2.0", "id": 7, "method": "fs/read_text_file", "params": {"path": "/a"}}
    rows = rows_of([record(1, ask, "to-client"), record(2, ask, "to-client"),
                    record(3, {"jsonrpc": "2.0", "id": 7, "result": {}}, "to-agent"),
                    record(4, {"jsonrpc": "2.0", "id": 7, "result": {}}, "to-agent")])
    assert [(r["s"], r.get("q")) for r in rows if "h" not in r] == [(1, None), (2, None), (3, 1), (4, 2)]


def test_groups_follow_turns_per_session() -> None:
    def prompt(seq: int, id_: int, session: str) -> dict[str, Any]:
        return record(seq, {"jsonrpc": "2.0", "id": id_, "method": "session/prompt",
                            "params": {"sessionId": session, "prompt": [text(f"p{id_}")]}}, "to-agent")

    def answer(seq: int, id_: int, session: str) -> dict[str, Any]:
        return {**record(seq, {"jsonrpc": "2.0", "id": id_, "result": {"stopReason": "end_turn"}}),
                "session": session}

    rows = rows_of([prompt(1, 1, "a"), prompt(2, 2, "b"), chunk(3, "for a", session="a"),
                    answer(4, 2, "b"), answer(5, 1, "a"), chunk(6, "late", session="a")])
    headers = {i: r["ti"] for i, r in enumerate(rows) if "h" in r}
    assert headers == {0: "Turn 1", 2: "Turn 2", 7: "Between turns"}
    assert [(r["s"], headers[r["g"]]) for r in rows if "h" not in r] == [
        (1, "Turn 1"), (2, "Turn 2"), (3, "Turn 1"), (4, "Turn 2"), (5, "Turn 1"), (6, "Between turns")]


def test_state_stays_bounded_with_a_million_open_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests never answered and turns never closed: the builder forgets the oldest."""
    monkeypatch.setattr(html_rows, "MAX_OPEN", 50)
    builder = RowBuilder(Redactor(()), utc_clock)
    for i in range(1, 2001):
        msg = {"jsonrpc": "2.0", "id": i, "method": "session/prompt", "params": {"sessionId": f"s{i}", "prompt": []}}
        list(builder.add(record(i, msg, "to-agent")))
    assert (len(builder._requests), len(builder._open_turns), len(builder._turn_requests)) == (50, 50, 50)
    answer = record(3000, {"jsonrpc": "2.0", "id": 2000, "result": {}})
    assert [row.get("q") for row in builder.add(answer) if "h" not in row] == [3999]


_texts = st.text(st.characters(codec="utf-8"), max_size=12)
_kinds = st.sampled_from(["chunk", "chunk2", "thought", "prompt", "answer", "other"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_kinds, _texts, st.sampled_from(["a", "b", None])), max_size=40))
def test_every_message_is_in_exactly_one_row(script: list[tuple[str, str, str | None]]) -> None:
    """Folding and grouping lose nothing: the rows cover each seq once, in order, and every
    link points at a row of the right sort."""
    records = []
    for seq, (kind, value, session) in enumerate(script, 1):
        sid = session or "a"
        if kind in ("chunk", "chunk2", "thought"):
            records.append(chunk(seq, value, "agent_thought_chunk" if kind == "thought" else "agent_message_chunk", sid))
        elif kind == "prompt":
            records.append(record(seq, {"jsonrpc": "2.0", "id": seq % 3, "method": "session/prompt",
                                        "params": {"sessionId": sid, "prompt": [text(value)]}}, "to-agent"))
        elif kind == "answer":
            records.append({**record(seq, {"jsonrpc": "2.0", "id": seq % 3, "result": {}}), "session": session})
        else:
            records.append({**record(seq, {"jsonrpc": "2.0", "method": "x"}), "raw": value, "kind": "other"})
    rows = rows_of(records)
    covered = [s for r in rows if "h" not in r for s in range(r["s"], r.get("s2", r["s"]) + 1)]
    assert covered == list(range(1, len(script) + 1))
    assert sum(r.get("n", 1) for r in rows if "h" not in r) == len(script)
    for i, row in enumerate(rows):
        if "h" in row:
            continue
        assert row["g"] < i and "h" in rows[row["g"]]
        if "q" in row:
            assert row["q"] < i and rows[row["q"]]["k"] == "request"


def test_no_message_text_can_end_the_page_s_script_blocks() -> None:
    """A message holding `</script>` or `<!--<script>` stays data: every block parses, and
    the page's own script is intact."""
    evil = "</script><script>alert(1)</script><!--<script>"
    msg = {"jsonrpc": "2.0", "method": "note", "params": {"x": evil}}
    page = render([record(1, msg), {**record(2, msg), "raw": evil, "kind": "other"}], clock=utc_clock)
    assert evil not in page and "<!--" not in page.split("<script>")[0]
    rows = page_rows(page)
    assert evil in rows[1]["b"] and rows[2]["b"] == evil
    assert len(re.findall(r"</script>", page)) == page.count("<script")


def test_open_turns_cost_little_memory_each() -> None:
    """5,000 sessions, each with a turn never answered: what the builder keeps is a few
    hundred bytes a turn (a key holding an orjson buffer kept 4 KiB each, 900 MB at the cap)."""
    builder = RowBuilder(Redactor(()), utc_clock)
    records = [record(i, {"jsonrpc": "2.0", "id": i, "method": "session/prompt",
                          "params": {"sessionId": f"sess_{i:08d}", "prompt": []}}, "to-agent")
               for i in range(1, 5_001)]
    tracemalloc.start()
    try:
        for r in records:
            for _ in builder.add(r):
                pass
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(builder._open_turns) == 5_000
    assert kept / 5_000 < 600, kept / 5_000


def test_a_session_id_that_is_an_object_or_too_deep_still_groups() -> None:
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    for session in ({"b": 1, "a": 2}, deep, 1, "1", None):
        msg = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"prompt": []}}
        rows = rows_of([{**record(1, msg, "to-agent"), "session": session},
                        {**record(2, {"jsonrpc": "2.0", "id": 1, "result": {}}), "session": session}])
        assert [r.get("h") for r in rows] == ["turn", None, None] and rows[2]["q"] == 1


def test_an_update_kind_that_is_no_string_is_a_row_like_any_other() -> None:
    odd = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {"sessionUpdate": [1]}}}
    rows = rows_of([record(1, odd), chunk(2, "a"), record(3, odd)])
    assert [(r.get("s"), r.get("n"), r.get("u")) for r in rows] == [(None, None, None), (1, None, None),
                                                                     (2, None, "agent_message_chunk"),
                                                                     (3, None, None)]


@pytest.mark.parametrize(("pointers", "msg", "raw", "shown", "redacted"), IN_CLEAR)
def test_rows_mask_again_what_the_capture_holds_in_clear(pointers: tuple[str, ...], msg: Any, raw: str | None,
                                                          shown: str, redacted: list[str]) -> None:
    """A capture written by an older bridge, or edited, may hold a secret in clear: its rows
    mask it again, with the defaults and the capture's pointers, however the line spells it."""
    given = record(1, msg, "to-agent")
    if raw is not None:
        given["raw"] = raw
    builder = RowBuilder(Redactor(pointers), utc_clock)
    rows = list(builder.add(given)) + list(builder.finish())
    assert "hunter2" not in orjson.dumps(rows).decode()
    assert shown in rows[-1]["b"] and "[redacted]" in rows[-1]["mk"]
    assert "hunter2" in given["raw"] and "redacted" not in given  # the record handed in is left as it was
    assert builder.redact(given)["redacted"] == redacted


def test_a_record_with_nothing_to_mask_is_given_back_itself() -> None:
    given = record(1, update("agent_message_chunk", content=text("hi")))
    assert RowBuilder(Redactor(("/params/key",)), utc_clock).redact(given) is given


@pytest.mark.parametrize("extra", [
    pytest.param({}, id="as-it-came"),
    pytest.param({"verdict": "rewrite", "out": orjson.dumps(update("plan")).decode()}, id="rewritten"),
    pytest.param({"verdict": "drop", "out": None}, id="dropped"),
    pytest.param({"verdict": "rewrite", "out_b64": base64.b64encode(orjson.dumps(update("plan"))).decode()},
                 id="rewritten-in-base64"),
    pytest.param({"redacted": "whole"}, id="marked-withheld-yet-holding-its-line"),
])
def test_a_rows_label_is_the_summary_show_prints(extra: dict[str, Any]) -> None:
    """The page reads the message it already parsed into the label; the label is still the
    one `summarize` reads for itself, whatever fields the record has (even contradictory)."""
    given = {**record(1, update("agent_message_chunk", content=text("hi"))), **extra}
    [row] = [row for row in rows_of([given]) if "l" in row]
    assert row["l"] == summarize(given, utc_clock).label


def test_the_out_of_a_truncated_record_is_masked_again_too() -> None:
    """Only `raw` of a truncated record is a head that cannot be parsed; an `out` beside it
    (which the bridge never writes: an edited capture) is a line like any other."""
    given = {**record(1, {"jsonrpc": "2.0", "method": "x"}), "kind": "other", "verdict": "opaque", "size": 10**9,
             "raw": '{"jsonrpc":"2.0","x":"aaaa', "truncated": True,
             "out": '{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"t":"hunter2"}}\n'}
    rows = rows_of([given])
    assert "hunter2" not in orjson.dumps(rows).decode()
    assert rows[-1]["o"] == '{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"t":"<redacted>"}}'
    assert rows[-1]["b"].startswith('{"jsonrpc":"2.0","x":"aaaa\n… (the first')


def _old_one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


_SPACES = st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x1c", "\x85", "\xa0", "\u2028", "\u3000", "\u200b"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_SPACES, st.text(min_size=1, max_size=12))), st.integers(2, 200))
def test_a_preview_is_what_splitting_the_whole_text_gives(pieces: list[str], limit: int) -> None:
    """`one_line` reads only the words it shows (a 16 MiB chunk of words, split whole, took
    the export to 326 MiB), and gives what `" ".join(text.split())` cut to the limit gives."""
    text = "".join(pieces)
    assert one_line(text, limit) == _old_one_line(text, limit)


def _old_body(data: str | bytes, limit: int) -> tuple[str, int, int]:
    line = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    whole = line.decode("utf-8", "backslashreplace").rstrip("\r\n")
    return whole[:limit], len(whole), len(line)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=st.sampled_from(["a", "é", "€", "\U0001f600", "\ud800", "\r", "\n", " "])),
                 st.binary().map(lambda b: b + b"\n" * (b[:1] == b"\x00"))),
       st.integers(0, 12), st.integers(1, 5))
def test_a_long_line_is_turned_into_text_a_piece_at_a_time(data: str | bytes, limit: int, piece: int) -> None:
    """The head, length and size of a line's text, from pieces as small as one character
    or byte (a character cut between pieces, a line end split from the text, a lone
    surrogate), are those of the whole line decoded at once."""
    assert body_text(data, limit, piece) == _old_body(data, limit)


def test_a_long_chunk_in_a_fold_is_cut_once_and_counted_whole() -> None:
    """Only what is shown of a chunk is held (a 16 MiB chunk was kept whole until its fold
    ended), and the note counts all that is not shown, once (it said it twice, the second
    time without the first chunk's rest)."""
    rows = rows_of([chunk(1, "x" * 30_000), chunk(2, "y" * 30_000)])
    assert rows[1]["n"] == 2
    assert rows[1]["b"] == "x" * BODY_LIMIT + f"\n… ({60_000 - BODY_LIMIT} more characters not shown)"
