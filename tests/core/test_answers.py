"""A request the bridge will not deliver gets an answer: a rule that drops a request (a
`[[rewrite]]` table or Python), or the answer to one, makes the relay answer its sender with
a JSON-RPC error naming the rule, said once on the log; the pending table stays true.
Dropped notifications stay silent."""

from __future__ import annotations

import logging

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.config import RewriteConfig
from acp_bridge.core import DROP, PASS, Connection, Direction, Emit, Frame, Relay, Replace, Rule, Verdict
from acp_bridge.core.rewrites.base import Outcome
from acp_bridge.core.rewrites.table import TableRule
from acp_bridge.core.session import Pending

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


class DropAll(Rule):
    """Drops every message of every kind it is shown."""

    name = "drop-all"
    triggers = (b'"note"',)

    def request(self, frame: Frame, session: Connection) -> Outcome:
        return DROP

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        return DROP

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        return DROP


class AnswerItself(Rule):
    """Drops a request and answers it itself, as the system-prompt rule's `error` mode does."""

    name = "answer-itself"

    def request(self, frame: Frame, session: Connection) -> Outcome:
        answer = {"jsonrpc": "2.0", "id": frame.id, "error": {"code": -32602, "message": "no"}}
        return Replace(None, then=(Emit(frame.direction.reverse, answer),))


class SendOnRenamed(Rule):
    """Drops a request and sends it on under another method, with its id."""

    name = "send-on-renamed"

    def request(self, frame: Frame, session: Connection) -> Outcome:
        assert frame.msg is not None
        return Replace(None, then=(Emit(frame.direction, {**frame.msg, "method": "renamed"}),))


class DropAnswers(Rule):
    name = "drop-answers"

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        return DROP if request.method == "p" else PASS


def error(id_: bytes, rule: str, what: str) -> bytes:
    return (b'{"jsonrpc":"2.0","id":' + id_ + b',"error":{"code":-32603,"message":"acp-bridge: rule \''
            + rule.encode() + b"' dropped " + what.encode() + b'","data":{"rule":"' + rule.encode() + b'"}}}\n')


def shown(relay: Relay, direction: Direction, line: bytes) -> list[tuple[Direction, Verdict, bytes, tuple[str, ...]]]:
    return [(f.direction, f.verdict, f.data, f.rules) for f in relay.feed(direction, line)]


REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"p"}\n'
BIG_ID = b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"p"}\r\n'


@pytest.mark.parametrize("strict", [True, False])
def test_a_dropped_client_request_is_answered_and_no_longer_pending(strict: bool) -> None:
    relay = Relay([DropAll()], strict=strict)
    assert shown(relay, A, REQUEST) == [
        (A, Verdict.DROP, b"", ("drop-all",)),
        (C, Verdict.EMIT, error(b"1", "drop-all", "this request: it was not sent to the agent"), ("drop-all",)),
    ]
    assert relay.session.pending(A) == []
    assert relay.fail_pending("agent exited") == []  # answered once, not again as the agent goes


def test_the_answer_carries_the_request_it_answers() -> None:
    """For the capture (method, latency) and the telemetry (the request's span ends)."""
    relay = Relay([DropAll()], strict=True)
    drop, answer = relay.feed(A, REQUEST, now=5.0)
    assert drop.request is not None and answer.request is drop.request
    assert (answer.request.method, answer.request.at) == ("p", 5.0)


def test_a_dropped_agent_request_is_answered_toward_the_agent() -> None:
    relay = Relay([DropAll()], strict=True)
    assert shown(relay, C, b'{"jsonrpc":"2.0","id":"r","method":"fs/read_text_file"}\n') == [
        (C, Verdict.DROP, b"", ("drop-all",)),
        (A, Verdict.EMIT, error(b'"r"', "drop-all", "this request: it was not sent to the client"), ("drop-all",)),
    ]
    assert relay.session.pending(C) == []


def test_the_answer_keeps_the_id_as_written_and_the_line_terminator() -> None:
    relay = Relay([DropAll()], strict=True)
    (_, emitted) = relay.feed(A, BIG_ID)
    assert emitted.data == error(b"123456789012345678901234567890", "drop-all",
                                 "this request: it was not sent to the agent")[:-1] + b"\r\n"


def test_a_dropped_answer_is_replaced_by_an_error_for_whoever_asked() -> None:
    relay = Relay([DropAnswers()], strict=True)
    relay.feed(A, REQUEST + b'{"jsonrpc":"2.0","id":2,"method":"q"}\n')
    assert shown(relay, C, b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n') == [
        (C, Verdict.DROP, b"", ("drop-answers",)),
        (C, Verdict.EMIT, error(b"1", "drop-answers", "the agent's answer to this request (p)"), ("drop-answers",)),
    ]
    assert [p.id for p in relay.session.pending(A)] == [2]  # paired once: the other is still in flight
    assert [f.data for f in relay.fail_pending("stopped")] == [
        b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"stopped"}}\n']


