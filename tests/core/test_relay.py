"""Relay: the transparency contract, pairing, the chain, and failing open; under strict, a
rule's failure (including a result that cannot be written) raises and forwards nothing; and
what the relay answers when the bridge stops itself."""

from __future__ import annotations

import logging

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core import (
    DROP,
    PASS,
    Connection,
    Direction,
    Emit,
    Forward,
    Frame,
    Relay,
    Replace,
    Rule,
    Verdict,
)
from acp_bridge.core.chain import RuleError
from acp_bridge.core.rewrites.base import Outcome
from acp_bridge.core.rewrites.suggestions import SuggestionsState
from acp_bridge.core.session import Pending
from tests.core.helpers import FailOnSecondAnswer, split_at

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


def feed_all(relay: Relay, direction: Direction, parts: list[bytes]) -> list[Forward]:
    out: list[Forward] = []
    for part in parts:
        out.extend(relay.feed(direction, part))
    out.extend(relay.feed_eof(direction))
    return out


def sent(forwards: list[Forward], direction: Direction) -> bytes:
    return b"".join(f.data for f in forwards if f.direction is direction)


# Lines that must come out exactly as they went in, whatever the rules.
NEUTRAL = [
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"caf\\u00e9 1e3"}}}}\n',
    b'{ "jsonrpc" : "2.0", "id" : 7, "result" : { "x" : 1e3, "big": 123456789012345678901234567890 } }\r\n',
    b'{"jsonrpc":"2.0","id":1,"method":"a","id":2}\n',
    b'[{"jsonrpc":"2.0","id":1,"method":"x"},{"jsonrpc":"2.0","method":"y"}]\n',
    b"\n",
    b"\r\n",
    b"garbage \xff\xfe\n",
    b'{"jsonrpc":"2.0","method":"_acme/ping","params":{"_meta":{"k":1}}}\n',
    b'{"jsonrpc":"2.0","method":"unknown/method","params":null}\n',
    b'{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"path":"/x"}}\n',
]


@pytest.mark.detail
@pytest.mark.parametrize("raw", NEUTRAL)
@pytest.mark.parametrize("direction", [A, C])
def test_untouched_line_leaves_as_the_same_bytes_object(raw: bytes, direction: Direction) -> None:
    relay = Relay([Rule()], strict=True)
    (forward,) = relay.feed(direction, raw)
    assert forward.data is forward.raw
    assert forward.data == raw
    assert forward.direction is direction


@given(data=st.binary(max_size=4096), cuts=st.lists(st.integers(0, 4096), max_size=30),
       direction=st.sampled_from([A, C]))
def test_empty_chain_is_identity_in_any_chunking(data: bytes, cuts: list[int], direction: Direction) -> None:
    relay = Relay([], strict=True, max_line=256)
    out = feed_all(relay, direction, split_at(data, cuts))
    assert b"".join(f.data for f in out) == data
    assert all(f.direction is direction for f in out)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
messages = st.one_of(
    st.builds(lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p},
              st.integers(0, 5) | st.text(max_size=3), st.sampled_from(["initialize", "session/new", "_x", "a/b"]), json_values),
    st.builds(lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p},
              st.sampled_from(["session/update", "session/cancel", "_x"]), json_values),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, st.integers(0, 5), json_values),
)
line_strategy = st.one_of(
    messages.map(lambda m: orjson.dumps(m) + b"\n"),
    messages.map(lambda m: orjson.dumps(m, option=orjson.OPT_INDENT_2).replace(b"\n", b" ") + b"\r\n"),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"),
    st.just(b"\n"),
)


@given(lines=st.lists(line_strategy, max_size=25), cuts=st.lists(st.integers(0, 3000), max_size=10),
       direction=st.sampled_from([A, C]))
def test_protocol_streams_pass_unchanged_in_any_chunking(lines: list[bytes], cuts: list[int], direction: Direction) -> None:
    """Messages of every kind, valid or not, come back out identical and in order."""
    data = b"".join(lines)
    relay = Relay([Rule()], strict=True)
    out = feed_all(relay, direction, split_at(data, cuts))
    assert b"".join(f.data for f in out) == data


