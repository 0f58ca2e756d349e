"""MemberScanner: the top-level id and method of a line, fed in any pieces."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.members import MemberScanner, Members
from tests.core.test_framing import split_at


def scan_in(parts: list[bytes]) -> Members:
    scanner = MemberScanner()
    for part in parts:
        scanner.feed(part)
    return scanner.finish()


@pytest.mark.parametrize(("line", "keys", "literals"), [
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{}}', {"jsonrpc", "id", "method"},
                 {"id": b"1", "method": b'"x"'}, id="request-stops-early"),
    pytest.param(b'{"method":"x","params":{"id":5,"t":"\\"id\\":6"},"id":"late"}', {"method", "params", "id"},
                 {"id": b'"late"', "method": b'"x"'}, id="late-id-nested-decoys"),
    pytest.param(b' { "id" : 12345678901234567890123 , "result" : null } \r\n', {"id", "result"},
                 {"id": b"12345678901234567890123"}, id="response-big-int-spaces"),
    pytest.param(b'{"\\u0069d":"\\ud83d","method":"m"}', {"id", "method"},
                 {"id": b'"\\ud83d"', "method": b'"m"'}, id="escaped-key-lone-surrogate"),
    pytest.param(b'{"id":{"a":[1]},"method":"m"}', {"id", "method"}, {"method": b'"m"'}, id="object-id"),
    pytest.param(b'{"method":"session/update","params":{"text":"a\\\\"}}', {"method", "params"},
                 {"method": b'"session/update"'}, id="escaped-backslash-before-quote"),
])
def test_scan_finds_top_level_members(line: bytes, keys: set[str], literals: dict[str, bytes]) -> None:
    for parts in ([line], [line[i:i + 1] for i in range(len(line))]):
        found = scan_in(parts)
        assert found.obj
        assert keys <= found.keys | {"jsonrpc"} and found.literals == literals


@pytest.mark.parametrize("line", [b"", b"[1,2]", b"garbage", b'"id"', b"  \n"])
def test_what_is_no_object_has_no_members(line: bytes) -> None:
    assert scan_in([line]) == Members(False)


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30),
                         st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["id", "method", "x", "é"]), inner, max_size=3)),
    max_leaves=12)


@given(msg=st.dictionaries(st.sampled_from(["id", "method", "params", "result", "x"]), json_values, max_size=5),
       cuts=st.lists(st.integers(0, 400), max_size=6))
def test_scan_agrees_with_the_parser(msg: dict, cuts: list[int]) -> None:
    """Whatever the pieces, a scalar id or a string method is found exactly as written, up to
    where the scan may stop: once the id and the method, or a result or error, are known."""
    line = _dumps(msg)  # stdlib: integers beyond 64 bits written as they are
    found = scan_in(split_at(line, cuts))
    assert found.obj
    read: list[str] = []
    for key in msg:
        read.append(key)
        if "id" in read and ("method" in read or {"result", "error"} & set(read)) \
                and not isinstance(msg["id"], (dict, list)):
            break
    for key in ("id", "method"):
        if key not in read:
            continue
        value = msg.get(key)
        if key in msg and not isinstance(value, (dict, list)):
            assert found.literals[key] == _dumps(value)
        elif key in found.literals:
            pytest.fail(f"{key} is not a scalar, yet found {found.literals[key]!r}")


def _dumps(value: object) -> bytes:
    import json

    return json.dumps(value, separators=(",", ":")).encode()
