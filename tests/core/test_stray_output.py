"""Stray agent output (bridge-rules 6.3): with `divert_stray`, an agent line that is not a
JSON object is not forwarded (verdict diverted, rule `stray-output`); everything else, and
everything with the option off, leaves byte for byte. Table-driven on the pure core."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.messages import Direction
from acp_bridge.core.printable import STRAY_SHOWN, stray_line
from acp_bridge.core.relay import RUN_MIN, Forward, Relay, Verdict

A, C = Direction.TO_AGENT, Direction.TO_CLIENT

STRAY = [
    pytest.param(b"Starting agent v1.2\n", id="banner"),
    pytest.param(b"[INFO] listening\n", id="log-line-starting-like-a-batch"),
    pytest.param(b"\n", id="blank"),
    pytest.param(b"  \t\r\n", id="whitespace-crlf"),
    pytest.param(b'"a string"\n', id="json-string"),
    pytest.param(b"42\n", id="json-number"),
    pytest.param(b"null\n", id="json-null"),
    pytest.param(b"\xff\xfe not utf-8\n", id="not-utf-8"),
    pytest.param(b"\x1b]0;pwned\x07\n", id="control-characters"),
]
KEPT = [
    pytest.param(b'[{"jsonrpc":"2.0","method":"x"}]\n', id="batch"),
    pytest.param(b"[1, 2]\n", id="array"),
    pytest.param(b'{"not":"json-rpc"}\n', id="object-not-json-rpc"),
    pytest.param(b'{"jsonrpc":"2.0","method":"x","params":{"n":NaN}}\n', id="object-orjson-refuses"),
    pytest.param(b"{oops\n", id="starts-like-an-object"),
    pytest.param(b'  {"jsonrpc":"2.0","method":"x"}\n', id="message-after-spaces"),
]


def feed(relay: Relay, direction: Direction, data: bytes, bytewise: bool) -> list[Forward]:
    pieces = [data[i:i + 1] for i in range(len(data))] if bytewise else [data]
    return [f for piece in pieces for f in relay.feed(direction, piece)]


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("data", STRAY)
def test_stray_agent_line_is_diverted(data: bytes, bytewise: bool) -> None:
    out = feed(Relay(divert_stray=True, strict=True), C, data, bytewise)
    assert [(f.direction, f.data, f.raw, f.verdict, f.rules) for f in out] == [
        (C, b"", data, Verdict.DIVERTED, ("stray-output",))]


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("data", KEPT)
def test_json_objects_and_batches_go_on_as_they_came(data: bytes, bytewise: bool) -> None:
    out = feed(Relay(divert_stray=True, strict=True), C, data, bytewise)
    assert b"".join(f.data for f in out) == data
    assert Verdict.DIVERTED not in {f.verdict for f in out}


@pytest.mark.parametrize("data", STRAY + KEPT)
def test_off_and_toward_the_agent_every_line_goes_on(data: bytes) -> None:
    """The default is `forward`: bytes out == bytes in. The client's lines are never diverted."""
    assert b"".join(f.data for f in Relay(strict=True).feed(C, data)) == data
    assert b"".join(f.data for f in Relay(divert_stray=True, strict=True).feed(A, data)) == data


def test_a_torn_last_line_is_diverted_at_the_end_of_the_stream() -> None:
    relay = Relay(divert_stray=True, strict=True)
    assert relay.feed(C, b"Goodbye") == []
    assert [(f.data, f.raw, f.verdict) for f in relay.feed_eof(C)] == [(b"", b"Goodbye", Verdict.DIVERTED)]


def test_a_chunk_of_messages_and_banners_keeps_the_messages_in_order() -> None:
    """The bulk path (a chunk over RUN_MIN) finds the lines that do not start with "{"."""
    message = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}\n'
    lines = [message] * 40 + [b"banner one\n"] + [message] * 40 + [b"\n", b"banner two\r\n"] + [message] * 3
    chunk = b"".join(lines)
    assert len(chunk) > RUN_MIN
    out = Relay(divert_stray=True).feed(C, chunk)
    assert b"".join(f.data for f in out) == message * 83
    assert [f.raw for f in out if f.verdict is Verdict.DIVERTED] == [b"banner one\n", b"\n", b"banner two\r\n"]