def test_response_pairs_with_request_from_other_side() -> None:
    """Both sides number from 0: a response pairs with the request that went the other way."""
    relay = Relay()
    relay.feed(A, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    relay.feed(C, b'{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{}}\n')
    (to_client,) = relay.feed(C, b'{"jsonrpc":"2.0","id":0,"result":{}}\n')
    assert to_client.request is not None and to_client.request.method == "initialize"
    (to_agent,) = relay.feed(A, b'{"jsonrpc":"2.0","id":0,"result":{"content":""}}\n')
    assert to_agent.request is not None and to_agent.request.method == "fs/read_text_file"
    assert relay.statistics().pending_to_agent == 0
    assert relay.statistics().pending_to_client == 0


def test_string_and_number_ids_do_not_pair() -> None:
    relay = Relay()
    relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"x"}\n')
    (fwd,) = relay.feed(C, b'{"jsonrpc":"2.0","id":"1","result":{}}\n')
    assert fwd.request is None
    assert relay.statistics().unpaired_responses == 1
    assert relay.statistics().pending_to_agent == 1


def test_a_response_is_paired_at_most_once() -> None:
    relay = Relay()
    relay.feed(A, b'{"jsonrpc":"2.0","id":5,"method":"x"}\n')
    first = relay.feed(C, b'{"jsonrpc":"2.0","id":5,"result":1}\n')
    second = relay.feed(C, b'{"jsonrpc":"2.0","id":5,"result":2}\n')
    assert first[0].request is not None
    assert second[0].request is None


class Tag(Rule):
    """Adds `tagged: name` to notifications; the next one sees the previous one's output."""

    triggers = (b"tag-me",)

    def __init__(self, name: str) -> None:
        self.name = name

    def notification(self, frame: Frame, session: Connection) -> Replace:
        assert frame.msg is not None
        seen = list(frame.msg.get("tagged", []))
        return Replace({**frame.msg, "tagged": [*seen, self.name]})


class Dropper(Rule):
    name = "dropper"
    triggers = (b"tag-me",)

    def notification(self, frame: Frame, session: Connection) -> Replace:
        return Replace(None, then=(Emit(C, {"jsonrpc": "2.0", "method": "dropped"}),))


class Boom(Rule):
    name = "boom"

    def request(self, frame: Frame, session: Connection) -> Replace:
        raise RuntimeError("bug")


def test_chain_runs_in_order_and_reencodes_with_the_line_terminator() -> None:
    relay = Relay([Tag("one"), Tag("two")], strict=True)
    (fwd,) = relay.feed(A, b'{"jsonrpc":"2.0","method":"tag-me"}\r\n')
    assert fwd.verdict is Verdict.REWRITE
    assert fwd.rules == ("one", "two")
    assert fwd.data == b'{"jsonrpc":"2.0","method":"tag-me","tagged":["one","two"]}\r\n'
    assert fwd.raw == b'{"jsonrpc":"2.0","method":"tag-me"}\r\n'


def test_drop_stops_the_chain_and_emits_follow() -> None:
    relay = Relay([Dropper(), Tag("never")], strict=True)
    dropped, emitted = relay.feed(A, b'{"jsonrpc":"2.0","method":"tag-me"}\n')
    assert (dropped.verdict, dropped.data, dropped.rules) == (Verdict.DROP, b"", ("dropper",))
    assert (emitted.verdict, emitted.direction) == (Verdict.EMIT, C)
    assert emitted.data == b'{"jsonrpc":"2.0","method":"dropped"}\n'


@pytest.mark.detail
def test_lines_without_triggers_are_not_parsed() -> None:
    relay = Relay([Tag("one")], strict=True)
    (fwd,) = relay.feed(C, b'{"jsonrpc":"2.0","method":"session/update","params":{}}\n')
    assert fwd.frame is None and fwd.verdict is Verdict.PASS


def test_a_failing_rule_forwards_the_original_and_records_the_error() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"method":"x"}\n'
    (fwd,) = Relay([Boom()]).feed(A, raw)
    assert (fwd.verdict, fwd.data, fwd.rules) == (Verdict.ERROR, raw, ("boom",))
    assert fwd.error == "RuntimeError: bug"


def test_strict_relay_raises_a_failing_rule_by_its_name() -> None:
    with pytest.raises(RuleError, match=r"^rule 'boom' failed: RuntimeError: bug$") as raised:
        Relay([Boom()], strict=True).feed(A, b'{"jsonrpc":"2.0","id":1,"method":"x"}\n')
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_a_dropped_request_is_no_longer_pending() -> None:
    class DropRequests(Rule):
        name = "drop-requests"

        def request(self, frame: Frame, session: Connection) -> Replace:
            return DROP

    relay = Relay([DropRequests()], strict=True)
    relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"x"}\n')
    assert relay.session.pending(A) == []


