"""classify: one line in, a Frame out, never an exception."""

from __future__ import annotations

import math
import re

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core import Direction, Kind, classify
from acp_bridge.core.messages import Unencodable, encode, id_key

D = Direction.TO_AGENT


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n', Kind.REQUEST, id="request"),
        pytest.param(b'{"jsonrpc":"2.0","id":"1","result":{}}\n', Kind.RESPONSE, id="response"),
        pytest.param(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}\n', Kind.RESPONSE, id="error-null-id"),
        pytest.param(b'{"jsonrpc":"2.0","method":"session/update"}\n', Kind.NOTIFICATION, id="notification"),
        pytest.param(b'{"jsonrpc":"2.0","method":"_x/y","params":[]}\r\n', Kind.NOTIFICATION, id="ext-crlf"),
        pytest.param(b'[{"jsonrpc":"2.0","id":1,"method":"a"}]\n', Kind.OTHER, id="batch"),
        pytest.param(b"\n", Kind.OTHER, id="blank"),
        pytest.param(b"not json\n", Kind.OTHER, id="text"),
        pytest.param(b'{"a":NaN}\n', Kind.OTHER, id="nan"),
        pytest.param(b'"\\ud800"\n', Kind.OTHER, id="lone-surrogate"),
        pytest.param(b'{"a":"\xff"}\n', Kind.OTHER, id="bad-utf8"),
        pytest.param(b'{"id":1}\n', Kind.OTHER, id="id-only"),
        pytest.param(b'{"id":1,"method":5}\n', Kind.OTHER, id="method-not-string"),
        pytest.param(b"42\n", Kind.OTHER, id="scalar"),
    ],
)
def test_classify(raw: bytes, kind: Kind) -> None:
    frame = classify(D, raw)
    assert frame.kind is kind
    assert frame.raw is raw


def test_terminator_is_read_from_the_raw_line() -> None:
    assert classify(D, b"{}\r\n").terminator == b"\r\n"
    assert classify(D, b"{}\n").terminator == b"\n"
    assert classify(D, b"{}").terminator == b""


@pytest.mark.parametrize(("raw", "members"), [
    (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}\n', ("m", 1, {"a": 1}, None, None)),
    (b'{"jsonrpc":"2.0","id":"x","result":{"stopReason":"end_turn"}}\n', (None, "x", None, {"stopReason": "end_turn"}, None)),
    (b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"no"}}\n',
     (None, 2, None, None, {"code": -32603, "message": "no"})),
    (b'{"jsonrpc":"2.0","method":"n"}\n', ("n", None, None, None, None)),
    (b'{"jsonrpc":"2.0","id":3,"result":null}\n', (None, 3, None, None, None)),
    (b'{"method":7}\n', (None, None, None, None, None)),  # not a string: no method
    (b'[1]\n', (None, None, None, None, None)),  # nothing parsed into a message
])
def test_a_frame_names_the_members_of_its_message(raw: bytes, members: tuple[object, ...]) -> None:
    """What a rule reads as `msg.result` rather than `msg.msg.get("result")`."""
    frame = classify(D, raw)
    assert (frame.method, frame.id, frame.params, frame.result, frame.error) == members


def test_ids_of_different_json_types_are_different_keys() -> None:
    keys = {id_key(1), id_key("1"), id_key(1.0), id_key(True), id_key(None), id_key([1])}
    assert len(keys) == 6


@given(st.binary(max_size=512))
def test_classify_never_raises(raw: bytes) -> None:
    assert classify(D, raw).raw is raw


# -- lone surrogates: valid JSON that JavaScript's JSON.stringify writes, orjson refuses -------

HALF = "\ud83d"  # the first half of an emoji's surrogate pair, alone


