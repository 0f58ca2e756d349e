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


# -- what goes on is what is in flight --------------------------------------------------------


class Notify(Rule):
    """Sends each request on as a notification (its id taken away)."""

    name = "notify"

    def request(self, frame: Frame, session: Connection) -> Outcome:
        assert frame.msg is not None
        return Replace({k: v for k, v in frame.msg.items() if k != "id"})


class NotifyAndAnswer(Rule):
    """Sends each request on as a notification and answers its sender itself."""

    name = "notify-and-answer"

    def request(self, frame: Frame, session: Connection) -> Outcome:
        assert frame.msg is not None
        answer = {"jsonrpc": "2.0", "id": frame.id, "result": {}}
        return Replace({k: v for k, v in frame.msg.items() if k != "id"}, then=(Emit(frame.direction.reverse, answer),))


class Remap(Rule):
    """Gives each client request the id 1000 higher on its way to the agent, and its answer
    the client's id back (`request.id`: the id its sender gave it)."""

    name = "remap"

    def request(self, frame: Frame, session: Connection) -> Outcome:
        assert frame.msg is not None
        return Replace({**frame.msg, "id": frame.id + 1000}) if frame.direction is A else PASS

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        assert frame.msg is not None
        return Replace({**frame.msg, "id": request.id}) if frame.direction is C else PASS


def notified(id_: bytes, rule: str) -> bytes:
    return (b'{"jsonrpc":"2.0","id":' + id_ + b',"error":{"code":-32603,"message":"acp-bridge: rule \''
            + rule.encode() + b"' sent this request on as a notification: the agent will not answer it\","
            b'"data":{"rule":"' + rule.encode() + b'"}}}\n')


@pytest.mark.parametrize("strict", [True, False])
def test_a_request_sent_on_as_a_notification_is_answered_as_a_drop(strict: bool) -> None:
    """Nobody will answer a notification: for its sender the request was dropped. It was
    left in flight for ever (1,000 requests, 1,000 entries in the pending table), and as
    the agent went the bridge answered them all, long after."""
    relay = Relay([Notify()], strict=strict)
    assert shown(relay, A, REQUEST) == [
        (A, Verdict.REWRITE, b'{"jsonrpc":"2.0","method":"p"}\n', ("notify",)),
        (C, Verdict.EMIT, notified(b"1", "notify"), ("notify",)),
    ]
    out = relay.feed(A, b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"p"}\n' % i for i in range(2, 1002)))
    assert [f.data for f in out if f.direction is C] == [notified(b"%d" % i, "notify") for i in range(2, 1002)]
    assert relay.statistics().pending_to_agent == 0
    assert relay.fail_pending("agent exited") == []


def test_a_request_sent_on_as_a_notification_and_answered_by_its_rule_is_answered_once() -> None:
    relay = Relay([NotifyAndAnswer()], strict=True)
    assert shown(relay, A, REQUEST) == [
        (A, Verdict.REWRITE, b'{"jsonrpc":"2.0","method":"p"}\n', ("notify-and-answer",)),
        (C, Verdict.EMIT, b'{"jsonrpc":"2.0","id":1,"result":{}}\n', ("notify-and-answer",)),
    ]
    assert relay.statistics().pending_to_agent == 0
    assert relay.fail_pending("agent exited") == []


def test_a_request_whose_id_a_rule_changed_is_in_flight_under_the_id_that_went_out() -> None:
    """The agent answers the id it was sent: that answer pairs (the rule maps it back to
    the client's id), and the bridge's own answer as the agent goes carries the client's
    id. The entry under the client's id was never paired: it stayed for ever, and as the
    agent went the client got an answer to 1 it already had."""
    relay = Relay([Remap()], strict=True)
    assert shown(relay, A, REQUEST + b'{"jsonrpc":"2.0","id":2,"method":"p"}\n') == [
        (A, Verdict.REWRITE, b'{"jsonrpc":"2.0","id":1001,"method":"p"}\n', ("remap",)),
        (A, Verdict.REWRITE, b'{"jsonrpc":"2.0","id":1002,"method":"p"}\n', ("remap",)),
    ]
    assert shown(relay, C, b'{"jsonrpc":"2.0","id":1001,"result":{}}\n') == [
        (C, Verdict.REWRITE, b'{"jsonrpc":"2.0","id":1,"result":{}}\n', ("remap",))]
    assert [f.data for f in relay.fail_pending("agent exited")] == [
        b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"agent exited"}}\n']
    assert relay.statistics().pending_to_agent == 0
    for i in range(3, 1003):  # answered as they come: nothing stays behind
        relay.feed(A, b'{"jsonrpc":"2.0","id":%d,"method":"p"}\n' % i)
    assert relay.statistics().pending_to_agent == 0  # the agent is gone: each answered by the bridge


def test_remapped_requests_answered_by_the_agent_leave_nothing_in_flight() -> None:
    relay = Relay([Remap()], strict=True)
    for i in range(1000):
        relay.feed(A, b'{"jsonrpc":"2.0","id":%d,"method":"p"}\n' % i)
        (fwd,) = relay.feed(C, b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % (i + 1000))
        assert fwd.data == b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % i
    assert relay.statistics().pending_to_agent == 0
    assert relay.fail_pending("agent exited") == []