def test_fail_pending_answers_each_client_request_once() -> None:
    relay = Relay()
    relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n{"jsonrpc":"2.0","id":"b","method":"session/new"}\n')
    relay.feed(C, b'{"jsonrpc":"2.0","id":9,"method":"fs/read_text_file"}\n')
    out = relay.fail_pending("agent exited", {"exitStatus": 3})
    assert [orjson.loads(f.data) for f in out] == [
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "agent exited", "data": {"exitStatus": 3}}},
        {"jsonrpc": "2.0", "id": "b", "error": {"code": -32603, "message": "agent exited", "data": {"exitStatus": 3}}},
    ]
    assert all(f.direction is C for f in out)
    assert relay.fail_pending("again") == []


def test_over_long_lines_pass_as_opaque_and_are_never_parsed() -> None:
    relay = Relay([Boom()], strict=True, max_line=16)
    big = b'{"jsonrpc":"2.0","id":1,"method":"x","params":"' + b"y" * 40 + b'"}\n'
    out = feed_all(relay, A, [big[:20], big[20:]])
    assert b"".join(f.data for f in out) == big
    assert {f.verdict for f in out} == {Verdict.OPAQUE}
    # Never parsed (Boom would raise), but known by its id and method, to be answered.
    (pending,) = relay.session.pending(A)
    assert (pending.id, pending.method) == (1, "x")


@given(st.binary(max_size=1024))
def test_strict_relay_with_neutral_rule_never_raises_on_any_bytes(data: bytes) -> None:
    relay = Relay([Rule()], strict=True, max_line=64)
    out = feed_all(relay, C, [data])
    assert sent(out, C) == data


def test_needs_parse_sees_escaped_keys() -> None:
    """A key written with \\u escapes could hide "id": such lines are always parsed."""
    relay = Relay()
    assert relay.needs_parse(b'{"\\u0069d":1,"result":{}}\n')
    assert relay.needs_parse(b'{"id":1}\n')
    assert not relay.needs_parse(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}\n')


def test_pending_request_keeps_the_time_it_went_through() -> None:
    relay = Relay()
    (fwd,) = relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"x"}\n', now=12.5)
    assert isinstance(fwd.request, Pending) and fwd.request.at == 12.5


@pytest.mark.detail
@pytest.mark.parametrize(
    ("line", "session_id", "params"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}\r\n',
         "s1", {"sessionId": "s1", "prompt": []}),
        (b'{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":7}}\n', 7, {"sessionId": 7}),
        (b'{"jsonrpc":"2.0","id":3,"method":"x","params":[1,2]}\n', None, [1, 2]),
        (b'{"jsonrpc":"2.0","id":4,"method":"x"}\n', None, None),
    ],
)
def test_pending_request_reads_its_params_from_its_line(line: bytes, session_id: object, params: object) -> None:
    """A request in flight keeps its line, not the parsed object; params parse on demand."""
    relay = Relay()
    (fwd,) = relay.feed(A, line)
    request = fwd.request
    assert request is not None and request.raw == line
    assert (request.session_id, request.params) == (session_id, params)
    assert request.params is request.params  # parsed once


def per_line(forwards: list[Forward]) -> list[tuple[Direction, bytes, Verdict, tuple[str, ...]]]:
    return [(f.direction, f.data, f.verdict, f.rules) for fwd in forwards for f in fwd.lines()]


NEUTRAL_CHUNK = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
                 b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}}}\n')


@given(lines=st.lists(line_strategy, max_size=40), at=st.integers(0, 40), neutral=st.integers(26, 40),
       cuts=st.lists(st.integers(0, 9000), max_size=12), direction=st.sampled_from([A, C]))
