"""`acp-bridge mcp` through the MCP SDK's own client over stdio, against a folder of real
captures (tests/mcp/conftest.py): every tool, the bounds, the redaction, the bad arguments.

One server process answers the whole module: `answers` starts it once, makes every call of
`CALLS` in order and keeps what came back, and each test reads its calls. The server's
start (importing the SDK) is what costs; a call costs milliseconds.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from acp_bridge.capture.files import open_capture
from acp_bridge.capture.stats import stats_json
from acp_bridge.health.offline import findings_json
from tests.mcp.conftest import BIG_TEXT, OUTSIDE_MARK, TOOLS

AIR = "v1-legacy-air-meta.jsonl"
UNLOCK = "v1-new-client-unlock.jsonl"
V2 = "v2-resume-spec-dialect.jsonl"
DEMO = "capture.jsonl"
DEMO_PROMPT = "Never touch files outside src/"  # the demo's system prompt, masked in its capture

# (key, tool, arguments), called in this order on one server
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("list", "list_captures", {}),
    ("list-page", "list_captures", {"limit": 2, "offset": 1}),
    ("summary-air", "capture_summary", {"capture": AIR}),
    ("summary-demo", "capture_summary", {"capture": DEMO}),
    ("diff-same", "diff_captures", {"a": AIR, "b": AIR}),
    ("diff-two", "diff_captures", {"a": AIR, "b": UNLOCK, "limit": 2}),
    ("diff-two-ignoring", "diff_captures", {"a": AIR, "b": UNLOCK, "ignore": ["/params", "/result"]}),
    ("problems-air", "find_problems", {"capture": AIR}),
    ("problems-all", "find_problems", {}),
    ("problems-page", "find_problems", {"limit": 1, "offset": 1}),
    ("prompts-air", "show_messages", {"capture": AIR, "method": ["session/prompt"]}),
    ("updates-unlock", "show_messages", {"capture": UNLOCK, "update": ["prompt_suggestions_update"],
                                         "direction": "to-client", "detail": 2, "limit": 1}),
    ("session-prefix", "show_messages", {"capture": V2, "session": "sess_v2_", "text": "FIX PARSER", "limit": 2}),
    ("rewrites-air", "show_messages", {"capture": AIR, "method": ["session/new"], "detail": 3}),
    ("failures-demo", "show_messages", {"capture": DEMO, "detail": 0}),
    ("get-air-3", "get_message", {"capture": AIR, "seq": 3}),
    ("search-token", "search", {"text": "db_token"}),
    ("search-secret", "search", {"text": "s3cret"}),
    ("search-prompt", "search", {"text": DEMO_PROMPT}),
    ("search-masked", "search", {"text": "<redacted: system prompt>", "capture": DEMO}),
    ("search-outside", "search", {"text": OUTSIDE_MARK}),
    ("big-get", "get_message", {"capture": "big.jsonl", "seq": 2}),
    ("big-show", "show_messages", {"capture": "big.jsonl", "detail": 2}),
    ("big-show-rest", "show_messages", {"capture": "big.jsonl", "detail": 2, "offset": 1}),
    ("big-get-rest", "get_message", {"capture": "big.jsonl", "seq": 2, "offset": 1_000_000}),
    ("big-search", "search", {"text": "big yyy", "capture": "big.jsonl"}),
    # bad arguments: each a tool error, and the server goes on
    ("bad-capture", "get_message", {"capture": "nope.jsonl", "seq": 1}),
    ("bad-dotdot", "show_messages", {"capture": "../outside/secret.jsonl"}),
    ("bad-absolute", "find_problems", {"capture": "/etc/passwd"}),
    ("bad-link", "get_message", {"capture": "outside.jsonl", "seq": 1}),
    ("bad-fifo", "show_messages", {"capture": "fifo.jsonl"}),
    ("bad-seq", "get_message", {"capture": AIR, "seq": 99}),
    ("bad-seq-zero", "get_message", {"capture": AIR, "seq": 0}),
    ("bad-limit", "show_messages", {"capture": AIR, "limit": -1}),
    ("bad-offset", "search", {"text": "x", "offset": -5}),
    ("bad-detail", "show_messages", {"capture": AIR, "detail": 7}),
    ("bad-direction", "show_messages", {"capture": AIR, "direction": "sideways"}),
    ("bad-type", "get_message", {"capture": AIR, "seq": "three"}),
    ("bad-missing", "get_message", {"capture": AIR}),
    ("bad-empty-text", "search", {"text": ""}),
    ("bad-ignore", "diff_captures", {"a": AIR, "b": UNLOCK, "ignore": ["params"]}),
    ("bad-diff-capture", "diff_captures", {"a": AIR, "b": "nope.jsonl"}),
    ("bad-tool", "rm_rf", {}),
    ("after-all", "list_captures", {"limit": 1}),
]


@dataclass(frozen=True)
class Answer:
    error: bool
    text: str


@dataclass(frozen=True)
class Conversation:
    tools: dict[str, dict[str, Any]]  # name -> input schema
    answers: dict[str, Answer]


async def converse(folder: Path) -> Conversation:
    from mcp import ClientSession  # here, not at the top: importing the SDK takes a second per worker
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.types import TextContent

    params = StdioServerParameters(command=sys.executable, args=["-m", "acp_bridge", "mcp", str(folder)])
    answers: dict[str, Answer] = {}
    with trio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            for key, tool, arguments in CALLS:
                result = await session.call_tool(tool, arguments)
                [content] = result.content
                assert isinstance(content, TextContent)
                answers[key] = Answer(bool(result.is_error), content.text)
    return Conversation({t.name: t.input_schema for t in listed.tools}, answers)


@pytest.fixture(scope="module")
def conversation(captures: Path) -> Conversation:
    return trio.run(converse, captures)


def answer(conversation: Conversation, key: str) -> str:
    got = conversation.answers[key]
    assert not got.error, got.text
    return got.text


def test_a_client_lists_the_seven_tools_with_typed_arguments(conversation: Conversation) -> None:
    schemas = conversation.tools
    assert list(schemas) == TOOLS
    assert schemas["get_message"]["required"] == ["capture", "seq"]
    assert schemas["get_message"]["properties"]["seq"] | {"description": None} == {
        "type": "integer", "minimum": 1, "title": "Seq", "description": None}
    show = schemas["show_messages"]["properties"]
    assert show["limit"]["minimum"] == 1 and show["limit"]["maximum"] == 1000 and show["limit"]["type"] == "integer"
    assert show["detail"]["minimum"] == 0 and show["detail"]["maximum"] == 3
    assert show["direction"]["anyOf"][0] == {"enum": ["to-agent", "to-client"], "type": "string"}
    assert show["method"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    assert schemas["search"]["required"] == ["text"]
    assert schemas["diff_captures"]["required"] == ["a", "b"]


def test_list_captures_names_each_capture_newest_first_and_nothing_else(conversation: Conversation) -> None:
    """Not listed: the demo's agent.jsonl (a log, no capture), the link leading out of the
    folder, the FIFO, the capture in a subfolder."""
    entries = [orjson.loads(line) for line in answer(conversation, "list").splitlines()]
    assert [e["name"] for e in entries] == [DEMO, V2, UNLOCK, AIR, "big.jsonl", "live.jsonl"]
    assert [e["live"] for e in entries] == [False] * 5 + [True]  # its bridge (the test) still runs
    assert entries[3] == {"name": AIR, "started": "2026-12-01T03:19:43Z", "client": "golden-client 1.0.0",
                          "agent": "@zed-industries/claude-agent-acp 0.23.1", "messages": 19, "findings": 0,
                          "skipped": 0, "live": False}
    assert entries[1]["client"] == "golden-client 1.0.0"  # v2 names it `info`
    assert (entries[0]["client"], entries[0]["messages"], entries[0]["live"]) == ("demo-client 1.0.0", 16, False)
    assert answer(conversation, "list-page").splitlines() == [
        *answer(conversation, "list").splitlines()[1:3],
        "(stopped at limit=2 after 2 entries; the rest: list_captures with offset=3)"]


def test_capture_summary_says_what_stats_and_check_say_with_the_verdict(conversation: Conversation,
                                                                       captures: Path) -> None:
    """The same numbers as `stats --json` and `check --json` (the same functions, over the
    same records), the verdict in front, the capture named as list_captures names it."""
    summary = orjson.loads(answer(conversation, "summary-air"))
    with open_capture(str(captures / AIR)) as reader:
        check = findings_json(AIR, reader)
    with open_capture(str(captures / AIR)) as reader:
        stats = stats_json(reader)
    assert summary == {"capture": AIR, "live": False, "verdict": check.pop("verdict"), "stats": stats,
                       "check": check}
    assert summary["verdict"] == (
        "this pair still needs the bridge because the bridge withdrew suggestions on the next prompt (1x), which "
        "the agent did not do; the agent lacks the systemPrompt capability (the prompt went through meta)")
    assert (summary["stats"]["messages"], summary["stats"]["redacted"]) == (19, 1)
    assert [f["code"] for f in summary["check"]["findings"]] == [
        "air-only-client", "legacy-suggestions", "system-prompt-fallback"]
    demo = orjson.loads(answer(conversation, "summary-demo"))
    assert demo["verdict"].startswith("this pair still needs the bridge because the agent sends suggestions in the "
                                      "legacy form (3x)")


def test_diff_captures_says_what_diff_says(conversation: Conversation) -> None:
    assert answer(conversation, "diff-same") == "same: 19 messages aligned, no difference"
    lines = answer(conversation, "diff-two").splitlines()
    assert lines[0] == (f"{AIR} and {UNLOCK} differ: 7 missing, 8 extra, 9 changed "
                        "(12 of 19 and 20 messages aligned)")
    assert lines[1].startswith(f"connection: {AIR} seq 1 / {UNLOCK} seq 1 -> initialize: /params/clientCapabilities/_meta ")
    assert lines[2].startswith(f"connection: {AIR} seq 2 / {UNLOCK} seq 2 <- response initialize: /result/agentInfo/name ")
    assert lines[3:] == ["(stopped at limit=2 after 2 entries; the rest: diff_captures with offset=2)"]
    ignoring = answer(conversation, "diff-two-ignoring").splitlines()
    assert ignoring[0] == f"{AIR} and {UNLOCK} differ: 7 missing, 8 extra, 0 changed (12 of 19 and 20 messages aligned)"


def test_find_problems_of_one_capture_or_all_worst_first_with_seq_and_excerpt(conversation: Conversation) -> None:
    lines = answer(conversation, "problems-air").splitlines()
    found = [orjson.loads(line) for line in lines[:4]]
    assert [(f["code"], f["seq"], f["session"]) for f in found] == [
        ("air-only-client", 1, None), ("legacy-suggestions", 10, "sess_air_1"),
        ("legacy-suggestions", 18, "sess_air_1"), ("system-prompt-fallback", 3, None)]
    assert found[0]["excerpt"].startswith('{"jsonrpc": "2.0", "id": 0, "method": "initialize"')
    assert found[0]["excerpt"].endswith("…") and len(found[0]["excerpt"]) == 161
    assert lines[4] == "what the codes mean:"
    assert orjson.loads(lines[5])["code"] == "air-only-client"
    assert len(lines) == 8

    every = [orjson.loads(line) for line in answer(conversation, "problems-all").split("\nwhat the codes")[0]
             .splitlines()]
    assert [(f["capture"], f["seq"]) for f in every] == [
        (DEMO, 8), (DEMO, 12), (DEMO, 15), (DEMO, 5),
        (UNLOCK, 9), (UNLOCK, 17), (UNLOCK, 5),
        (AIR, 1), (AIR, 10), (AIR, 18), (AIR, 3)]
    page = answer(conversation, "problems-page").splitlines()
    assert orjson.loads(page[0]) == every[1]
    assert page[1] == "(stopped at limit=1 after 1 entries; the rest: find_problems with offset=2)"


def test_show_messages_filters_as_show_does(conversation: Conversation) -> None:
    assert answer(conversation, "prompts-air") == "\n".join([
        "seq 5 03:19:43.380 -> session/prompt id 2 (sess_air_1) 155B",
        "seq 9 03:19:43.380 <- session/prompt id 2 ok 0.3ms (sess_air_1) 66B",
        "seq 12 03:19:43.381 -> session/prompt id 3 (sess_air_1) 159B",
        "seq 17 03:19:43.382 <- session/prompt id 3 ok 0.4ms (sess_air_1) 66B"])
    assert answer(conversation, "updates-unlock").splitlines()[:4] == [
        "seq 10 03:19:43.855 <- session/update prompt_suggestions_update (sess_new_1) 200B [bridge: suggestions]",
        "    {",
        '      "sessionId": "sess_new_1",',
        '      "update": {']
    assert answer(conversation, "updates-unlock").splitlines()[-1] == (
        "(stopped at limit=1 after 1 entries; the rest: show_messages with offset=1)")
    assert answer(conversation, "session-prefix") == "\n".join([  # a session's start, text in any case
        "seq 5 03:19:44.296 -> session/prompt id 2 (sess_v2_1) 149B",
        "seq 10 03:19:44.297 <- session/update user_message (sess_v2_1) 213B"])
    assert answer(conversation, "failures-demo") == '(no message of "capture.jsonl" matched; it holds 16)'


def test_show_messages_at_detail_3_gives_before_and_after_with_masked_values_masked(
        conversation: Conversation) -> None:
    text = answer(conversation, "rewrites-air")
    assert text.splitlines()[0] == (
        "seq 3 03:19:43.379 -> session/new id 1 204B->251B [rewrite: system-prompt] [redacted]")
    assert text.count('"value": "<redacted>"') == 2  # before and after
    assert '"append": "Follow the team style guide."' in text  # recorded with include_system_prompt
    assert "s3cret" not in text


def test_get_message_gives_the_record_as_stored(conversation: Conversation, captures: Path) -> None:
    stored = (captures / AIR).read_text().splitlines()[3]
    assert answer(conversation, "get-air-3") == stored


def test_search_is_case_insensitive_across_captures_and_never_finds_what_was_masked(
        conversation: Conversation) -> None:
    [hit] = [orjson.loads(line) for line in answer(conversation, "search-token").splitlines()]
    assert hit == {"capture": AIR, "seq": 3,
                   "summary": "03:19:43.379 -> session/new id 1 204B->251B [rewrite: system-prompt] [redacted]",
                   "excerpt": '…and":"db-mcp","args":[],"env":[{"name":"DB_TOKEN","value":"<redacted>"}]}]}}'}
    assert answer(conversation, "search-secret") == '(no message in 6 captures holds "s3cret")'
    assert answer(conversation, "search-prompt") == f'(no message in 6 captures holds "{DEMO_PROMPT}")'
    masked = [orjson.loads(line) for line in answer(conversation, "search-masked").splitlines()]
    assert [(m["capture"], m["seq"]) for m in masked] == [(DEMO, 5), (DEMO, 6)]
    assert answer(conversation, "search-outside") == f'(no message in 6 captures holds "{OUTSIDE_MARK}")'


def test_every_answer_is_bounded_and_says_how_to_get_the_rest(conversation: Conversation, captures: Path) -> None:
    stored = (captures / "big.jsonl").read_text().splitlines()[2]
    first = answer(conversation, "big-get")
    note = f"\n(characters 0 to 1000000 of {len(stored)}; the rest: get_message with offset=1000000)"
    assert first == stored[:1_000_000] + note
    assert answer(conversation, "big-get-rest") == stored[1_000_000:]

    shown = answer(conversation, "big-show").splitlines()
    assert shown[0] == "seq 1 13:46:40.500 -> session/new id 0 (s) 60B"
    assert shown[-1] == "(stopped at the answer's size limit after 1 entries; the rest: show_messages with offset=1)"
    rest = answer(conversation, "big-show-rest")
    body, note = rest.rsplit("\n", 1)
    assert body.startswith(f"seq 2 13:46:40.500 -> session/prompt id 1 (s) {BIG_TEXT + 100}B\n")
    assert len(body.encode()) == 1_000_000
    assert note == ("(the entry at offset 1 is cut at 1000000 bytes of text, more than one answer holds; "
                    "get_message gives a message's whole record, piece by piece)")
    [hit] = [orjson.loads(line) for line in answer(conversation, "big-search").splitlines()]
    assert (hit["seq"], len(hit["excerpt"])) == (2, 162)


@pytest.mark.parametrize(("key", "said"), [
    ("bad-capture", 'Error executing tool get_message: no capture named "nope.jsonl": list_captures gives their names'),
    ("bad-dotdot", 'Error executing tool show_messages: no capture named "../outside/secret.jsonl": '
                   "list_captures gives their names"),
    ("bad-absolute", 'Error executing tool find_problems: no capture named "/etc/passwd": list_captures gives their names'),
    ("bad-link", 'Error executing tool get_message: no capture named "outside.jsonl": list_captures gives their names'),
    ("bad-fifo", 'Error executing tool show_messages: no capture named "fifo.jsonl": list_captures gives their names'),
    ("bad-seq", 'Error executing tool get_message: capture "v1-legacy-air-meta.jsonl" has no message with seq 99 '
                "(its messages are seq 1 to 19)"),
    ("bad-seq-zero", "seq\n  Input should be greater than or equal to 1"),
    ("bad-limit", "limit\n  Input should be greater than or equal to 1"),
    ("bad-offset", "offset\n  Input should be greater than or equal to 0"),
    ("bad-detail", "detail\n  Input should be less than or equal to 3"),
    ("bad-direction", "direction\n  Input should be 'to-agent' or 'to-client'"),
    ("bad-type", "seq\n  Input should be a valid integer"),
    ("bad-missing", "seq\n  Field required"),
    ("bad-empty-text", "text\n  String should have at least 1 character"),
    ("bad-ignore", "Error executing tool diff_captures: ignore: 'params' is not a JSON pointer (RFC 6901: "
                   "starts with /)"),
    ("bad-diff-capture", 'Error executing tool diff_captures: no capture named "nope.jsonl": '
                         "list_captures gives their names"),
    ("bad-tool", "Unknown tool: rm_rf"),
])
def test_a_bad_argument_is_a_tool_error_that_says_so(conversation: Conversation, key: str, said: str) -> None:
    got = conversation.answers[key]
    assert got.error
    assert got.text == said if said.startswith(("Error", "Unknown")) else said in got.text


def test_the_server_answers_on_after_every_bad_argument(conversation: Conversation) -> None:
    assert answer(conversation, "after-all").splitlines()[0] == answer(conversation, "list").splitlines()[0]
