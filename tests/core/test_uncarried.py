"""The relay as a link of a proxy chain: a client's batch, or request whose method is no
string, cannot go in an envelope, and is answered at once toward the client, as JSON-RPC 2.0
answers it; everything else goes on as before, byte for byte."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core import Direction, Forward, Relay, Verdict
from acp_bridge.core.lines import LineSplitter
from acp_bridge.core.proxy_link import ProxyLink
from acp_bridge.core.proxy_wire import OFFICIAL
from acp_bridge.core.uncarried import BATCH_ANSWER, NO_BATCH, NO_METHOD, NO_ORDER
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


def long_relay(head: int = 100) -> Relay:
    """A chain link's relay that reads a long line's first `head` bytes as the link does."""
    relay = Relay(max_line=64)
    relay.as_chain_link(head)
    return relay


def through(relay: Relay, line: bytes, cut: int = 70) -> list[Forward]:
    return relay.feed(A, line[:cut]) + relay.feed(A, line[cut:])


TEXT = b'{"text":"' + b"x" * 300 + b'"}'


@pytest.mark.parametrize(("line", "answer"), [
    pytest.param(b'{"jsonrpc":"2.0","id":"late","params":' + TEXT + b',"method":"session/prompt"}\n',
                 error(b'"late"', NO_ORDER) + b"\n", id="method-after-params"),
    pytest.param(b'{"jsonrpc":"2.0","method":"session/prompt","params":' + TEXT + b',"id":' + BIG + b"}\n",
                 error(BIG, NO_ORDER) + b"\n", id="a-100-digit-id-after-params"),
    pytest.param(b'{"jsonrpc":"2.0","_meta":' + TEXT + b',"id":1,"method":"session/prompt","params":{}}\n',
                 error(b"1", NO_ORDER) + b"\n", id="all-after-the-head"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":"' + b"x" * 300 + b'"}\n',
                 error(b"1", NO_ORDER) + b"\n", id="params-a-string"),
    pytest.param(b'{"jsonrpc":"2.0","id":1.50,"method":7,"params":' + TEXT + b"}\n",
                 error(b"1.50", NO_METHOD) + b"\n", id="method-a-number"),
    pytest.param(b'{"jsonrpc":"2.0","id":"n","params":' + TEXT + b',"method":null}\n',
                 error(b'"n"', NO_METHOD) + b"\n", id="method-null-after-params"),
])
def test_a_long_request_the_link_cannot_wrap_as_one_is_answered_as_it_ends_not_left_in_flight(
        line: bytes, answer: bytes) -> None:
    """Its pieces go on (the link drops them, or sends its method and params on as a
    notification), and the error follows the line's end: nothing of it is in flight."""
    relay = long_relay()
    got = through(relay, line)
    assert b"".join(f.data for f in got if f.verdict is Verdict.OPAQUE) == line
    assert outcome([f for f in got if f.verdict is not Verdict.OPAQUE]) == [(C, Verdict.EMIT, answer)]
    assert relay.session.pending(A) == []
    assert relay.fail_pending("gone") == []


@pytest.mark.parametrize("line", [
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":' + TEXT + b"}\n", id="wrapped"),
    pytest.param(b'{"jsonrpc":"2.0","method":"session/update","params":' + TEXT + b',"id":1}', id="torn-no-message"),
    pytest.param(b'{"jsonrpc":"2.0","params":' + TEXT + b',"method":"session/update"}\n', id="a-notification"),
])
def test_a_long_request_the_link_wraps_is_in_flight_and_nothing_else_is_answered(line: bytes) -> None:
    relay = long_relay()
    got = through(relay, line) + relay.feed_eof(A)
    assert {f.verdict for f in got} == {Verdict.OPAQUE}
    assert len(relay.session.pending(A)) == (1 if b'"id"' in line and line.endswith(b"\n") else 0)


def test_a_thousand_long_requests_with_their_id_after_a_long_params_are_each_answered_and_said_once(
        caplog: pytest.LogCaptureFixture) -> None:
    relay = long_relay()
    line = b'{"jsonrpc":"2.0","method":"session/prompt","params":' + TEXT + b',"id":%d}\n'
    with caplog.at_level(logging.WARNING, "acp_bridge.chain"):
        answers = [f.data for i in range(1000) for f in through(relay, line % i) if f.verdict is Verdict.EMIT]
    assert answers == [error(b"%d" % i, NO_ORDER) + b"\n" for i in range(1000)]
    assert relay.session.pending(A) == []
    assert [record.getMessage().split(" cannot ")[0] for record in caplog.records] == [
        "a message over the parse limit from the client whose method and id do not come before its params"]


MEMBERS = {"jsonrpc": b'"jsonrpc":"2.0"', "id": b'"id":' + BIG, "method": b'"method":"session/prompt"',
           "params": b'"params":' + TEXT, "_meta": b'"_meta":{"k":1}'}


@given(order=st.permutations(list(MEMBERS)), drop=st.sets(st.sampled_from(["id", "_meta"])),
       method=st.sampled_from([b'"session/prompt"', b"7", b"null", b'["a"]']), string_params=st.booleans(),
       cuts=st.lists(st.integers(0, 500), max_size=4))
def test_the_relay_answers_a_long_request_exactly_when_the_link_does_not_wrap_it_as_one(
        order: list[str], drop: set[str], method: bytes, string_params: bool, cuts: list[int]) -> None:
    """One decision, read from the same head by both: the link's (`proxy_long_lines.outgoing`)."""
    members = dict(MEMBERS, method=b'"method":' + method)
    if string_params:
        members["params"] = b'"params":"' + b"x" * 300 + b'"'
    line = b"{" + b",".join(members[key] for key in order if key not in drop) + b"}\n"
    relay, chain = long_relay(), ProxyLink.started(OFFICIAL, b'{"jsonrpc":"2.0","id":0,"method":"proxy/initialize"}\n',
                                                   64, head=100)
    bounds = sorted({0, len(line), *(c % len(line) for c in cuts)})
    got = [f for a, b in itertools.pairwise(bounds) for f in relay.feed(A, line[a:b])]
    splitter = LineSplitter(64)
    sent = b"".join(chain.to_successor(piece) for piece in splitter.feed(
        b"".join(f.data for f in got if f.verdict is Verdict.OPAQUE)))
    as_request = sent.startswith(b'{"jsonrpc":"2.0","id":1,"method":"proxy/successor"')
    answered = [f.data for f in got if f.verdict is Verdict.EMIT]
    assert answered == ([] if as_request or "id" in drop else [error(BIG, NO_ORDER if method.startswith(b'"') else NO_METHOD) + b"\n"])
    assert len(relay.session.pending(A)) == int(as_request)
    if sent:
        assert orjson.loads(sent)["params"]["method"] == "session/prompt"  # never a malformed envelope


def test_a_request_whose_id_comes_after_20_mib_of_params_is_answered_at_the_default_limits() -> None:
    """The default 16 MiB parse limit and 64 KiB head: its id is seen only at the line's end."""
    relay = chain_relay()
    line = (b'{"jsonrpc":"2.0","method":"session/prompt","params":{"text":"' + b"x" * (20 << 20) + b'"},"id":'
            + BIG + b"}\n")
    got = [f for start in range(0, len(line), 1 << 20) for f in relay.feed(A, line[start:start + (1 << 20)])]
    assert sum(len(f.data) for f in got if f.verdict is Verdict.OPAQUE) == len(line)
    assert outcome([f for f in got if f.verdict is not Verdict.OPAQUE]) == [(C, Verdict.EMIT, error(BIG, NO_ORDER) + b"\n")]
    assert relay.session.pending(A) == []