def test_bulk_runs_equal_the_per_line_path(lines: list[bytes], at: int, neutral: int, cuts: list[int],
                                           direction: Direction) -> None:
    """The shortcut for runs of untouched lines gives exactly what line-by-line relaying gives.

    Every example reaches the shortcut (asserted): a block of untouched lines, more than the
    cuts can split into single lines, opens the stream (and another sits among the arbitrary
    lines), and runs start at 64 bytes.
    """
    from acp_bridge.config import Config, SuggestionsConfig, SystemPromptConfig
    from acp_bridge.core.rewrites import build_rewrites

    config = Config(suggestions=SuggestionsConfig(unlock_legacy_agent=True),
                    system_prompt=SystemPromptConfig(text="be brief"))
    init = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"promptSuggestions":{}}}}}\n'
    lines.insert(min(at, len(lines)), NEUTRAL_CHUNK * neutral)
    lines.insert(0, NEUTRAL_CHUNK * neutral)
    data = b"".join(lines)
    results = []
    for bulk in (True, False):
        relay = Relay(build_rewrites(config), strict=True, max_line=1 << 20, bulk=bulk, run_min=64)
        relay.feed(A, init)
        out = feed_all(relay, direction, split_at(data, cuts))
        assert any(f.untouched_lines for f in out) is bulk  # the shortcut was taken, or not
        results.append(per_line(out))
    assert results[0] == results[1]


UPDATE = b'{"jsonrpc":"2.0","method":"session/update","params":{}}\n'
MANY = 50  # lines enough to make a chunk longer than relay.RUN_MIN, where runs start


@pytest.mark.detail
def test_a_run_of_untouched_lines_is_one_forward() -> None:
    chunk = UPDATE * MANY + b'{"partial'
    relay = Relay([Tag("t")], strict=True)
    (run,) = relay.feed(C, chunk)
    assert (run.untouched_lines, run.data, run.verdict) == (True, chunk[: chunk.rindex(b"\n") + 1], Verdict.PASS)
    assert [f.data for f in run.lines()] == [UPDATE] * MANY
    (rest,) = relay.feed_eof(C)
    assert rest.data == b'{"partial'


def test_in_flight_compares_session_ids_as_json_values() -> None:
    relay = Relay()
    relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":1}}\n')
    assert [r.id for r in relay.session.in_flight("session/prompt", 1)] == [1]
    assert relay.session.in_flight("session/prompt", True) == []
    assert relay.session.in_flight("session/prompt", "1") == []


@pytest.mark.detail
def test_a_line_that_needs_a_look_splits_the_run_around_it() -> None:
    chunk = (b'{"jsonrpc":"2.0","method":"session/update","params":{"t":"a\\nb"}}\n' * MANY
             + b'{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{}}\n'
             + b"a banner\n"
             + UPDATE * 3)
    relay = Relay([Tag("t")], strict=True)
    out = relay.feed(C, chunk)
    assert [(f.verdict, len(f.lines())) for f in out] == [
        (Verdict.PASS, MANY), (Verdict.PASS, 1), (Verdict.OTHER, 1), (Verdict.PASS, 3)]
    assert out[1].frame is not None and out[1].request is not None
    assert b"".join(f.data for f in out) == chunk


def test_dense_lines_that_need_a_look_are_relayed_line_by_line() -> None:
    requests = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"x"}\n' % i for i in range(20))
    tail = b'{"jsonrpc":"2.0","method":"session/update","params":{}}\n' * 2
    relay = Relay([Tag("t")], strict=True)
    out = relay.feed(A, requests + tail)
    assert [f.request.id for f in out if f.request is not None] == list(range(20))
    assert b"".join(f.data for f in out) == requests + tail
    assert per_line(out) == per_line(Relay([Tag("t")], strict=True, bulk=False).feed(A, requests + tail))


# -- whole lines, answers, inputs that cannot be written back --------------------------------


class Withdraw(Rule):
    """Emits a fixed notification toward the client for every client request."""

    name = "withdraw"

    def request(self, frame: Frame, session: Connection) -> Replace:
        assert frame.msg is not None
        return Replace(frame.msg, then=(Emit(C, {"jsonrpc": "2.0", "method": "w"}),))


W = b'{"jsonrpc":"2.0","method":"w"}\n'


def test_an_emit_waits_for_the_long_line_streaming_to_its_destination() -> None:
    relay = Relay([Withdraw()], strict=True, max_line=64)
    head = relay.feed(C, b'{"long":"' + b"x" * 100)
    assert [f.verdict for f in head] == [Verdict.OPAQUE]
    request = b'{"jsonrpc":"2.0","id":1,"method":"p"}\n'
    during = relay.feed(A, request)
    assert [(f.direction, f.data) for f in during] == [(A, request)]  # the emit is held back
    tail = relay.feed(C, b'"}\n{"a":1}\n')
    assert [f.data for f in tail] == [b'"}\n', W, b'{"a":1}\n']


