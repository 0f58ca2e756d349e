"""The tools of `acp-bridge mcp` in-process, over hand-made captures (tests/mcp/test_server.py
meets them through a real client): paging and cutting, what a bad argument says, session
prefixes, masked and withheld lines, and findings kept until a capture changes."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.catalog import Catalog
from acp_bridge.capture.in_flight import InFlight
from acp_bridge.capture.summary import WITHHELD_NOTE
from acp_bridge.health import offline
from acp_bridge.mcp import tools as tools_module
from acp_bridge.mcp.pages import cut, page, piece, utf8_size
from acp_bridge.mcp.tools import BadArgument, Tools, line
from tests.capture.hostile import SECRETS, holds_a_secret, hostile_captures
from tests.capture.samples import FIXED, HEADER, base


def write(path: Path, *records: dict[str, object]) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in (HEADER, *records)))


def prompt(seq: int, session: str, text: str, **fields: object) -> dict[str, object]:
    raw = orjson.dumps({"jsonrpc": "2.0", "id": seq, "method": "session/prompt",
                        "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}).decode()
    return base(seq, "to-agent", "request", "pass", seq / 10, method="session/prompt", id=seq, session=session,
                size=len(raw) + 1, raw=raw + "\n", **fields)


@pytest.fixture
def tools(tmp_path: Path) -> Tools:
    write(tmp_path / "fixed.jsonl", *FIXED)
    write(tmp_path / "two.jsonl", prompt(1, "0f3c9a7e-aaaa", "Straße one"), prompt(2, "0f3c9a7e-bbbb", "two"))
    return Tools(Catalog([str(tmp_path)]))


@pytest.mark.parametrize(("items", "offset", "limit", "max_text", "expected"), [
    pytest.param([], 0, 5, 100, "(empty)", id="nothing-at-all"),
    pytest.param(["a", "b", "c"], 0, 5, 100, "a\nb\nc", id="all-fit"),
    pytest.param(["a", "b", "c"], 1, 1, 100, "b\n(stopped at limit=1 after 1 entries; the rest: t with offset=2)",
                 id="limit"),
    pytest.param(["aaaa", "bbbb", "c"], 0, 5, 9, "aaaa\n(stopped at the answer's size limit after 1 entries; "
                 "the rest: t with offset=1)", id="size"),
    pytest.param(["a", "b"], 2, 5, 100, "(nothing from offset 2 on: there are 2)", id="offset-past-the-end"),
    pytest.param(["é" * 6, "b"], 0, 5, 5, "éé\n(the entry at offset 0 is cut at 5 bytes of text, more than one "
                 "answer holds; see X)\n(stopped at the answer's size limit after 1 entries; the rest: t with "
                 "offset=1)", id="cut-never-halves-a-character"),
])
def test_a_page_holds_items_up_to_a_limit_and_a_size(items: list[str], offset: int, limit: int, max_text: int,
                                                     expected: str) -> None:
    assert page(items, str, offset=offset, limit=limit, call="t", max_text=max_text, empty="(empty)",
                whole="see X") == expected


def test_items_before_the_offset_are_never_rendered() -> None:
    rendered: list[int] = []

    def render(item: int) -> str:
        rendered.append(item)
        return str(item)

    page(range(1000), render, offset=990, limit=3, call="t")
    assert rendered == [990, 991, 992]


@given(items=st.lists(st.text(max_size=30), max_size=30), limit=st.integers(1, 10), max_text=st.integers(8, 60))
def test_following_the_notes_reaches_every_item_in_order(items: list[str], limit: int, max_text: int) -> None:
    """Each answer stays within its size (the note aside), and asking again from the offset
    each note names gives every item, in order, whole unless it alone is too big."""
    seen: list[str] = []
    offset = 0
    while True:
        answer = page(items, lambda s: s.replace("\n", " "), offset=offset, limit=limit, call="t",
                      max_text=max_text, empty="(empty)")
        body, _, note = answer.partition("\n(stopped at ")
        entries = body.split("\n")
        entries = [e for e in entries if not e.startswith("(the entry at offset")]
        if answer == "(empty)":
            assert items == []
            break
        assert utf8_size("\n".join(entries)) <= max_text
        seen += entries
        if not note:
            break
        offset = int(note.rsplit("offset=", 1)[1].rstrip(")"))
    assert len(seen) == len(items)
    for got, item in zip(seen, items, strict=True):
        flat = item.replace("\n", " ")
        assert got == flat or (got == cut(flat, max_text) and utf8_size(flat) + 1 > max_text)


def test_a_text_comes_in_pieces_that_join_up_exactly() -> None:
    text = "ab€" * 5  # 15 characters, 25 bytes
    first = piece(text, 0, call="get_message", max_text=10)
    assert first == "ab€ab€\n(characters 0 to 6 of 15; the rest: get_message with offset=6)"
    assert piece(text, 6, call="get_message", max_text=100) == text[6:]
    assert piece(text, 16, call="get_message") == "(nothing from offset 16 on: the text has 15 characters)"


@pytest.mark.parametrize(("call", "said"), [
    (lambda t: t.get_message("fixed.jsonl", 10), 'capture "fixed.jsonl" has no message with seq 10 '
                                                 "(its messages are seq 1 to 9)"),
    (lambda t: t.get_message("fixed.jsonl", 1, offset=-1), "offset must be 0 or more, not -1"),
    (lambda t: t.show_messages("fixed.jsonl", limit=0), "limit must be at least 1, not 0"),
    (lambda t: t.show_messages("fixed.jsonl", detail=4), "detail is 0 (only failures), 1, 2 or 3, not 4"),
    (lambda t: t.show_messages("fixed.jsonl", direction="up"), 'direction is to-agent or to-client, not "up"'),
    (lambda t: t.show_messages("fixed.jsonl", text=""), "text, when given, must not be empty"),
    (lambda t: t.search(""), "text must not be empty"),
    (lambda t: t.find_problems("x\x1b[2J" + "y" * 100), 'no capture named "x\\u001b[2J' + "y" * 75
                                                         + '…": list_captures gives their names'),
    (lambda t: t.show_messages("two.jsonl", session="0f3c9a7e-"),
     "session '0f3c9a7e-' is the start of 2 sessions: 0f3c9a7e-aaaa, 0f3c9a7e-bbbb"),
])
def test_a_bad_argument_says_what_is_wrong(tools: Tools, call: object, said: str) -> None:
    with pytest.raises(BadArgument) as raised:
        call(tools)  # type: ignore[operator]
    assert str(raised.value) == said


def test_a_session_prefix_of_one_session_and_text_in_any_case(tools: Tools) -> None:
    assert tools.show_messages("two.jsonl", session="0f3c9a7e-b") == (
        "seq 2 22:13:20.450 -> session/prompt id 2 (0f3c9a7e-bbbb) 130B")
    # casefolded: "STRASSE" finds "Straße"
    assert tools.search("STRASSE ONE") == (
        '{"capture":"two.jsonl","seq":1,"summary":"22:13:20.350 -> session/prompt id 1 (0f3c9a7e-aaaa) 137B",'
        '"excerpt":"{\\"jsonrpc\\":\\"2.0\\",\\"id\\":1,\\"method\\":\\"session/prompt\\",\\"params\\":'
        '{\\"sessionId\\":\\"0f3c9a7e-aaaa\\",\\"prompt\\":[{\\"type\\":\\"text\\",\\"text\\":\\"Straße one\\"}]}}"}')


def test_detail_0_shows_only_what_a_rule_failed_on_and_a_withheld_line_stays_withheld(tmp_path: Path) -> None:
    write(tmp_path / "c.jsonl",
          base(1, "to-agent", "request", "error", 0.1, method="x", id=1, size=3, raw="{}\n", error="boom"),
          base(2, "to-agent", "request", "pass", 0.2, method="authenticate", id=2, size=90, raw="<redacted>",
               redacted="whole"),
          base(3, "to-client", "other", "other", 0.3, size=3, raw_b64="gP8K"))
    tools = Tools(Catalog([str(tmp_path)]))
    assert tools.show_messages("c.jsonl", detail=0) == "seq 1 22:13:20.350 -> x id 1 3B [error: boom]"
    assert tools.show_messages("c.jsonl", methods=["authenticate"], detail=2) == "\n".join([
        "seq 2 22:13:20.450 -> authenticate id 2 90B [redacted: whole line]", f"    {WITHHELD_NOTE}"])
    assert tools.get_message("c.jsonl", 3) == (
        '{"type":"message","seq":3,"time":1700000000.55,"mono":0.3,"direction":"to-client","kind":"other",'
        '"verdict":"other","method":null,"id":null,"session":null,"rules":[],"size":3,"raw_b64":"gP8K"}')
    assert tools.search("redacted") == (
        '{"capture":"c.jsonl","seq":2,"summary":"22:13:20.450 -> authenticate id 2 90B [redacted: whole line]",'
        '"excerpt":"<redacted>"}')


def test_findings_are_computed_again_only_when_a_capture_changed(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.jsonl"
    write(path, prompt(1, "s", "hi"))
    tools = Tools(Catalog([str(tmp_path)]))
    calls: list[str] = []
    real = offline.analyse

    def counted(name: str, records: object) -> object:
        calls.append(name)
        return real(name, records)  # type: ignore[arg-type]

    monkeypatch.setattr(tools_module, "analyse", counted)
    first = tools.find_problems()
    assert tools.find_problems("c.jsonl") == '(no findings in capture "c.jsonl")'
    assert calls == ["c.jsonl"]
    with path.open("ab") as file:
        file.write(orjson.dumps(prompt(2, "s", "again")) + b"\n")
    tools.find_problems()
    assert calls == ["c.jsonl", "c.jsonl"]
    assert first == "(no findings in any capture)"


def test_the_findings_of_captures_gone_are_not_kept(tmp_path: Path) -> None:
    """A server left running over a folder where bridges write a capture a session (and
    old ones are deleted) kept the findings of every capture it had ever analysed."""
    for n in range(3):
        write(tmp_path / f"c{n}.jsonl", prompt(1, "s", "hi"))
    tools = Tools(Catalog([str(tmp_path)]))
    tools.find_problems()
    assert repr(tools).endswith("reports=3>")
    (tmp_path / "c0.jsonl").unlink()
    (tmp_path / "c1.jsonl").unlink()
    tools.find_problems("c2.jsonl")
    assert repr(tools).endswith("reports=1>")


def test_a_capture_gone_since_the_listing_is_unknown(tools: Tools, tmp_path: Path) -> None:
    assert tools.get_message("two.jsonl", 2).startswith('{"type":"message","seq":2,')
    (tmp_path / "two.jsonl").unlink()
    with pytest.raises(BadArgument, match="no capture named"):
        tools.get_message("two.jsonl", 2)


def test_capture_summary_keeps_its_lists_and_its_size_bounded(tmp_path: Path) -> None:
    methods = [base(seq, "to-agent", "notification", "pass", seq / 100, method=f"x/{seq:03}", size=3, raw="{}\n")
               for seq in range(1, 151)]
    write(tmp_path / "many.jsonl", *methods)
    tools = Tools(Catalog([str(tmp_path)]))
    summary = orjson.loads(tools.capture_summary("many.jsonl"))
    by_method = summary["stats"]["by_method"]
    assert (len(by_method), by_method[99]["method"], by_method[100]) == (101, "x/100", "… and 50 more")

    small = Tools(Catalog([str(tmp_path)]), max_text=1000)
    first = small.capture_summary("many.jsonl")
    whole = tools.capture_summary("many.jsonl")
    assert first == whole[:1000] + f"\n(characters 0 to 1000 of {len(whole)}; the rest: capture_summary with offset=1000)"
    assert small.capture_summary("many.jsonl", offset=len(whole) - 5) == whole[-5:]


def test_capture_summary_makes_a_dict_of_the_unanswered_requests_it_lists_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It made a dict of every request left unanswered (a million, for an agent that died)
    and cut the list to 100 after; the list is the same."""
    write(tmp_path / "many.jsonl", *(base(seq, "to-agent", "request", "pass", seq / 100, method="session/prompt",
                                          id=seq, size=3, raw="{}\n") for seq in range(1, 151)))
    made: list[bytes | tuple[object, ...]] = []
    fields = InFlight._fields

    def counted(self: InFlight, kept: bytes | tuple[object, ...]) -> dict[str, object]:
        made.append(kept)
        return fields(self, kept)

    monkeypatch.setattr(InFlight, "_fields", counted)
    summary = orjson.loads(Tools(Catalog([str(tmp_path)])).capture_summary("many.jsonl"))
    unanswered = summary["stats"]["unanswered"]
    assert ([r["id"] for r in unanswered[:100]], unanswered[100:]) == (list(range(1, 101)), ["… and 50 more"])
    assert len(made) == 100


