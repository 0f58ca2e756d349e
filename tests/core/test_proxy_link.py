"""ProxyLink: the conductor's lines made the client's and the agent's, and back, in both
dialects; params spliced byte for byte, ids mapped per hop, cancels hop-local, malformed
envelopes answered, lines over the parse limit streamed."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.lines import LineSplitter, Opaque
from acp_bridge.core.proxy_link import CONDUCTOR, FROM_AGENT, FROM_CLIENT, ProxyLink
from acp_bridge.core.proxy_wire import NO_AGENT, OFFICIAL, SACP, Dialect, Refusal, first_message
from tests.core.json_values import JSON_VALUES, encoded

OFFICIAL_INIT = b'{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1}}\n'
SACP_INIT = b'{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}\n'


def link(dialect: Dialect = OFFICIAL, max_line: int = 1 << 20) -> ProxyLink:
    """A started link; with a small `max_line`, one that decides on a long line from its
    first 100 bytes, so that what follows reaches it in pieces."""
    first = OFFICIAL_INIT if dialect is OFFICIAL else SACP_INIT
    return ProxyLink.started(dialect, first, max_line, head=100)


def test_proxy_initialize_is_the_official_dialect_and_reaches_the_rules_as_initialize() -> None:
    assert first_message(OFFICIAL_INIT) == (
        OFFICIAL, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n')


def test_initialize_with_meta_proxy_is_the_sacp_dialect_and_goes_on_as_it_came() -> None:
    assert first_message(SACP_INIT) == (SACP, SACP_INIT)


@pytest.mark.parametrize(("line", "answer"), [
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
                 b'{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":' + json.dumps(NO_AGENT).encode() + b"}}\n",
                 id="an-editors-initialize"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{"proxy":"yes"}}}\n',
                 b'{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":' + json.dumps(NO_AGENT).encode() + b"}}\n",
                 id="proxy-not-true"),
    pytest.param(b'{"jsonrpc":"2.0","method":"proxy/initialize","params":{}}\n', None, id="a-notification"),
    pytest.param(b"hello\n", None, id="not-json"),
])
def test_anything_else_first_is_refused_with_an_answer_when_it_has_an_id(line: bytes, answer: bytes | None) -> None:
    assert first_message(line) == Refusal(NO_AGENT, answer)


@given(params=st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4) | st.lists(JSON_VALUES, max_size=3),
       spacing=st.integers(0, 2), official=st.booleans())
def test_a_wrapped_notifications_params_reach_the_relay_byte_for_byte(params: Any, spacing: int, official: bool) -> None:
    raw = encoded(params, spacing)
    dialect = OFFICIAL if official else SACP
    envelope = (b'{"jsonrpc":"2.0","method":"' + dialect.notification.encode()
                + b'","params":{"method":"session/update","params":' + raw + b',"_meta":{"hop":1}}}\r\n')
    assert link(dialect).from_conductor(envelope) == [
        (FROM_AGENT, b'{"jsonrpc":"2.0","method":"session/update","params":' + raw + b"}\r\n")]


@given(params=st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4) | st.lists(JSON_VALUES, max_size=3),
       spacing=st.integers(0, 2), envelope_id=st.none() | st.integers(0, 10**25) | st.text(max_size=4),
       official=st.booleans())
def test_the_quick_unwrap_is_taken_for_conductors_envelopes_and_equals_the_general_path(
        params: Any, spacing: int, envelope_id: Any, official: bool) -> None:
    dialect = OFFICIAL if official else SACP
    raw = encoded(params, spacing)
    name = dialect.notification if envelope_id is None else dialect.request
    head = b'{"jsonrpc":"2.0",' + (b"" if envelope_id is None else b'"id":' + json.dumps(envelope_id).encode() + b",")
    envelope = head + b'"method":"' + name.encode() + b'","params":{"method":"session/update","params":' + raw + b"}}\n"
    quick, general = link(dialect), link(dialect)
    general.quick = False
    assert quick._unwrap_quickly(envelope) is not None  # the path is taken
    assert link(dialect).from_conductor(envelope) == general.from_conductor(envelope)


@given(params=st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4), spacing=st.integers(0, 2),
       client_id=st.integers(-(10**30), 10**30).map(str) | st.text(max_size=5).map(json.dumps))
def test_a_client_request_is_wrapped_byte_for_byte_and_its_answer_comes_back_to_its_id(
        params: Any, spacing: int, client_id: str) -> None:
    raw, cid = encoded(params, spacing), client_id.encode()
    chain = link()
    request = b'{"jsonrpc":"2.0","id":' + cid + b',"method":"session/prompt","params":' + raw + b"}\n"
    assert chain.to_successor(request) == (
        b'{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":'
        + raw + b"}}\n")
    answer = b'{"jsonrpc":"2.0","id":1,"result":' + raw + b"}\n"
    assert chain.from_conductor(answer) == [(FROM_AGENT, b'{"jsonrpc":"2.0","id":' + cid + b',"result":' + raw + b"}\n")]
    assert chain.in_flight == 0


def test_a_successor_request_goes_upstream_with_our_id_and_the_clients_answer_goes_back_in_its_envelope() -> None:
    chain = link(SACP)
    envelope = (b'{"jsonrpc":"2.0","id":"c-7","method":"_proxy/successor/request","params":'
                b'{"method":"session/request_permission","params":{"sessionId":"s","n":1.50}}}\n')
    assert chain.from_conductor(envelope) == [
        (FROM_AGENT, b'{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s","n":1.50}}\n')]
    # The client's answer arrives plain: an answer to no envelope of ours, so the client's.
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"cancelled"}}}\n'
    assert chain.from_conductor(answer) == [(FROM_CLIENT, answer)]
    assert chain.to_successor(answer) == b'{"jsonrpc":"2.0","id":"c-7","result":{"outcome":{"outcome":"cancelled"}}}\n'
    assert chain.in_flight == 0


def test_an_error_the_conductor_makes_answers_the_clients_request() -> None:
    chain = link()
    chain.to_successor(b'{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{}}\n')
    error = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"successor exited"}}\n'
    assert chain.from_conductor(error) == [
        (FROM_AGENT, b'{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"successor exited"}}\n')]


def test_official_cancels_are_hop_local_both_ways() -> None:
    chain = link()
    chain.to_successor(b'{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{}}\n')
    assert chain.to_successor(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p"}}\n') == (
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}\n')
    assert chain.to_successor(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"gone"}}\n') == b""
    chain.from_conductor(b'{"jsonrpc":"2.0","id":40,"method":"proxy/successor","params":{"method":"fs/read_text_file",'
                         b'"params":{"path":"/a"}}}\n')
    assert chain.from_conductor(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":40.0}}\n') == [
        (FROM_AGENT, b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}\n')]
    own = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}\n'
    assert chain.from_conductor(own) == [(FROM_CLIENT, own)]  # the client cancels its own request


def test_sacp_has_no_hop_local_cancel_it_is_wrapped_like_any_notification() -> None:
    cancel = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p"}}\n'
    assert link(SACP).to_successor(cancel) == (
        b'{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"$/cancel_request",'
        b'"params":{"requestId":"p"}}}\n')


@pytest.mark.parametrize(("envelope", "answer"), [
    pytest.param(b'{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"params":{}}}\n',
                 b'{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"a malformed proxy/successor envelope '
                 b'from the conductor: its params have no method"}}\n', id="no-method"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"x","params":"text"}}\n',
                 b'{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"a malformed proxy/successor envelope '
                 b'from the conductor: the params it wraps are neither an object nor an array"}}\n', id="params-a-string"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":[1]}\n',
                 b'{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"a malformed proxy/successor envelope '
                 b'from the conductor: its params have no method"}}\n', id="params-an-array"),
    pytest.param(b'{"jsonrpc":"2.0","method":"proxy/successor","params":{"params":{}}}\n', None, id="a-notification"),
])
def test_a_malformed_envelope_is_answered_and_said_once(envelope: bytes, answer: bytes | None,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    chain = link()
    with caplog.at_level(logging.WARNING, "acp_bridge.chain"):
        first, second = chain.from_conductor(envelope), chain.from_conductor(envelope)
    assert first == second == ([(CONDUCTOR, answer)] if answer is not None else [])
    assert len(caplog.records) == 1 and "said once" in caplog.records[0].getMessage()
    assert chain.in_flight == 0


def test_the_sacp_initialize_answer_says_proxy_true_and_nothing_else_changes() -> None:
    chain = link(SACP)
    other = b'{"jsonrpc":"2.0","method":"session/update","params":{"n":1.0}}\n'
    answer = b'{"jsonrpc":"2.0","id":"i","result":{"protocolVersion":1,"_meta":{"x":1}}}\n'
    assert chain.to_client(other + answer) == other + (
        b'{"jsonrpc":"2.0","id":"i","result":{"protocolVersion":1,"_meta":{"x":1,"proxy":true}}}\n')
    assert chain.to_client(answer) == answer  # once only
    assert link().to_client(answer) == answer  # the official dialect's answer is the successor's


def feed_all(chain: ProxyLink, data: bytes, cuts: list[int], outgoing: bool) -> list[tuple[str, bytes]]:
    """`data` through a splitter of the link's parse limit, cut at `cuts`; what came out."""
    splitter, out = LineSplitter(chain.max_line), []
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    pieces = [p for a, b in itertools.pairwise(bounds) for p in splitter.feed(data[a:b])]
    for piece in pieces:
        if outgoing:
            out.append(("conductor", chain.to_successor(piece)))
        else:
            out.extend(chain.from_conductor(piece))
    assert any(isinstance(p, Opaque) for p in pieces)  # the long path was taken
    return out