def test_a_request_sent_on_by_an_emit_stays_in_flight() -> None:
    """A rule that drops a request and sends it on in another form, with its id: what went
    to the agent is in flight, and answered by the bridge if the agent goes first. It was
    forgotten: the client waited for ever."""
    relay = Relay([SendOnRenamed()], strict=True)
    relay.feed(A, REQUEST)
    assert [(p.id, p.method) for p in relay.session.pending(A)] == [(1, "p")]
    assert [f.data for f in relay.fail_pending("agent exited")] == [
        b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"agent exited"}}\n']
    relay = Relay([SendOnRenamed()], strict=True)
    relay.feed(A, REQUEST)
    assert shown(relay, C, b'{"jsonrpc":"2.0","id":1,"result":{}}\n') == [
        (C, Verdict.PASS, b'{"jsonrpc":"2.0","id":1,"result":{}}\n', ())]
    assert relay.statistics().pending_to_agent == 0


def test_a_rule_that_changes_the_id_and_answers_the_sender_itself_is_not_answered_again() -> None:
    class OwnRequest(Rule):
        name = "own-request"

        def request(self, frame: Frame, session: Connection) -> Outcome:
            assert frame.msg is not None
            mine = {**frame.msg, "id": "mine"}
            return Replace(mine, then=(Emit(C, {"jsonrpc": "2.0", "id": frame.id, "result": {}}),))

    relay = Relay([OwnRequest()], strict=True)
    assert [f.data for f in relay.feed(A, REQUEST)] == [
        b'{"jsonrpc":"2.0","id":"mine","method":"p"}\n', b'{"jsonrpc":"2.0","id":1,"result":{}}\n']
    assert relay.statistics().pending_to_agent == 0
    assert relay.fail_pending("agent exited") == []


ACTIONS = ("pass", "drop", "notify", "notify-and-answer", "remap", "send-on", "answer")


class EachItsWay(Rule):
    """Does to client request `id` what `ways[id]` says (ACTIONS), and maps a remapped
    request's answer back."""

    name = "each"

    def __init__(self, ways: dict[int, str]) -> None:
        self.ways = ways

    def request(self, frame: Frame, session: Connection) -> Outcome:
        msg = frame.msg
        assert msg is not None and isinstance(frame.id, int)
        way = self.ways.get(frame.id, "pass")
        answer = Emit(C, {"jsonrpc": "2.0", "id": frame.id, "result": {"by": "rule"}})
        notification = {k: v for k, v in msg.items() if k != "id"}
        outcomes: dict[str, Outcome] = {
            "pass": PASS, "drop": DROP, "notify": Replace(notification),
            "notify-and-answer": Replace(notification, then=(answer,)),
            "remap": Replace({**msg, "id": frame.id + 1000}),
            "send-on": Replace(None, then=(Emit(A, {**msg, "method": "renamed"}),)),
            "answer": Replace(None, then=(answer,)),
        }
        return outcomes[way]

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        assert frame.msg is not None
        return Replace({**frame.msg, "id": request.id}) if frame.id != request.id else PASS


@given(st.integers(1, 8), st.dictionaries(st.integers(0, 7), st.sampled_from(ACTIONS)), st.sets(st.integers(0, 1007)),
       st.booleans())
def test_every_client_request_gets_exactly_one_answer_whatever_the_rule_makes_of_it(
        count: int, ways: dict[int, str], answered: set[int], strict: bool) -> None:
    """Passed, dropped, sent on as a notification, under another id, in another form, or
    answered by the rule: each client request gets one answer (the agent's, the rule's, or
    the bridge's for a drop or as the agent goes), under its own id, and nothing stays in
    flight."""
    relay = Relay([EachItsWay(ways)], strict=strict)
    out = relay.feed(A, b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"p"}\n' % i for i in range(count)))
    got = [orjson.loads(f.data) for f in out if f.direction is A and f.data]
    for msg in got:  # the agent answers some of the requests it got, under the id it got
        if "id" in msg and msg["id"] in answered:
            out += relay.feed(C, b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % msg["id"])
    out += relay.fail_pending("gone")
    to_client = [orjson.loads(f.data) for f in out if f.direction is C and f.data]
    assert sorted(msg["id"] for msg in to_client) == list(range(count))
    assert relay.statistics().pending_to_agent == 0


def test_a_rule_that_sends_requests_on_as_notifications_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    class Later(Rule):  # changes the notification after `notify` made it: `notify` is named
        name = "later"

        def request(self, frame: Frame, session: Connection) -> Outcome:
            assert frame.msg is not None
            return Replace({**frame.msg, "params": {}})

    relay = Relay([Notify(), Later()], strict=True)
    with caplog.at_level(logging.WARNING, "acp_bridge.relay"):
        for id_ in range(3):
            out = relay.feed(A, b'{"jsonrpc":"2.0","id":%d,"method":"p"}\n' % id_)
            assert [(f.data, f.rules) for f in out] == [
                (b'{"jsonrpc":"2.0","method":"p","params":{}}\n', ("notify", "later")),
                (notified(b"%d" % id_, "notify"), ("notify", "later"))]
    assert [rec.getMessage() for rec in caplog.records] == [
        "rule 'notify' sent the client's request p id 0 on as a notification; the bridge answered it with an "
        "error naming the rule, so that the client does not wait for ever (further ones by this rule are not "
        "reported)"]