def test_ids_beyond_64_bits_and_absurd_seqs_are_answered(tmp_path: Path) -> None:
    """What orjson cannot write (an int past 64 bits, nesting past 254 levels) is still
    written; a capture with such an id is summed up; a seq no capture can have is a bad
    argument like any other."""
    big = 2**70
    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    assert line({"id": big}) == '{"id":1180591620717411303424}'
    assert line({"session": deep}) == '{"session":' + "[" * 300 + '"x"' + "]" * 300 + "}"
    raw = f'{{"jsonrpc":"2.0","id":{big},"result":{{}}}}\n'
    record = json.dumps(base(1, "to-client", "response", "pass", 0.1, id=big, size=len(raw), raw=raw))
    (tmp_path / "c.jsonl").write_bytes(orjson.dumps(HEADER) + b"\n" + record.encode() + b"\n")
    tools = Tools(Catalog([str(tmp_path)]))
    [finding] = orjson.loads(tools.capture_summary("c.jsonl"))["check"]["findings"]
    assert finding["code"] == "response-unknown-id"
    assert str(big) in tools.get_message("c.jsonl", 1)
    with pytest.raises(BadArgument, match="has no message with seq 1000000000000000000000000000000 "):
        tools.get_message("c.jsonl", 10**30)


def test_the_notes_of_a_diff_are_bounded_too(tmp_path: Path) -> None:
    """A note per session only one side has: B with 400 more sessions than A gave 400 note
    lines past the cap (at 1 MB, 40,000 sessions did), on top of a full page of differences."""
    write(tmp_path / "a.jsonl", prompt(1, "s0", "hi"))
    write(tmp_path / "b.jsonl", *(prompt(seq, f"s{seq}", "hi") for seq in range(1, 402)))
    tools = Tools(Catalog([str(tmp_path)]), max_text=2000)
    answer = tools.diff_captures("a.jsonl", "b.jsonl", limit=1000)
    lines = answer.splitlines()
    assert utf8_size("\n".join(lines[:25] + lines[26:34])) <= 2000  # the two notes on what is left out aside
    assert lines[0] == "a.jsonl and b.jsonl differ: 0 missing, 400 extra, 0 changed (1 of 1 and 401 messages aligned)"
    assert lines[24:] == [
        "session 25 turn 1: extra in b.jsonl: b.jsonl seq 25 -> session/prompt",
        "(stopped at the answer's size limit after 24 entries; the rest: diff_captures with offset=24)",
        *(f"session {n} is only in B" for n in range(2, 10)),
        "(and 392 more notes: acp-bridge diff prints them all)"]