class Surround(Rule):
    """Renames each client request, with a message before it either way and one after."""

    name = "surround"

    def request(self, frame: Frame, session: Connection) -> Replace:
        assert frame.msg is not None
        return Replace({**frame.msg, "method": "new"},
                       then=(Emit(A, {"jsonrpc": "2.0", "method": "after"}),),
                       before=(Emit(A, {"jsonrpc": "2.0", "method": "first"}),
                               Emit(C, {"jsonrpc": "2.0", "method": "told"})))


def test_emits_before_a_line_go_ahead_of_it_and_wait_for_a_long_line_on_their_side() -> None:
    """`Replace(before=...)`: each message ahead of the line (marked `before`, for the
    capture), the line, then `then`; one toward the other side still waits for a long line
    streaming there, as every message the bridge writes does."""
    relay = Relay([Surround()], strict=True, max_line=64)
    out = relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"old"}\r\n')
    assert [(f.direction, f.data, f.verdict, f.before) for f in out] == [
        (A, b'{"jsonrpc":"2.0","method":"first"}\r\n', Verdict.EMIT, True),
        (C, b'{"jsonrpc":"2.0","method":"told"}\r\n', Verdict.EMIT, True),
        (A, b'{"jsonrpc":"2.0","id":1,"method":"new"}\r\n', Verdict.REWRITE, False),
        (A, b'{"jsonrpc":"2.0","method":"after"}\r\n', Verdict.EMIT, False),
    ]
    relay.feed(C, b'{"long":"' + b"x" * 100)
    held = relay.feed(A, b'{"jsonrpc":"2.0","id":2,"method":"old"}\n')
    assert [f.direction for f in held] == [A, A, A]
    assert [f.data for f in relay.feed(C, b'"}\n')] == [b'"}\n', b'{"jsonrpc":"2.0","method":"told"}\n']


def test_an_emit_after_a_torn_last_line_starts_a_line_of_its_own() -> None:
    relay = Relay([Withdraw()], strict=True)
    assert sent(relay.feed(C, b'{"torn":'), C) == b""
    assert sent(relay.feed_eof(C), C) == b'{"torn":'
    assert sent(relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"p"}\n'), C) == b"\n" + W
    assert sent(relay.feed(A, b'{"jsonrpc":"2.0","id":2,"method":"p"}\n'), C) == W  # once only


def test_a_rewritten_unterminated_last_line_gets_a_newline() -> None:
    relay = Relay([Rename()], strict=True)
    out = relay.feed_eof(A) + relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"old"}')
    out += relay.feed_eof(A)
    assert sent(out, A) == b'{"jsonrpc":"2.0","id":1,"method":"new"}\n'


class Rename(Rule):
    name = "rename"

    def request(self, frame: Frame, session: Connection) -> Replace:
        assert frame.msg is not None
        return Replace({**frame.msg, "method": "new"})


def test_numbers_keep_their_spelling_when_a_line_is_rewritten() -> None:
    relay = Relay([Rename()], strict=True)
    raw = b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"old","params":[1.50,1e3,-0.0,7]}\n'
    (fwd,) = relay.feed(A, raw)
    assert fwd.data == (b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"new",'
                        b'"params":[1.50,1e3,-0.0,7]}\n')


def test_a_message_too_deep_to_write_back_is_forwarded_as_it_came() -> None:
    relay = Relay([Rename()])
    raw = b'{"jsonrpc":"2.0","id":1,"method":"old","params":' + b"[" * 300 + b"]" * 300 + b"}\n"
    (fwd,) = relay.feed(A, raw)
    assert (fwd.verdict, fwd.data) == (Verdict.ERROR, raw)
    assert fwd.error is not None and fwd.error.startswith("cannot re-encode")


def test_the_bridge_answers_a_big_integer_id_with_the_id_as_written() -> None:
    relay = Relay([], strict=True)
    relay.feed(A, b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"p"}\n')
    (fwd,) = relay.fail_pending("gone")
    assert fwd.data == b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"error":{"code":-32603,"message":"gone"}}\n'


