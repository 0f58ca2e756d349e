"""The `[[rewrite]]` rule (core/rewrites/table.py), through a real Relay: what a table matches,
what it does, the triggers that leave other lines unparsed, and numbers kept as written; and
`Match`, its matcher, as a rule written in Python uses it (by hand and as a decorator)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from acp_bridge.config import RewriteConfig
from acp_bridge.core import Direction, Relay, Verdict
from acp_bridge.core.messages import Frame, Kind, classify
from acp_bridge.core.pointer import set_pointer
from acp_bridge.core.relay import scan_needle
from acp_bridge.core.rewrites.base import DROP, EVERY_LINE, Outcome, Replace, Rule, SessionFacts
from acp_bridge.core.rewrites.table import Match, TableRule, table_triggers, trigger_for
from acp_bridge.core.session import Pending

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


def update(kind: str, extra: str = "") -> bytes:
    return (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"'
            + kind.encode() + b'"' + extra.encode() + b"}}}\n")


USAGE = update("usage_update", ',"used":1e3,"size":123456789012345678901234567890')
CHUNK = update("agent_message_chunk", ',"content":{"type":"text","text":"hi"}')
PROMPT = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n'
PROMPT_N = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","n":1}}\n'


def relay(**table: Any) -> Relay:
    return Relay([TableRule(RewriteConfig(name="t", **table))], strict=True)


def out(table: dict[str, Any], direction: Direction, line: bytes) -> tuple[Verdict, Any]:
    fwd, *answer = relay(**table).feed(direction, line)
    if answer:  # a dropped request: its sender is answered (tests/core/test_answers.py)
        assert (fwd.verdict, [f.verdict for f in answer]) == (Verdict.DROP, [Verdict.EMIT])
    if fwd.verdict is Verdict.PASS:
        assert fwd.data is line  # untouched: the very bytes
        return fwd.verdict, None
    return fwd.verdict, orjson.loads(fwd.data) if fwd.data else b""


@pytest.mark.parametrize(("table", "direction", "line", "expected"), [
    # drop, by update kind and direction
    ({"update": "usage_update", "drop": True, "direction": "to-client"}, C, USAGE, (Verdict.DROP, b"")),
    ({"update": "usage_update", "drop": True, "direction": "to-client"}, A, USAGE, (Verdict.PASS, None)),
    ({"update": "usage_update", "drop": True}, C, CHUNK, (Verdict.PASS, None)),
    ({"update": "usage_update", "drop": True, "direction": "to-agent"}, A, USAGE, (Verdict.DROP, b"")),
    # method matches requests and notifications
    ({"method": "session/prompt", "remove": ["/params/prompt"]}, A, PROMPT,
     (Verdict.REWRITE, {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s"}})),
    ({"method": "session/new", "drop": True}, A, PROMPT, (Verdict.PASS, None)),
    # where: every pointer must equal its value, as JSON (true is not 1)
    ({"where": {"/params/update/content/text": "hi"}, "set": {"/params/_meta/seen": True}}, C, CHUNK,
     (Verdict.REWRITE, {**orjson.loads(CHUNK), "params": {**orjson.loads(CHUNK)["params"], "_meta": {"seen": True}}})),
    ({"where": {"/params/update/content/text": "ho"}, "drop": True}, C, CHUNK, (Verdict.PASS, None)),
    ({"where": {"/id": True}, "drop": True}, A, PROMPT, (Verdict.PASS, None)),
    ({"where": {"/id": 1.0}, "drop": True}, A, PROMPT, (Verdict.DROP, b"")),
    # a set that changes nothing, a remove of what is not there: the line as it came
    ({"method": "session/prompt", "set": {"/params/sessionId": "s"}}, A, PROMPT, (Verdict.PASS, None)),
    ({"method": "session/prompt", "remove": ["/params/nope"]}, A, PROMPT, (Verdict.PASS, None)),
    ({"method": "session/prompt", "set": {"/params/n": 1}}, A, PROMPT_N, (Verdict.PASS, None)),
    # a pointer through a non-object: the line as it came
    ({"method": "session/prompt", "set": {"/params/sessionId/x": 1}}, A, PROMPT, (Verdict.PASS, None)),
])
def test_what_a_table_does(table: dict[str, Any], direction: Direction, line: bytes, expected: Any) -> None:
    assert out(table, direction, line) == expected


@pytest.mark.parametrize(("value", "written"), [(1.0, b"1.0"), (True, b"true")])
def test_a_set_of_another_json_type_or_number_kind_changes_the_line(value: Any, written: bytes) -> None:
    """"Already so" is judged as the bridge writes JSON: 1.0 is not 1 and true is not 1 (a
    table asking for `n = 1.0` on `"n":1` was judged already so by Python's ==, and the
    client got `1`)."""
    (fwd,) = relay(method="session/prompt", set={"/params/n": value}).feed(A, PROMPT_N)
    assert (fwd.verdict, fwd.data) == (Verdict.REWRITE, PROMPT_N.replace(b'"n":1', b'"n":' + written))


def test_a_response_is_left_to_python_rules() -> None:
    r = relay(where={"/result/stopReason": "end_turn"}, drop=True)
    r.feed(A, PROMPT)
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n'
    assert [f.data for f in r.feed(C, answer)] == [answer]


def test_numbers_elsewhere_stay_as_written() -> None:
    """orjson would write 1e3 as 1000.0 and the 30-digit integer as a float."""
    (fwd,) = relay(update="usage_update", set={"/params/_meta/x": 1}).feed(C, USAGE)
    assert fwd.data == (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
                        b'{"sessionUpdate":"usage_update","used":1e3,"size":123456789012345678901234567890},'
                        b'"_meta":{"x":1}}}\n')


def test_lines_without_the_tables_trigger_are_not_parsed() -> None:
    (fwd,) = relay(update="usage_update", drop=True).feed(C, CHUNK)
    assert fwd.frame is None and fwd.data is CHUNK


def test_a_pointer_through_a_non_object_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    r = relay(method="session/prompt", set={"/params/sessionId/x": 1})
    with caplog.at_level(logging.WARNING, "acp_bridge.rules"):
        for _ in range(3):
            assert [f.verdict for f in r.feed(A, PROMPT)] == [Verdict.PASS]
    assert [rec.getMessage() for rec in caplog.records] == [
        "rule 't': /params/sessionId is a string, not an object: cannot set /params/sessionId/x in "
        "<Frame -> request session/prompt 90B>; it went on as it came (further ones are not reported)"]


@pytest.mark.parametrize(("text", "trigger"), [
    ("usage_update", b'"usage_update"'),
    ("session/update", b'update"'),  # "/" may be written "\/": the part after it, closed
    ("_x/a\\b", b'b"'),
    ("a/", None),
])
def test_trigger_for(text: str, trigger: bytes | None) -> None:
    assert trigger_for(text) == trigger


@pytest.mark.parametrize(("table", "triggers"), [
    ({"update": "usage_update", "method": "session/update"}, (b'"usage_update"',)),
    ({"method": "session/update"}, (b'update"',)),
    ({"where": {"/a": 1}}, EVERY_LINE),
    ({"method": "x/"}, EVERY_LINE),
])
def test_table_triggers(table: dict[str, Any], triggers: tuple[bytes, ...]) -> None:
    assert table_triggers(RewriteConfig(**table)) == triggers


def test_an_escaped_slash_in_the_method_still_matches() -> None:
    line = USAGE.replace(b"session/update", b"session\\/update")
    (fwd,) = relay(method="session/update", update="usage_update", drop=True).feed(C, line)
    assert fwd.verdict is Verdict.DROP


def test_a_run_finds_the_one_line_the_table_drops() -> None:
    """In a read long enough to travel as runs, the chunk-wide scan looks for `"usage_update`
    (the trigger less its closing quote: `scan_needle`), and the line it finds is checked
    whole: the lines around it go as runs, byte for byte, the same as line by line."""
    near = update("usage_updated")  # has the scan's needle, not the trigger: goes on as it came
    body = CHUNK * 40 + near + CHUNK * 40 + USAGE + CHUNK * 40
    for bulk in (True, False):
        r = Relay([TableRule(RewriteConfig(name="t", update="usage_update", drop=True))], strict=True, bulk=bulk)
        forwards = r.feed(C, body)
        assert b"".join(f.data for f in forwards) == CHUNK * 40 + near + CHUNK * 80
        assert [f.verdict for f in forwards if f.verdict is not Verdict.PASS] == [Verdict.DROP]
        if bulk:
            assert sum(f.untouched_lines for f in forwards) >= 2  # runs, not 122 lines one by one


def test_scan_needle() -> None:
    assert [scan_needle(t) for t in (b'"usage_update"', b'"id"', b"promptSuggestions", b"")] == [
        b'"usage_update', b'"id"', b"promptSuggestions", b""]


# -- Match: the tables' matcher, also for rules written in Python ----------------------------

RESULT = b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"paused"}}\n'


@pytest.mark.parametrize(("conditions", "direction", "line", "matched"), [
    ({}, C, CHUNK, True),
    ({}, A, PROMPT, True),
    ({"direction": "to-client"}, C, USAGE, True),
    ({"direction": "to-client"}, A, USAGE, False),
    ({"direction": "to-agent"}, A, USAGE, True),
    ({"direction": Direction.TO_CLIENT}, C, USAGE, True),
    ({"direction": Direction.TO_AGENT}, C, USAGE, False),
    ({"direction": "both"}, A, USAGE, True),
    ({"method": "session/update"}, C, USAGE, True),
    ({"method": "session/update"}, A, PROMPT, False),
    ({"method": "session/update"}, C, USAGE.replace(b"session/update", b"session\\/update"), True),
    ({"update": "usage_update"}, C, USAGE, True),
    ({"update": "usage_update"}, C, CHUNK, False),
    ({"update": "usage_update"}, A, PROMPT, False),  # no update at all
    ({"update": "usage_update", "method": "session/prompt"}, C, USAGE, False),  # every condition
    ({"where": {"/params/update/content/text": "hi"}}, C, CHUNK, True),
    ({"where": {"/params/update/content/text": "hi", "/params/sessionId": "t"}}, C, CHUNK, False),
    ({"where": {"/id": True}}, A, PROMPT, False),  # true is not 1
    ({"where": {"/id": 1.0}}, A, PROMPT, True),
    ({"where": {"/params/nope": None}}, A, PROMPT, False),  # missing is not null
    ({"where": {"/result/stopReason": "paused"}}, C, RESULT, True),
    ({"method": "session/prompt"}, C, RESULT, False),  # a response has no method
    ({}, C, b'{"jsonrpc":"2.0","method":\n', False),  # no message
])
def test_what_a_match_matches(conditions: dict[str, Any], direction: Direction, line: bytes, matched: bool) -> None:
    """The same row as a Match by hand and as a drop table (requests and notifications:
    responses are for Python rules), which is built on the same class."""
    assert Match(**conditions).matches(classify(direction, line)) is matched
    frame = classify(direction, line)
    if frame.kind in (Kind.REQUEST, Kind.NOTIFICATION) and not isinstance(conditions.get("direction"), Direction):
        table = TableRule(RewriteConfig(name="t", drop=True, **conditions))
        assert isinstance(table.match, Match)
        assert out({**conditions, "drop": True}, direction, line)[0] is (Verdict.DROP if matched else Verdict.PASS)


@pytest.mark.parametrize(("conditions", "triggers", "shown"), [
    ({"update": "usage_update", "method": "session/update"}, (b'"usage_update"',),
     "Match(direction='both', method='session/update', update='usage_update')"),
    ({"method": "session/update", "direction": "to-client"}, (b'update"',),
     "Match(direction='to-client', method='session/update')"),
    ({"where": {"/a~1b": 1}, "direction": Direction.TO_AGENT}, EVERY_LINE, "Match(direction='to-agent', where={'/a~1b': 1})"),
])
def test_a_match_s_triggers_and_repr(conditions: dict[str, Any], triggers: tuple[bytes, ...], shown: str) -> None:
    match = Match(**conditions)
    assert (match.triggers, repr(match)) == (triggers, shown)


@pytest.mark.parametrize(("conditions", "error"), [
    ({"direction": "to-editor"}, "direction 'to-editor' is not one of to-client, to-agent, both or a Direction"),
    ({"direction": ["to-client"]}, "direction ['to-client'] is not one of to-client, to-agent, both or a Direction"),
    ({"update": 5}, "update 5 is not a string"),
    ({"method": b"session/update"}, "method b'session/update' is not a string"),
    ({"where": {"params/x": 1}}, "'params/x' is not a JSON pointer (RFC 6901: starts with /)"),
])
def test_a_match_that_cannot_be_is_refused_when_made(conditions: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError) as raised:
        Match(**conditions)
    assert str(raised.value) == error


class Decorated(Rule):
    """Each hook decorated: called only with what matches, returning nothing (passes) or a drop."""

    def __init__(self) -> None:
        self.saw: list[str] = []

    @Match(direction="to-client", update="usage_update")
    def notification(self, msg: Frame, session: SessionFacts) -> Outcome:
        self.saw.append("usage")
        return DROP

    @Match(method="session/prompt")
    def request(self, msg: Frame, session: SessionFacts) -> Outcome:
        self.saw.append(f"prompt {msg.id}")
        return None

    @Match(where={"/result/stopReason": "paused"})
    def response(self, msg: Frame, request: Pending, session: SessionFacts) -> Outcome:
        self.saw.append(f"paused, answering {request.method}")
        return Replace(set_pointer(msg.msg, "/result/stopReason", "end_turn"))


def test_a_decorated_hook_sees_only_what_matches_and_brings_its_triggers() -> None:
    rule = Decorated()
    assert (rule.triggers, rule.name, Decorated.notification.__name__) == ((b'"usage_update"',), "Decorated", "notification")
    r = Relay([rule], strict=True)
    new = b'{"jsonrpc":"2.0","id":0,"method":"session/new","params":{}}\n'
    sent = [(f.verdict, f.data) for line, d in [(new, A), (PROMPT, A), (CHUNK, C), (USAGE, C), (USAGE, A),
                                                (b'{"jsonrpc":"2.0","id":0,"result":{"stopReason":"paused"}}\n', C),
                                                (RESULT, C)]
            for f in r.feed(d, line)]
    assert sent == [(Verdict.PASS, new), (Verdict.PASS, PROMPT), (Verdict.PASS, CHUNK), (Verdict.DROP, b""),
                    (Verdict.PASS, USAGE),
                    (Verdict.REWRITE, b'{"jsonrpc":"2.0","id":0,"result":{"stopReason":"end_turn"}}\n'),
                    (Verdict.REWRITE, b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n')]
    assert rule.saw == ["prompt 1", "usage", "paused, answering session/new", "paused, answering session/prompt"]


def test_a_rule_s_own_triggers_win_over_its_match_s() -> None:
    class Own(Rule):
        triggers = (b'"sessionUpdate"',)

        @Match(update="usage_update")
        def notification(self, msg: Frame, session: SessionFacts) -> Outcome:
            return DROP

    assert Own.triggers == (b'"sessionUpdate"',)


def test_an_undecorated_notification_hook_still_needs_triggers() -> None:
    with pytest.raises(TypeError, match="overrides notification\\(\\) but declares no triggers"):
        class Bare(Rule):
            def notification(self, msg: Frame, session: SessionFacts) -> Outcome:
                return DROP