class SwappedAfterListing(Catalog):
    """A catalog whose served folder is swapped for a link to an outside one right after
    its first listing, before the captures are opened."""

    def __init__(self, served: Path, outside: Path) -> None:
        super().__init__([str(served)])
        self.served, self.outside, self.swapped = served, outside, False

    def _names(self) -> dict[str, str]:
        named = super()._names()
        if not self.swapped:
            self.swapped = True
            self.served.rename(self.served.with_name("served.old"))
            self.served.symlink_to(self.outside)
        return named


def test_a_folder_swapped_for_a_link_between_listing_and_opening_is_not_followed(tmp_path: Path) -> None:
    served, outside = tmp_path / "served", tmp_path / "outside"
    served.mkdir()
    outside.mkdir()
    write(served / "a.jsonl", prompt(1, "s", "inside"))
    write(outside / "a.jsonl", prompt(1, "s", "outside secret"))
    tools = Tools(SwappedAfterListing(served, outside))
    with pytest.raises(BadArgument, match="no capture named"):
        tools.get_message("a.jsonl", 1)


def test_every_tool_serves_messages_masked_as_the_export_shows_them(tmp_path: Path) -> None:
    """get_message, show_messages and search served what the capture held in clear: the
    secrets the export's page masks again (on its own hostile samples) are masked here the
    same way, and a search for one finds nothing."""
    hostile = hostile_captures(tmp_path)
    tools = Tools(Catalog([str(tmp_path)]))
    for capture in hostile:
        for shown in capture.shown:
            assert orjson.loads(tools.get_message(capture.name, int(shown["seq"]))) == shown
        answers = [tools.show_messages(capture.name, detail=3), tools.capture_summary(capture.name),
                   tools.find_problems(capture.name)]
        assert not any(holds_a_secret(answer) for answer in answers), capture.name
    for secret in SECRETS:
        assert tools.search(secret.decode()).startswith("(no message in ")