def test_requests_with_the_same_id_are_each_answered_once_in_order() -> None:
    relay = Relay([], strict=True)
    relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"first"}\n{"jsonrpc":"2.0","id":1,"method":"second"}\n')
    (answer,) = relay.feed(C, b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    assert answer.request is not None and answer.request.method == "first"
    (left,) = relay.fail_pending("gone")
    assert left.request is not None and left.request.method == "second"
    assert relay.fail_pending("gone") == []


def test_a_batch_is_paired_element_by_element() -> None:
    relay = Relay([], strict=True)
    relay.feed(A, b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]\n')
    relay.feed(C, b'[{"jsonrpc":"2.0","id":1,"result":{}}]\n')
    assert [r.method for r in relay.session.pending(A)] == ["b"]


def test_once_the_agent_is_gone_every_request_is_answered_by_the_bridge() -> None:
    relay = Relay([], strict=True, max_line=64)
    assert relay.fail_pending("gone") == []
    out = relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"a"}\n{"jsonrpc":"2.0","method":"n"}\n'
                        b'{"jsonrpc":"2.0","id":"\\udc00","method":"b"}\n'
                        b'{"jsonrpc":"2.0","id":3,"method":"c","params":"' + b"x" * 100 + b'"}\n')
    answers = [orjson.loads(f.data.replace(b"\\udc00", b"?")) for f in out if f.direction is C]
    assert [a["id"] for a in answers] == [1, "?", 3]


def test_closing_a_session_frees_its_state() -> None:
    relay = Relay([], strict=True)
    for n in range(1000):
        relay.session.state_for(SuggestionsState, f"s{n}").offered = [{"text": "x"}]
        relay.feed(A, b'{"jsonrpc":"2.0","id":%d,"method":"session/close","params":{"sessionId":"s%d"}}\n' % (n, n))
        relay.feed(C, b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % n)
    assert relay.session.session_count == 0


def test_a_notification_hook_without_triggers_is_refused_at_definition() -> None:
    """Without triggers the hook would run only on lines parsed for another reason."""
    with pytest.raises(TypeError, match="declares no triggers"):
        class Silent(Rule):
            def notification(self, frame: Frame, session: Connection) -> Replace:
                return DROP


def test_every_line_triggers_see_every_notification_even_in_runs() -> None:
    from acp_bridge.core.rewrites import EVERY_LINE

    class Count(Rule):
        name = "count"
        triggers = EVERY_LINE

        def __init__(self) -> None:
            self.seen = 0

        def notification(self, frame: Frame, session: Connection) -> Replace:
            self.seen += 1
            assert frame.msg is not None
            return Replace(frame.msg)

    rule = Count()
    relay = Relay([rule], strict=True)
    relay.feed(C, UPDATE * MANY)
    assert rule.seen == MANY


def test_an_emit_held_behind_a_long_line_that_the_stream_tears_starts_a_line_of_its_own() -> None:
    """The long line never ends (its stream does): the held emit follows a newline."""
    relay = Relay([Withdraw()], strict=True, max_line=64)
    relay.feed(C, b'{"long":"' + b"x" * 100)
    assert sent(relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"p"}\n'), C) == b""  # held
    assert sent(relay.feed_eof(C), C) == b"\n" + W
    assert sent(relay.fail_pending("gone"), C).startswith(b'{"jsonrpc":"2.0","id":1,"error"')  # no second newline


# -- under strict, and when the bridge stops itself ------------------------------------------
NESTED = b"[" * 300 + b"]" * 300  # past the 254 levels orjson writes
PROMPT = b'{"jsonrpc":"2.0","id":1,"method":"p"}\n'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'


def stopped(id_: bytes = b"1") -> bytes:
    return b'{"jsonrpc":"2.0","id":' + id_ + b',"error":{"code":-32603,"message":"stopped"}}\n'


class MarkAnswers(Rule):
    name = "mark"

    def response(self, frame: Frame, request: Pending | None, session: Connection) -> Replace:
        assert frame.msg is not None
        return Replace({**frame.msg, "result": {"marked": frame.msg.get("result")}})