def test_a_dropped_client_answer_is_replaced_by_an_error_for_the_agent() -> None:
    relay = Relay([DropAnswers()], strict=True)
    relay.feed(C, b'{"jsonrpc":"2.0","id":7,"method":"p"}\n')
    assert shown(relay, A, b'{"jsonrpc":"2.0","id":7,"result":{}}\n') == [
        (A, Verdict.DROP, b"", ("drop-answers",)),
        (A, Verdict.EMIT, error(b"7", "drop-answers", "the client's answer to this request (p)"), ("drop-answers",)),
    ]
    assert relay.session.pending(C) == []


def test_a_rule_that_answers_what_it_drops_is_not_answered_twice() -> None:
    relay = Relay([AnswerItself()], strict=True)
    assert shown(relay, A, REQUEST) == [
        (A, Verdict.DROP, b"", ("answer-itself",)),
        (C, Verdict.EMIT, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}\n', ("answer-itself",)),
    ]


def test_a_request_sent_on_in_another_form_is_not_answered() -> None:
    relay = Relay([SendOnRenamed()], strict=True)
    assert shown(relay, A, REQUEST) == [
        (A, Verdict.DROP, b"", ("send-on-renamed",)),
        (A, Verdict.EMIT, b'{"jsonrpc":"2.0","id":1,"method":"renamed"}\n', ("send-on-renamed",)),
    ]


def test_an_emit_with_another_id_or_toward_the_other_side_is_no_answer() -> None:
    class Unrelated(Rule):
        name = "unrelated"

        def request(self, frame: Frame, session: Connection) -> Outcome:
            return Replace(None, then=(Emit(C, {"jsonrpc": "2.0", "id": "1", "result": {}}),
                                       Emit(A, {"jsonrpc": "2.0", "id": 1, "result": {}})))

    out = shown(Relay([Unrelated()], strict=True), A, REQUEST)
    assert out[1] == (C, Verdict.EMIT, error(b"1", "unrelated", "this request: it was not sent to the agent"),
                      ("unrelated",))


def test_dropped_notifications_and_unpaired_answers_stay_silent(caplog: pytest.LogCaptureFixture) -> None:
    relay = Relay([DropAll()], strict=True)
    with caplog.at_level(logging.WARNING, "acp_bridge.relay"):
        assert shown(relay, C, b'{"jsonrpc":"2.0","method":"note"}\n') == [(C, Verdict.DROP, b"", ("drop-all",))]
        assert shown(relay, C, b'{"jsonrpc":"2.0","id":5,"result":{}}\n') == [
            (C, Verdict.PASS, b'{"jsonrpc":"2.0","id":5,"result":{}}\n', ())]  # unpaired: no rule asked
    assert caplog.records == []


def test_each_rule_that_drops_a_request_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    relay = Relay([DropAll()], strict=True)
    with caplog.at_level(logging.WARNING, "acp_bridge.relay"):
        for id_ in range(3):
            relay.feed(A, b'{"jsonrpc":"2.0","id":%d,"method":"p"}\n' % id_)
    assert [rec.getMessage() for rec in caplog.records] == [
        "rule 'drop-all' dropped the client's request p id 0; the bridge answered it with an error naming "
        "the rule, so that the client does not wait for ever (further ones by this rule are not reported)"]


def test_a_table_that_drops_a_request_names_itself_in_the_answer() -> None:
    relay = Relay([TableRule(RewriteConfig(name="no-p", method="p", drop=True))], strict=True)
    assert shown(relay, A, REQUEST)[1] == (
        C, Verdict.EMIT, error(b"1", "no-p", "this request: it was not sent to the agent"), ("no-p",))


class DropSome(Rule):
    """Drops the requests and the answers whose ids it is given."""

    name = "drop-some"

    def __init__(self, requests: set[int], answers: set[int]) -> None:
        self.requests, self.answers = requests, answers

    def request(self, frame: Frame, session: Connection) -> Outcome:
        return DROP if frame.id in self.requests else PASS

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        return DROP if frame.id in self.answers else PASS


@given(st.integers(1, 8), st.sets(st.integers(0, 7)), st.sets(st.integers(0, 7)), st.sets(st.integers(0, 7)),
       st.booleans())
def test_every_client_request_gets_exactly_one_answer(count: int, dropped: set[int], answered: set[int],
                                                      answer_dropped: set[int], strict: bool) -> None:
    """Whatever the rule drops, and whichever the agent answers before it goes: each client
    request gets one answer, from the agent, for a drop, or as the agent goes."""
    relay = Relay([DropSome(dropped, answer_dropped)], strict=strict)
    out = relay.feed(A, b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"p"}\n' % i for i in range(count)))
    for i in sorted((answered & set(range(count))) - dropped):  # the agent answers only what it got
        out += relay.feed(C, b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % i)
    out += relay.fail_pending("gone")
    to_client = [orjson.loads(f.data) for f in out if f.direction is C and f.data]
    assert sorted(msg["id"] for msg in to_client) == list(range(count))
    assert relay.session.pending(A) == []