def joined(routed: list[tuple[str, bytes]], where: str) -> bytes:
    assert {to for to, data in routed if data} <= {where}
    return b"".join(data for _, data in routed)


@given(text=st.text(min_size=200, max_size=600), cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_a_long_wrapped_line_is_unwrapped_in_pieces_as_a_short_one_would_be(text: str, cuts: list[int]) -> None:
    params = json.dumps({"sessionId": "s", "update": {"text": text, "a": [1, {"}": "]"}]}}).encode()
    envelope = (b'{"jsonrpc":"2.0","id":8,"method":"proxy/successor","params":{"method":"session/update","params":'
                + params + b',"_meta":{"k":"}"}},"x":1}\n')
    expected = b'{"jsonrpc":"2.0","id":1,"method":"session/update","params":' + params + b"}\n"
    assert link().from_conductor(envelope) == [(FROM_AGENT, expected)]
    assert joined(feed_all(link(max_line=64), envelope, cuts, outgoing=False), FROM_AGENT) == expected


@given(text=st.text(min_size=200, max_size=600), cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_a_long_client_line_is_wrapped_in_pieces_as_a_short_one_would_be(text: str, cuts: list[int]) -> None:
    params = json.dumps({"sessionId": "s", "prompt": [{"type": "text", "text": text}]}).encode()
    line = b'{"jsonrpc":"2.0","id":"r","method":"session/prompt","params":' + params + b"}\n"
    expected = link().to_successor(line)
    chain = link(max_line=64)
    assert joined(feed_all(chain, line, cuts, outgoing=True), "conductor") == expected
    assert chain.from_conductor(b'{"jsonrpc":"2.0","id":1,"result":{}}\n') == [
        (FROM_AGENT, b'{"jsonrpc":"2.0","id":"r","result":{}}\n')]


def test_a_long_line_whose_wrapped_method_comes_after_its_params_is_answered_not_passed_on() -> None:
    chain = link(max_line=64)
    envelope = (b'{"jsonrpc":"2.0","id":8,"method":"proxy/successor","params":{"params":{"t":"' + b"x" * 200
                + b'"},"method":"session/update"}}\n')  # its head, 100 bytes, does not hold the method
    out = feed_all(chain, envelope, [100], outgoing=False)
    assert [to for to, data in out if data] == [CONDUCTOR]
    assert json.loads(out[0][1])["id"] == 8 and json.loads(out[0][1])["error"]["code"] == -32602


@pytest.mark.parametrize(("result", "patched"), [
    pytest.param(b'{"protocolVersion":1,"n":1.50,"big":123456789012345678901234567890}',
                 b'{"protocolVersion":1,"n":1.50,"big":123456789012345678901234567890,"_meta":{"proxy":true}}',
                 id="numbers-keep-their-spelling"),
    pytest.param(b'{ "_meta" : { "a" : 1e3 } }', b'{ "_meta" : { "a" : 1e3 ,"proxy":true} }', id="spaces"),
    pytest.param(b"{}", b'{"_meta":{"proxy":true}}', id="empty"),
    pytest.param(b'{"_meta":{}}', b'{"_meta":{"proxy":true}}', id="empty-meta"),
    pytest.param(b'{"_meta":{"proxy":false,"a":"\\u00e9"}}', b'{"_meta":{"proxy":true,"a":"\\u00e9"}}', id="proxy-false"),
    pytest.param(b'{"_meta":null}', b'{"_meta":{"proxy":true}}', id="meta-null"),
])
def test_the_sacp_initialize_answer_is_patched_in_place_byte_for_byte(result: bytes, patched: bytes) -> None:
    answer = b'{"jsonrpc":"2.0","id":"i","result":' + result + b"}\r\n"
    assert link(SACP).to_client(answer) == b'{"jsonrpc":"2.0","id":"i","result":' + patched + b"}\r\n"


@pytest.mark.parametrize("spelling", [b"1", b"1.0", b"1e0"])
def test_an_answer_names_our_request_in_any_spelling_of_its_number(spelling: bytes) -> None:
    chain = link()
    chain.to_successor(b'{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{}}\n')
    assert chain.from_conductor(b'{"jsonrpc":"2.0","id":' + spelling + b',"result":{}}\n') == [
        (FROM_AGENT, b'{"jsonrpc":"2.0","id":"p","result":{}}\n')]
    chain.from_conductor(b'{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"fs/read_text_file",'
                         b'"params":{}}}\n')  # upstream as our request 2
    two = spelling.replace(b"1", b"2")
    assert chain.to_successor(b'{"jsonrpc":"2.0","id":' + two + b',"result":{}}\n') == b'{"jsonrpc":"2.0","id":7,"result":{}}\n'
    assert chain.in_flight == 0


def test_a_long_answer_with_id_true_answers_no_request_of_ours() -> None:
    chain = link(max_line=64)
    chain.from_conductor(b'{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"fs/read_text_file",'
                         b'"params":{}}}\n')  # upstream as our request 1, which `true` equals in Python
    answer = b'{"jsonrpc":"2.0","id":true,"result":{"content":"' + b"x" * 200 + b'"}}\n'
    assert joined(feed_all(chain, answer, [], outgoing=True), "conductor") == b""
    assert chain.in_flight == 1


@pytest.mark.parametrize("dialect", [OFFICIAL, SACP], ids=["official", "sacp"])
def test_a_rules_request_to_the_client_goes_under_an_id_of_ours_and_its_answer_comes_back_to_the_rule(
        dialect: Dialect) -> None:
    chain = link(dialect)
    chain.to_successor(b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{}}\n')  # envelope 1
    # A rule asks the client under id 1, the id of the envelope in flight toward the successor.
    ask = b'{"jsonrpc":"2.0","id":1,"method":"_x/ask","params":{"n":1.50}}\n'
    assert chain.to_client(ask) == b'{"jsonrpc":"2.0","id":2,"method":"_x/ask","params":{"n":1.50}}\n'
    answer = b'{"jsonrpc":"2.0","id":2,"result":{"yes":true}}\n'
    assert chain.from_conductor(answer) == [(FROM_CLIENT, b'{"jsonrpc":"2.0","id":1,"result":{"yes":true}}\n')]
    # The successor's answer to envelope 1 still answers the client's session/new, once.
    assert chain.from_conductor(b'{"jsonrpc":"2.0","id":1,"result":{}}\n') == [
        (FROM_AGENT, b'{"jsonrpc":"2.0","id":"n","result":{}}\n')]
    assert chain.from_conductor(answer) == [(FROM_CLIENT, answer)]  # a second answer is no rule's
    assert chain.in_flight == 0


def test_the_successors_request_keeps_our_id_toward_the_client_even_respelled_by_a_rule() -> None:
    chain = link()
    envelope = b'{"jsonrpc":"2.0","id":9,"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{}}}\n'
    [(_, unwrapped)] = chain.from_conductor(envelope)
    assert chain.to_client(unwrapped) == unwrapped == (
        b'{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{}}\n')
    chain.from_conductor(envelope.replace(b'"id":9', b'"id":10'))  # our 2
    respelled = b'{"method":"fs/read_text_file","params":{"path":"/a"},"id":2,"jsonrpc":"2.0"}\n'
    assert chain.to_client(respelled) == respelled
    # A rule's request under an id the link just used toward the client is a rule's: ours is 3.
    assert chain.to_client(b'{"jsonrpc":"2.0","id":2,"method":"_x/ask"}\n') == b'{"jsonrpc":"2.0","id":3,"method":"_x/ask"}\n'


def test_the_tail_of_a_long_line_toward_the_client_is_not_taken_for_a_request() -> None:
    chain = link()
    head = b'{"jsonrpc":"2.0","method":"session/update","params":{"text":"'
    looks = b'{"jsonrpc":"2.0","id":7,"method":"_x/ask"}\n'  # the rest of that line, then a rule's request
    assert chain.to_client(head) == head
    assert chain.to_client(looks + looks) == looks + b'{"jsonrpc":"2.0","id":1,"method":"_x/ask"}\n'
    assert chain.to_client(looks) == b'{"jsonrpc":"2.0","id":2,"method":"_x/ask"}\n'
    assert chain.to_client(b"") == b""  # nothing written: still at a line's start
    assert chain.to_client(looks) == b'{"jsonrpc":"2.0","id":3,"method":"_x/ask"}\n'


def test_a_long_line_toward_the_client_is_a_request_only_with_a_method_and_an_id_of_its_own() -> None:
    chain, text = link(), b"t" * (200 << 10)  # over the 64 KiB head
    answer = b'{"jsonrpc":"2.0","id":"a","result":{"method":"x","id":1,"t":"' + text + b'"}}\n'
    update = b'{"jsonrpc":"2.0","method":"session/update","params":{"id":1,"t":"' + text + b'"}}\n'
    assert chain.to_client(answer + update) == answer + update
    ask = b'{"jsonrpc":"2.0","params":{"t":"' + text + b'"},"method":"_x/ask","id":"r"}\n'  # its id after the head
    assert chain.to_client(ask) == ask.replace(b'"id":"r"', b'"id":1')


def test_an_id_in_flight_twice_keeps_its_cancel_for_the_one_still_in_flight_after_the_other_is_answered() -> None:
    chain = link()
    envelope = b'{"jsonrpc":"2.0","id":9,"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{}}}\n'
    chain.from_conductor(envelope)  # our 1
    chain.from_conductor(envelope)  # our 2: the conductor used 9 again
    chain.to_successor(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')  # the client answers the first
    assert chain.from_conductor(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":9}}\n') == [
        (FROM_AGENT, b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}\n')]
    prompt = b'{"jsonrpc":"2.0","id":"a","method":"session/prompt","params":{}}\n'
    chain.to_successor(prompt)  # envelope 3
    chain.to_successor(prompt)  # envelope 4: the client used "a" again
    chain.from_conductor(b'{"jsonrpc":"2.0","id":3,"result":{}}\n')
    assert chain.to_successor(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"a"}}\n') == (
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":4}}\n')


@pytest.mark.parametrize(("dialect", "envelope", "answer"), [
    pytest.param(SACP, b'{"jsonrpc":"2.0","id":8,"method":"_proxy/successor/notification","params":{"method":"session/update",'
                 b'"params":{"t":"' + b"x" * 200 + b'"}}}\n',
                 b'{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"a malformed _proxy/successor/request '
                 b'envelope from the conductor: _proxy/successor/notification with an id"}}\n', id="sacp-notification-with-an-id"),
    pytest.param(SACP, b'{"jsonrpc":"2.0","method":"_proxy/successor/request","params":{"method":"fs/read_text_file",'
                 b'"params":{"t":"' + b"x" * 200 + b'"}}}\n', None, id="sacp-request-without-an-id"),
])
def test_a_long_sacp_envelope_of_the_wrong_kind_is_refused_as_a_short_one_is(
        dialect: Dialect, envelope: bytes, answer: bytes | None) -> None:
    chain = link(dialect, max_line=64)
    out = [(to, data) for to, data in feed_all(chain, envelope, [130], outgoing=False) if data]  # a head of 130 bytes
    assert out == ([(CONDUCTOR, answer)] if answer is not None else [])  # was unwrapped as the other kind
    assert chain.in_flight == 0


def test_a_long_answer_to_a_rules_request_comes_back_to_the_rule_under_its_id() -> None:
    chain = link(max_line=64)
    assert chain.to_client(b'{"jsonrpc":"2.0","id":"r","method":"_x/ask"}\n') == b'{"jsonrpc":"2.0","id":1,"method":"_x/ask"}\n'
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"t":"' + b"x" * 200 + b'"}}\n'
    assert joined(feed_all(chain, answer, [], outgoing=False), FROM_CLIENT) == answer.replace(b'"id":1', b'"id":"r"')


@pytest.mark.parametrize("line", [
    b'{"jsonrpc":"2.0"}\n',
    b'{"jsonrpc":"2.0","result":{}}\n',
    b"[]\n",
    b"not json\n",
])
def test_a_line_toward_the_successor_that_no_envelope_carries_is_not_lost_silently(
        line: bytes, caplog: pytest.LogCaptureFixture) -> None:
    chain = link()
    with caplog.at_level(logging.WARNING, "acp_bridge.chain"):
        assert chain.to_successor(line) == chain.to_successor(line) == b""
    assert len(caplog.records) == 1 and "said once" in caplog.records[0].getMessage()


@pytest.mark.parametrize("dialect", [OFFICIAL, SACP], ids=["official", "sacp"])
def test_a_rules_cancel_of_its_own_request_to_the_client_names_the_id_the_client_knows(dialect: Dialect) -> None:
    chain = link(dialect)
    assert chain.to_client(b'{"jsonrpc":"2.0","id":"ask","method":"_x/ask"}\n') == (
        b'{"jsonrpc":"2.0","id":1,"method":"_x/ask"}\n')
    cancel = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%b}}\r\n'
    other = cancel % b'"other"'  # the cancel of a request that is no rule's: unchanged
    assert chain.to_client(b"x\n" + cancel % b'"ask"' + other) == b"x\n" + cancel % b"1" + other
    assert chain.from_conductor(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"cancelled"}}\n') == [
        (FROM_CLIENT, b'{"jsonrpc":"2.0","id":"ask","error":{"code":-32800,"message":"cancelled"}}\n')]
    assert chain.to_client(cancel % b'"ask"') == cancel % b'"ask"'  # answered: no longer ours to map


