"""Relay under strict: a rule's failure, including a result that cannot be written, raises
and forwards nothing; and what the relay answers when the bridge stops itself."""

from __future__ import annotations

import pytest

from acp_bridge.core import PASS, Direction, Forward, Frame, Relay, Replace, Rewrite, Session, Verdict
from acp_bridge.core.messages import Unencodable
from acp_bridge.core.rewrites.base import Outcome
from acp_bridge.core.session import Pending
from tests.core.test_relay import Rename

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
NESTED = b"[" * 300 + b"]" * 300  # past the 254 levels orjson writes
PROMPT = b'{"jsonrpc":"2.0","id":1,"method":"p"}\n'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'


def stopped(id_: bytes = b"1") -> bytes:
    return b'{"jsonrpc":"2.0","id":' + id_ + b',"error":{"code":-32603,"message":"stopped"}}\n'


class MarkAnswers(Rewrite):
    name = "mark"

    def response(self, frame: Frame, request: Pending | None, session: Session) -> Replace:
        assert frame.msg is not None
        return Replace({**frame.msg, "result": {"marked": frame.msg.get("result")}})


class FailOnSecondAnswer(Rewrite):
    name = "fail-on-2"

    def response(self, frame: Frame, request: Pending | None, session: Session) -> Outcome:
        if frame.id == 2:
            raise RuntimeError("bug")
        return PASS


def test_a_rule_that_raises_on_an_answer_leaves_it_and_the_one_before_it_in_flight() -> None:
    """Under strict the read that holds them is not forwarded: the requests they answered
    must still get an answer when the bridge stops."""
    relay = Relay([FailOnSecondAnswer()], strict=True)
    relay.feed(A, PROMPT + b'{"jsonrpc":"2.0","id":2,"method":"p"}\n')
    with pytest.raises(RuntimeError, match=r"^bug$"):
        relay.feed(C, ANSWER + b'{"jsonrpc":"2.0","id":2,"result":{}}\n')
    assert [fwd.data for fwd in relay.fail_pending("stopped")] == [stopped(), stopped(b"2")]


def test_a_rewrite_too_deep_to_write_back_raises_under_strict_and_stays_in_flight() -> None:
    relay = Relay([Rename()], strict=True)
    raw = b'{"jsonrpc":"2.0","id":1,"method":"old","params":' + NESTED + b"}\n"
    with pytest.raises(Unencodable, match=r"^what the rules \(rename\) made of old #1 cannot be written back: "):
        relay.feed(A, raw)
    assert [p.method for p in relay.session.pending(A)] == ["old"]  # answered as the bridge stops


def test_an_answer_whose_rewrite_cannot_be_written_is_in_flight_again_under_strict() -> None:
    """Neither it nor the answer before it in the same read is forwarded: the requests
    they answered must still get an answer."""
    relay = Relay([MarkAnswers()], strict=True)
    relay.feed(A, PROMPT + b'{"jsonrpc":"2.0","id":2,"method":"p"}\n')
    with pytest.raises(Unencodable, match=r"made of the answer to p #2 cannot be written back"):
        relay.feed(C, ANSWER + b'{"jsonrpc":"2.0","id":2,"result":' + NESTED + b"}\n")
    assert [fwd.data for fwd in relay.fail_pending("stopped")] == [stopped(), stopped(b"2")]


class Look(Rewrite):
    name = "look"

    def request(self, frame: Frame, session: Session) -> Outcome:
        return PASS


def test_a_deep_message_no_rule_changes_passes_under_strict() -> None:
    """Strict asks the rules even about a message too deep to write (without strict they
    are not asked, and it fails open): only a result that cannot be written is a failure."""
    raw = b'{"jsonrpc":"2.0","id":1,"method":"n","params":' + NESTED + b"}\n"
    (fwd,) = Relay([Look()], strict=True).feed(A, raw)
    assert (fwd.verdict, fwd.data) == (Verdict.PASS, raw)


def test_answers_not_sent_leave_their_requests_in_flight() -> None:
    """The bridge stops without sending what the relay returned (a required capture could
    not record it): a response among it answered nobody, so its request is answered here."""
    relay = Relay(strict=True)
    relay.feed(A, PROMPT + b'{"jsonrpc":"2.0","id":2,"method":"p"}\n')
    unsent = relay.feed(C, ANSWER)
    assert relay.session.pending(A)[0].id == 2
    answers = relay.fail_pending("stopped", unsent=unsent, cut=False)
    assert [fwd.data for fwd in answers] == [stopped(b"2"), stopped()]


def test_answers_when_the_bridge_stops_inside_a_line_toward_the_client() -> None:
    """A long line was streaming toward the client: its answers neither wait for its end
    (it never comes) nor glue on to it."""
    relay = Relay(strict=True, max_line=64)
    relay.feed(A, PROMPT)
    head = relay.feed(C, b'{"long":"' + b"x" * 100)
    assert [f.verdict for f in head] == [Verdict.OPAQUE]
    assert [fwd.data for fwd in relay.fail_pending("stopped", cut=True)] == [b"\n" + stopped()]


def test_an_unsent_request_stays_in_flight_once() -> None:
    relay = Relay(strict=True)
    unsent: list[Forward] = relay.feed(A, PROMPT)
    assert [fwd.data for fwd in relay.fail_pending("stopped", unsent=unsent)] == [stopped()]