@pytest.mark.parametrize(
    ("raw", "kind", "msg"),
    [
        pytest.param(b'{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"t":"a\\ud83d"}}\n',
                     Kind.REQUEST, {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"t": "a" + HALF}},
                     id="request-text"),
        pytest.param(b'{"jsonrpc":"2.0","id":"\\ud83d","result":{}}\r\n',
                     Kind.RESPONSE, {"jsonrpc": "2.0", "id": HALF, "result": {}}, id="response-id"),
        pytest.param(b'{"jsonrpc":"2.0","method":"n","params":{"\\udc00":"\\uD83D\\u00e9x"}}\n',
                     Kind.NOTIFICATION, {"jsonrpc": "2.0", "method": "n", "params": {"\udc00": HALF + "\u00e9x"}},
                     id="key-low-half-upper-hex"),
        pytest.param(b'{"id":1,"method":"m","params":{"t":"\\ud83d\\u0041","n":[18446744073709551616,1.5]}}\n',
                     Kind.REQUEST, {"id": 1, "method": "m", "params": {"t": HALF + "A", "n": [18446744073709551616.0, 1.5]}},
                     id="numbers-as-orjson-reads-them"),
        pytest.param(b'{"id":1,"method":"m","params":{"t":"\\ud83d","n":NaN}}\n', Kind.OTHER, None, id="and-nan"),
        pytest.param(b'{"id":1,"method":"m","params":{"t":"\\ud83d","n":-Infinity}}\n', Kind.OTHER, None, id="and-infinity"),
        pytest.param(b'{"id":1,"method":"m","params":{"t":"\\ud83d","n":1e400}}\n', Kind.OTHER, None, id="and-huge-number"),
        pytest.param(b'{"id":1,"method":"m","params":{"t":"\\ud83d","b":"\xff"}}\n', Kind.OTHER, None, id="and-bad-utf8"),
        pytest.param(b'{"id":1,"method":"m","params":{"t":"\\ud83d"}} x\n', Kind.OTHER, None, id="and-trailing-text"),
        pytest.param(b'{"id":1,"method":"m","params":{"t":"\\ud83d","u":"\x00"}}\n', Kind.OTHER, None, id="and-control-char"),
        pytest.param(b'{"id":1,"method":"m","params":{"t":"\\ud83d"}\n', Kind.OTHER, None, id="and-unclosed"),
    ],
)
def test_a_lone_surrogate_is_read_as_orjson_reads_the_rest(raw: bytes, kind: Kind, msg: object) -> None:
    frame = classify(D, raw)
    assert (frame.kind, frame.msg) == (kind, msg)
    assert frame.raw is raw


@pytest.mark.parametrize(
    ("msg", "out"),
    [
        pytest.param({"t": "a" + HALF + "\u00e9\n\""}, b'{"t":"a\\ud83d\xc3\xa9\\n\\""}\n', id="value"),
        pytest.param({"id": HALF, "k": [HALF, {"x": "\udc00"}]}, b'{"id":"\\ud83d","k":["\\ud83d",{"x":"\\udc00"}]}\n', id="nested"),
        pytest.param({"p": {"\udc00": {"v": HALF}, "n": 1}}, b'{"p":{"\\udc00":{"v":"\\ud83d"},"n":1}}\n', id="key"),
    ],
)
def test_encode_writes_a_lone_surrogate_as_an_escape(msg: dict[str, object], out: bytes) -> None:
    assert encode(msg) == out
    assert classify(D, out).msg == msg


def test_encode_keeps_numbers_as_written_beside_a_lone_surrogate() -> None:
    raw = b'{"id":12345678901234567890123,"method":"m","params":{"\\ud83d":[1.50,1e3]}}\n'
    frame = classify(D, raw)
    assert encode(frame.msg, source=frame) == raw  # type: ignore[arg-type]


def test_encode_refuses_a_lone_surrogate_nested_past_what_can_be_written() -> None:
    deep: object = HALF
    for _ in range(300):
        deep = [deep]
    with pytest.raises(Unencodable):
        encode({"d": deep})


@pytest.mark.parametrize(("msg", "where"), [
    ({"a": float("nan")}, "/a"),
    ({"a": [1, None, {"b/c~": float("inf")}]}, "/a/2/b~1c~0"),
    ({"a": [None, "\ud800", -float("inf")]}, "/a/2"),  # the lone surrogate's path too
    ({"a": [[[[[[float("nan")]]]]]]}, "/a/0/0/0/0/0/0"),
])
def test_encode_refuses_nan_and_infinity_where_orjson_would_write_null(msg: dict[str, object], where: str) -> None:
    with pytest.raises(Unencodable, match=f"^NaN or Infinity at {re.escape(where)}: JSON has no such number$"):
        encode(msg)


def test_encode_walks_no_message_without_a_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check's cost: only a message whose encoding holds `null` is walked."""
    from acp_bridge.core import messages

    walked: list[object] = []
    monkeypatch.setattr(messages, "non_finite", walked.append)
    assert encode({"a": [1.5, "null"], "b": None}) == b'{"a":[1.5,"null"],"b":null}\n'
    assert encode({"a": [1.5, 2]}) == b'{"a":[1.5,2]}\n'
    assert walked == [{"a": [1.5, "null"], "b": None}]


def _finite_everywhere(value: object) -> bool:
    if isinstance(value, dict):
        return all(_finite_everywhere(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite_everywhere(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20)


@given(JSONISH)
def test_encode_refuses_exactly_what_holds_nan_or_infinity(value: object) -> None:
    """Anywhere in the message, however nested; what it writes reads back equal."""
    if _finite_everywhere(value):
        assert orjson.loads(encode({"v": value})) == {"v": value}
    else:
        with pytest.raises(Unencodable, match=r"^NaN or Infinity at /v"):
            encode({"v": value})
