"""classify: one line in, a Frame out, never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core import Direction, Kind, classify
from acp_bridge.core.messages import id_key

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


def test_ids_of_different_json_types_are_different_keys() -> None:
    keys = {id_key(1), id_key("1"), id_key(1.0), id_key(True), id_key(None), id_key([1])}
    assert len(keys) == 6


@given(st.binary(max_size=512))
def test_classify_never_raises(raw: bytes) -> None:
    assert classify(D, raw).raw is raw