def test_a_rule_that_raises_on_an_answer_leaves_it_in_flight_and_the_one_before_it_to_be_sent() -> None:
    """Under strict the answer the rule failed on is not forwarded: its request must still
    get an answer when the bridge stops. The answer before it in the same read goes out
    first (`sent_first`), as it would have one line at a time, and is not answered again."""
    relay = Relay([FailOnSecondAnswer()], strict=True)
    relay.feed(A, PROMPT + b'{"jsonrpc":"2.0","id":2,"method":"p"}\n')
    update = b'{"jsonrpc":"2.0","method":"u"}\n'
    with pytest.raises(RuleError, match=r"^rule 'fail-on-2' failed: RuntimeError: bug$") as raised:
        relay.feed(C, ANSWER + update + b'{"jsonrpc":"2.0","id":2,"result":{}}\n')
    assert [fwd.data for fwd in raised.value.sent_first] == [ANSWER, update]
    assert [fwd.data for fwd in relay.fail_pending("stopped")] == [stopped(b"2")]


def test_a_rewrite_too_deep_to_write_back_raises_under_strict_and_stays_in_flight() -> None:
    relay = Relay([Rename()], strict=True)
    raw = b'{"jsonrpc":"2.0","id":1,"method":"old","params":' + NESTED + b"}\n"
    with pytest.raises(RuleError, match=r"^rule 'rename' failed: Unencodable: what the rules \(rename\) made of "
                                        r"old id 1 cannot be written back: "):
        relay.feed(A, raw)
    assert [p.method for p in relay.session.pending(A)] == ["old"]  # answered as the bridge stops


def test_an_answer_whose_rewrite_cannot_be_written_is_in_flight_again_under_strict() -> None:
    """It is not forwarded: the request it answered must still get an answer. The answer
    before it in the same read is (`sent_first`)."""
    relay = Relay([MarkAnswers()], strict=True)
    relay.feed(A, PROMPT + b'{"jsonrpc":"2.0","id":2,"method":"p"}\n')
    with pytest.raises(RuleError, match=r"made of the answer to p id 2 cannot be written back") as raised:
        relay.feed(C, ANSWER + b'{"jsonrpc":"2.0","id":2,"result":' + NESTED + b"}\n")
    assert [fwd.data for fwd in raised.value.sent_first] == [b'{"jsonrpc":"2.0","id":1,"result":{"marked":{}}}\n']
    assert [fwd.data for fwd in relay.fail_pending("stopped")] == [stopped(b"2")]


@pytest.mark.parametrize("bulk", [True, False])
def test_strict_keeps_what_a_long_read_made_before_the_failing_line(bulk: bool) -> None:
    """A read past the bulk threshold, relayed as runs: the run before the failing line is
    kept too, and a torn last line fed at EOF keeps what came before it."""
    chunk = b'{"jsonrpc":"2.0","method":"n","params":{"pad":"' + b"x" * 3000 + b'"}}\n'
    relay = Relay([FailOnSecondAnswer()], strict=True, bulk=bulk)
    relay.feed(A, b'{"jsonrpc":"2.0","id":2,"method":"p"}\n')
    with pytest.raises(RuleError) as raised:
        relay.feed(C, chunk + b'{"jsonrpc":"2.0","id":2,"result":{}}\n' + chunk)
    assert b"".join(fwd.data for fwd in raised.value.sent_first) == chunk
    relay = Relay([FailOnSecondAnswer()], strict=True, bulk=bulk)
    relay.feed(A, b'{"jsonrpc":"2.0","id":2,"method":"p"}\n')
    assert relay.feed(C, b'{"jsonrpc":"2.0","id":2,"result":{}}') == []
    with pytest.raises(RuleError) as raised:
        relay.feed_eof(C)
    assert raised.value.sent_first == []


class FailOnBad(Rule):
    """Fails on a request or a notification whose method is "bad"."""

    name = "fail-on-bad"
    triggers = (b'"bad"',)

    def request(self, frame: Frame, session: Connection) -> Outcome:
        if frame.method == "bad":
            raise RuntimeError("bug")
        return PASS

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        return self.request(frame, session)


BIG = b"9" * 100
NOTE = b'{"jsonrpc":"2.0","method":"n","params":{}}\n'
AFTER = [b'{"jsonrpc":"2.0","id":1,"method":"ok"}\n', b'{"jsonrpc":"2.0","method":"bad"}\n', NOTE,
         b'{"jsonrpc":"2.0","id":2,"method":"bad"}\n', b'{"jsonrpc":"2.0","id":"x","result":{}}\n',
         b'{"jsonrpc":"2.0","id":' + BIG + b',"method":"ok"}\n']


