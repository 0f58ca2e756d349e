"""The relay as a link of a proxy chain: a client's batch, or request whose method is no
string, cannot go in an envelope, and is answered at once toward the client, as JSON-RPC 2.0
answers it; everything else goes on as before, byte for byte."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core import Direction, Forward, Relay, Verdict
from acp_bridge.core.uncarried import BATCH_ANSWER, NO_BATCH, NO_METHOD
from tests.core.json_values import JSON_VALUES, encoded

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
BIG = b"1" * 100


def chain_relay() -> Relay:
    relay = Relay()
    relay.as_chain_link()
    return relay


def error(id_: bytes, message: str = NO_BATCH, code: int = -32600) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + id_ + b',"error":{"code":%d,"message":' % code + json.dumps(message).encode() + b"}}"


def outcome(forwards: list[Forward]) -> list[tuple[Direction, Verdict, bytes]]:
    return [(f.direction, f.verdict, f.data) for f in forwards]


@pytest.mark.parametrize(("line", "answer"), [
    pytest.param(b"[]\n", error(b"null") + b"\n", id="empty-one-error-null-id"),
    pytest.param(b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b","params":[]}]\n', None,
                 id="notifications-only-nothing"),
    pytest.param(b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"2.0","id":"x","method":"c"}]\n',
                 b"[" + error(b"1") + b"," + error(b'"x"') + b"]\n", id="requests-not-notifications"),
    pytest.param(b'[[{"jsonrpc":"2.0","id":1,"method":"a"}]]\n', b"[" + error(b"null") + b"]\n", id="nested-batch"),
    pytest.param(b'[1,"x",{},{"id":5}]\n', b"[" + b",".join([error(b"null")] * 3 + [error(b"5")]) + b"]\n",
                 id="no-messages-each-an-error"),
    pytest.param(b'[{"jsonrpc":"2.0","id":' + BIG + b',"method":"a"},{"id":1.50,"method":"b"},{"id":-0.0,"method":"c"}]\r\n',
                 b"[" + error(BIG) + b"," + error(b"1.50") + b"," + error(b"-0.0") + b"]\r\n", id="ids-as-written-crlf"),
    pytest.param(b' [ {"jsonrpc":"2.0", "id":2, "method":"a"} ] \n', b"[" + error(b"2") + b"]\n", id="spaced"),
    pytest.param(b'[{"jsonrpc":"2.0","id":"\\ud83d","method":"a"}]\n', b"[" + error(b'"\\ud83d"') + b"]\n",
                 id="lone-surrogate-id"),
    pytest.param(b'{"jsonrpc":"2.0","id":' + BIG + b',"method":7}\n', error(BIG, NO_METHOD) + b"\n", id="method-a-number"),
    pytest.param(b'{"jsonrpc":"2.0","id":"m","method":null,"params":{}}\n', error(b'"m"', NO_METHOD) + b"\n",
                 id="method-null"),
    pytest.param(b'{"jsonrpc":"2.0","method":["a"],"params":"\\u0069"}\n', None, id="a-notification-nothing"),
    pytest.param(b'{"jsonrpc":"2.0","id":' + b"[" * 300 + b"]" * 300 + b',"method":7}\n', error(b"null", NO_METHOD) + b"\n",
                 id="an-id-nested-past-what-can-be-written"),
])
def test_what_no_envelope_carries_is_dropped_and_answered_toward_the_client(line: bytes, answer: bytes | None) -> None:
    relay = chain_relay()
    expected = [(A, Verdict.DROP, b"")] + ([(C, Verdict.EMIT, answer)] if answer is not None else [])
    assert outcome(relay.feed(A, line)) == expected
    assert relay.fail_pending("gone") == []  # answered once: nothing of it is in flight


def test_a_notification_whose_method_is_no_string_is_not_parsed_on_the_hot_path() -> None:
    """No "id", no escape: it travels unparsed as before, and the link drops it (said once
    there, `ProxyLink.to_successor`); nothing is owed to it."""
    line = b'{"jsonrpc":"2.0","method":["a"]}\n'
    assert outcome(chain_relay().feed(A, line)) == [(A, Verdict.PASS, line)]


def test_a_torn_last_batch_is_answered_as_a_whole_one_is() -> None:
    relay = chain_relay()
    assert relay.feed(A, b'[{"jsonrpc":"2.0","id":1,"method":"a"}]') == []
    assert outcome(relay.feed_eof(A)) == [(A, Verdict.DROP, b""), (C, Verdict.EMIT, b"[" + error(b"1") + b"]\n")]


def test_an_answer_after_a_torn_line_toward_the_client_starts_a_line_of_its_own() -> None:
    relay = chain_relay()
    relay.feed(C, b'{"jsonrpc":"2.0","method":"a"}')
    relay.feed_eof(C)
    assert outcome(relay.feed(A, b"[]\n")) == [(A, Verdict.DROP, b""), (C, Verdict.EMIT, b"\n" + error(b"null") + b"\n")]


def test_a_batch_of_ten_thousand_requests_is_one_answer_of_ten_thousand_errors() -> None:
    batch = b"[" + b",".join(b'{"jsonrpc":"2.0","id":%d,"method":"a"}' % i for i in range(10_000)) + b"]\n"
    answer = chain_relay().feed(A, batch)[1].data
    assert answer == b"[" + b",".join(error(b"%d" % i) for i in range(10_000)) + b"]\n"


def test_the_clients_answer_in_a_batch_answers_the_agents_request_with_an_error() -> None:
    relay = chain_relay()
    relay.feed(C, b'{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{}}\n')
    got = relay.feed(A, b'[{"jsonrpc":"2.0","id":3,"result":{}},{"jsonrpc":"2.0","id":9,"error":{}}]\n')
    assert outcome(got) == [(A, Verdict.DROP, b""), (A, Verdict.EMIT, error(b"3", BATCH_ANSWER, -32603) + b"\n")]
    assert relay.session.pending(C) == []  # id 9 answered nothing: no answer for it


def test_each_kind_is_said_once_however_many_lines(caplog: pytest.LogCaptureFixture) -> None:
    relay = chain_relay()
    with caplog.at_level(logging.WARNING, "acp_bridge.chain"):
        for _ in range(1000):
            relay.feed(A, b'[{"jsonrpc":"2.0","id":1,"method":"a"}]\n{"jsonrpc":"2.0","id":1,"method":1}\n')
    assert [record.getMessage().split(" cannot ")[0] for record in caplog.records] == [
        "a batch from the client", "a message from the client whose method is not a string"]


@pytest.mark.parametrize("line", [
    b'[{"jsonrpc":"2.0","id":1,"method":"a"}]\n',
    b'{"jsonrpc":"2.0","id":1,"method":7}\n',
])
def test_outside_a_chain_and_toward_the_client_they_go_on_as_they_came(line: bytes) -> None:
    assert outcome(Relay().feed(A, line)) == [(A, Verdict.OTHER, line)]
    assert outcome(chain_relay().feed(C, line)) == [(C, Verdict.OTHER, line)]


@given(id_=st.none() | st.integers(-(10**30), 10**30) | st.text(max_size=4), method=st.text(max_size=8),
       params=JSON_VALUES, spacing=st.integers(0, 2), direction=st.sampled_from([A, C]))
def test_a_message_an_envelope_carries_goes_on_as_it_would_outside_a_chain(
        id_: Any, method: str, params: Any, spacing: int, direction: Direction) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        message["id"] = id_
    line = encoded(message, spacing) + b"\n"
    assert outcome(chain_relay().feed(direction, line)) == outcome(Relay().feed(direction, line))


def test_a_batch_over_the_parse_limit_streams_on_and_its_requests_are_answered_at_its_end() -> None:
    """The link drops its pieces (no envelope carries a batch); the requests the member scan
    found are answered as the line ends, not at the conductor's EOF."""
    relay = Relay(max_line=1024)
    relay.as_chain_link()
    relay.feed(C, b'{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{}}\n')
    batch = (b'[{"jsonrpc":"2.0","id":' + BIG + b',"method":"a","params":{"text":"' + b"x" * 4096 + b'"}},'
             b'{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"2.0","id":"s","method":"c"},{"jsonrpc":"2.0","id":3,"result":{}}]\n')
    got = relay.feed(A, batch[:2000]) + relay.feed(A, batch[2000:])
    assert b"".join(f.data for f in got if f.verdict is Verdict.OPAQUE) == batch
    assert outcome([f for f in got if f.verdict is not Verdict.OPAQUE]) == [
        (C, Verdict.EMIT, b"[" + error(BIG) + b"," + error(b'"s"') + b"]\n"),
        (A, Verdict.EMIT, error(b"3", BATCH_ANSWER, -32603) + b"\n")]
    assert relay.fail_pending("gone") == []