def test_a_response_after_a_banner_still_pairs() -> None:
    relay = Relay(divert_stray=True, strict=True)
    relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
    out = relay.feed(C, b'Loading...\n{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}\n')
    assert [f.verdict for f in out] == [Verdict.DIVERTED, Verdict.PASS]
    assert out[1].request is not None and out[1].request.method == "initialize"


@pytest.mark.parametrize(("raw", "shown"), [
    (b"Starting agent\n", "acp-bridge: agent stdout (not forwarded): Starting agent"),
    (b"tab\there\r\n", "acp-bridge: agent stdout (not forwarded): tab\\there"),
    (b"\x1b]0;pwned\x07 back\\slash\n", "acp-bridge: agent stdout (not forwarded): \\u001b]0;pwned\\u0007 back\\\\slash"),
    (b"\xff bad\n", "acp-bridge: agent stdout (not forwarded): \ufffd bad"),
    ("x\u2028y\n".encode(), "acp-bridge: agent stdout (not forwarded): x\\u2028y"),
    (b"  \n", None),
    (b"", None),
])
def test_stray_line_is_one_printable_line(raw: bytes, shown: str | None) -> None:
    assert stray_line(raw) == shown


def test_stray_line_is_bounded() -> None:
    shown = stray_line(b"a" * 10_000 + b"\n")
    assert shown == "acp-bridge: agent stdout (not forwarded): " + "a" * STRAY_SHOWN + " ... (10000 bytes)"
    assert stray_line("é".encode() * STRAY_SHOWN) is not None  # a character cut in two is replaced


_MESSAGE = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}'
_LINES = st.sampled_from([_MESSAGE, b"[1]", b"{oops", b"banner", b"", b"  ", b"42", b'"x"', b"\xff",
                          b'{"jsonrpc":"2.0","id":1,"result":{}}'])


@given(lines=st.lists(st.tuples(_LINES, st.sampled_from([b"\n", b"\r\n"])), max_size=60),
       cuts=st.lists(st.integers(0, 4000), max_size=8), bulk=st.booleans())
def test_diverting_takes_out_exactly_the_stray_lines_in_any_chunking(
        lines: list[tuple[bytes, bytes]], cuts: list[int], bulk: bool) -> None:
    data = b"".join(body + end for body, end in lines)
    relay = Relay(divert_stray=True, bulk=bulk, run_min=64)
    points = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    out = [f for a, b in itertools.pairwise(points) for f in relay.feed(C, data[a:b])] + relay.feed_eof(C)
    kept = [body + end for body, end in lines if body.lstrip().startswith((b"{", b"["))]
    assert b"".join(f.data for f in out) == b"".join(kept)
    assert [f.raw for f in out if f.verdict is Verdict.DIVERTED] == [
        body + end for body, end in lines if not body.lstrip().startswith((b"{", b"["))]


@pytest.mark.parametrize("bulk", [True, False])
def test_a_stray_line_over_the_parse_limit_is_diverted_too(bulk: bool) -> None:
    """Past the parse limit a line goes by in pieces: one that does not start like a JSON
    object or batch is stray all the same (a dumped file, a progress bar), decided on its
    first piece; one that does is forwarded as it came, as every long line is."""
    relay = Relay(divert_stray=True, max_line=1024, bulk=bulk, strict=True)
    after = b'{"jsonrpc":"2.0","method":"x"}\n'
    out = relay.feed(C, b"x" * 1500) + relay.feed(C, b"y" * 1500 + b"\n" + after)
    assert [(f.data, f.raw, f.verdict, f.rules) for f in out] == [
        (b"", b"x" * 1500, Verdict.OPAQUE, ("stray-output",)),
        (b"", b"y" * 1500 + b"\n", Verdict.OPAQUE, ("stray-output",)),
        (after, after, Verdict.PASS, ())]
    for kept in (b"[" + b"1," * 800 + b"1]\n", b"{" + b" " * 2000 + b"}\n", b" " * 1100 + b"{}\n"):
        assert b"".join(f.data for f in relay.feed(C, kept)) == kept
    assert b"".join(f.data for f in Relay(max_line=1024).feed(C, b"z" * 2000 + b"\n")) == b"z" * 2000 + b"\n"


def test_a_long_stray_line_is_said_once_without_its_length() -> None:
    assert stray_line(b"a" * 10_000, long=True) == (
        "acp-bridge: agent stdout (not forwarded): " + "a" * STRAY_SHOWN + " ... (a line over the parse limit)")