def test_a_message_on_a_line_over_the_limit_is_said_to_be_passed_over(tmp_path: Path) -> None:
    """Its seq is asked for (the next message's is one more): the answer says why it is not
    there, as the listing counts it."""
    write(tmp_path / "long.jsonl", prompt(1, "s", "x" * (2 << 20)), prompt(2, "s", "short"))
    tools = Tools(Catalog([str(tmp_path)], max_line=1 << 20))
    assert orjson.loads(tools.list_captures())["skipped"] == 1
    with pytest.raises(BadArgument) as raised:
        tools.get_message("long.jsonl", 1)
    assert str(raised.value) == ('capture "long.jsonl" has no message with seq 1 (its messages are seq 1 to 2; '
                                 "1 line(s) longer than 1 MiB were passed over unread)")


def test_a_rule_that_failed_is_a_problem_and_keeps_the_bridge(tmp_path: Path) -> None:
    """Verdict `error` on 3 prompts: one error finding naming the rule, with its count, and
    a verdict that does not say the bridge can be removed."""
    failed = [{**prompt(seq, "s", "hi"), "verdict": "error", "rules": ["boom"], "error": "ValueError: kaboom"}
              for seq in (1, 2, 3)]
    write(tmp_path / "c.jsonl", *failed)
    tools = Tools(Catalog([str(tmp_path)]))
    assert tools.find_problems("c.jsonl").splitlines()[0] == (
        '{"capture":"c.jsonl","level":"error","code":"rule-failed","seq":1,"session":"s","message":"rule \'boom\' '
        'failed: ValueError: kaboom (the message went on as it came)","excerpt":' + json.dumps(
            str(failed[0]["raw"]).rstrip("\n"), ensure_ascii=False, separators=(",", ":")) + "}")
    summary = json.loads(tools.capture_summary("c.jsonl"))
    assert [(f["code"], f["level"], f["count"]) for f in summary["check"]["findings"]] == [("rule-failed", "error", 3)]
    assert summary["verdict"].startswith("rules failed (boom 3x)")