@pytest.mark.parametrize("line", [
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":7,"params":{"t":"' + b"x" * 200 + b'"}}\n', id="request"),
    pytest.param(b'{"jsonrpc":"2.0","method":null,"params":["' + b"x" * 200 + b'"]}\n', id="notification"),
])
def test_a_long_line_whose_method_is_no_string_is_not_wrapped_into_a_malformed_envelope(
        line: bytes, caplog: pytest.LogCaptureFixture) -> None:
    """The relay answers the request (core/uncarried.py) and says so: the link is silent."""
    chain = link(max_line=64)
    with caplog.at_level(logging.WARNING, "acp_bridge.chain"):
        assert joined(feed_all(chain, line, [90], outgoing=True), "conductor") == b""
    assert chain.in_flight == 0
    assert caplog.records == []


def test_a_long_request_whose_method_comes_after_its_params_is_no_answer_to_a_request_of_the_successors() -> None:
    chain = link(max_line=64)
    chain.from_conductor(b'{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"fs/read_text_file",'
                         b'"params":{}}}\n')  # toward the client as our 1
    line = b'{"jsonrpc":"2.0","id":1,"params":{"t":"' + b"x" * 200 + b'"},"method":"session/prompt"}\n'
    assert joined(feed_all(chain, line, [90], outgoing=True), "conductor") == b""
    assert chain.in_flight == 1  # still the successor's request, unanswered