@pytest.mark.parametrize(("bulk", "run_min", "split"), [
    (False, 1, 0), (False, 1, 20), (True, 1, 0), (True, 1 << 20, 0), (True, 1, 20), (True, 1, 50)])
def test_strict_keeps_the_lines_after_the_failing_one_and_answers_the_requests_among_them(
        bulk: bool, run_min: int, split: int) -> None:
    """The complete lines of the read after the failing one are the error's `rest` (a torn
    last one stays with the splitter), in the per-line path, the runs, and a line in
    progress finished on its own (`split`: the read's first part came before). Once the
    bridge stops, `refuse_rest` answers the requests among them, in order, and nothing
    else: the notification a rule fails on again stops nothing, nothing goes to the agent."""
    bad = b'{"jsonrpc":"2.0","id":0,"method":"bad"}\n'
    data = NOTE + bad + b"".join(AFTER) + b'{"jsonrpc":"2.0","id":3,"me'
    relay = Relay([FailOnBad()], strict=True, bulk=bulk, run_min=run_min)
    before = relay.feed(A, data[:split]) if split else []
    with pytest.raises(RuleError, match=r"^rule 'fail-on-bad' failed: RuntimeError: bug$") as raised:
        relay.feed(A, data[split:])
    assert [fwd.data for fwd in before + raised.value.sent_first] == [NOTE]
    if bulk and run_min == 1 and not split:  # the run path: the note left as a run
        assert raised.value.sent_first[0].untouched_lines
    assert raised.value.rest == AFTER
    assert [fwd.data for fwd in relay.fail_pending("stopped")] == [stopped(b"0")]
    refused = relay.refuse_rest(raised.value.rest)
    assert [(fwd.direction, fwd.data) for fwd in refused if fwd.data] == [
        (C, stopped(b"1")), (C, stopped(b"2")), (C, stopped(BIG))]
    assert [fwd.raw for fwd in refused if fwd.verdict is Verdict.DROP] == [AFTER[0], AFTER[3], AFTER[5]]
    assert relay.session.pending(A) == []


class Look(Rule):
    name = "look"

    def request(self, frame: Frame, session: Connection) -> Outcome:
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


class NotANumber(Rule):
    """Writes a value JSON cannot carry (NaN, Infinity) into its result, or an emit."""

    name = "not-a-number"

    def __init__(self, value: object, where: str) -> None:
        self.value, self.where = value, where

    def request(self, frame: Frame, session: Connection) -> Replace:
        assert frame.msg is not None
        if self.where == "emit":
            return Replace(frame.msg, then=(Emit(C, {"jsonrpc": "2.0", "method": "n", "params": self.value}),))
        return Replace({**frame.msg, "params": self.value})


@pytest.mark.parametrize("value", [
    float("nan"), float("inf"), -float("inf"), [1, [2, {"x": float("nan")}]], {"a": {"b": [None, float("-inf")]}},
    [{"deep": [[[[float("nan")]]]]}],
])
@pytest.mark.parametrize("where", ["replace", "emit"])
def test_nan_or_infinity_in_a_rules_result_is_a_rule_failure(value: object, where: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """orjson writes them as null: the peer would get a value nobody wrote. Fail open, said
    once; strict stops."""
    raw = b'{"jsonrpc":"2.0","id":1,"method":"m","params":null}\n'
    relay = Relay([NotANumber(value, where)])
    with caplog.at_level(logging.WARNING, "acp_bridge.relay"):
        for _ in range(2):
            (fwd,) = relay.feed(A, raw)
            assert (fwd.verdict, fwd.data, fwd.rules) == (Verdict.ERROR, raw, ("not-a-number",))
            assert fwd.error is not None and fwd.error.startswith("cannot re-encode: NaN or Infinity at /")
    assert len(caplog.records) == 1
    with pytest.raises(RuleError, match=r"cannot be written back: NaN or Infinity at /"):
        Relay([NotANumber(value, where)], strict=True).feed(A, raw)


def test_a_null_a_rule_writes_is_no_failure() -> None:
    (fwd,) = Relay([NotANumber({"a": [None, 1.5]}, "replace")], strict=True).feed(
        A, b'{"jsonrpc":"2.0","id":1,"method":"m"}\n')
    assert fwd.data == b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[null,1.5]}}\n'
