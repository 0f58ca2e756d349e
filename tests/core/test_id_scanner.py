"""MemberScanner: the top-level id and method of a line (or of each object of a batch),
fed in any pieces. Reading what it finds (`json_value`): tests/core/test_literals.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.id_scanner import Members, MemberScanner
from tests.core.helpers import split_at


def scan_in(parts: list[bytes]) -> list[Members]:
    scanner = MemberScanner()
    for part in parts:
        scanner.feed(part)
    return scanner.finish()


def every_split(line: bytes) -> list[list[bytes]]:
    return [[line], [line[i:i + 1] for i in range(len(line))],
            *([line[:i], line[i:]] for i in range(1, len(line)))]


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
    pytest.param(b'{"method":"session/update","params":{"text":"a\\\\"},"id":2}', {"method", "params", "id"},
                 {"method": b'"session/update"', "id": b"2"}, id="escaped-backslash-before-quote"),
    pytest.param(b'{"method":"n","params":{"t":"\\\\\\"}\\\\"},"id":3}', {"method", "params", "id"},
                 {"method": b'"n"', "id": b"3"}, id="escape-runs"),
    pytest.param(b'{"method":[],"id":1,"x":NaN}', {"method", "id", "x"}, {"id": b"1"}, id="method-not-a-string"),
])
def test_scan_finds_top_level_members(line: bytes, keys: set[str], literals: dict[str, bytes]) -> None:
    for parts in every_split(line):
        (found,) = scan_in(parts)
        assert keys <= found.keys | {"jsonrpc"} and found.literals == literals


def test_a_batch_gives_each_object_its_members() -> None:
    line = (b'[{"jsonrpc":"2.0","id":1,"method":"a","params":{"t":"\\"x"}},7,'
            b'{"jsonrpc":"2.0","id":"\\ud83d","result":NaN},{"method":"n"}]')
    for parts in every_split(line):
        found = scan_in(parts)
        assert [(m.is_request, m.is_response, m.literals.get("id")) for m in found] == [
            (True, False, b"1"), (False, True, b'"\\ud83d"'), (False, False, None)]


@pytest.mark.parametrize("line", [b"", b"[1,2]", b"garbage", b'"id"', b"  \n", b"[[{\"id\":1,\"method\":\"x\"}]]"])
def test_what_holds_no_message_gives_no_members(line: bytes) -> None:
    assert [m for m in scan_in([line]) if m.is_request or m.is_response] == []


def test_a_method_that_is_not_captured_is_no_request() -> None:
    """A method value too long, or not a string, or torn: known as a key, but no request."""
    (found,) = scan_in([b'{"jsonrpc":"2.0","id":1,"method":"' + b"m" * (65 * 1024) + b'"}'])
    assert "method" in found.keys and not found.is_request and not found.is_response


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30),
                         st.text(alphabet=st.characters(), max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["id", "method", "x", "é"]), inner, max_size=3)),
    max_leaves=12)
objects = st.dictionaries(st.sampled_from(["id", "method", "params", "result", "x"]), json_values, max_size=5)


@given(msg=objects, cuts=st.lists(st.integers(0, 400), max_size=6), ascii_only=st.booleans())
def test_scan_agrees_with_the_parser(msg: dict[str, Any], cuts: list[int], ascii_only: bool) -> None:
    """Whatever the pieces and escapes, a scalar id or method is found exactly as written,
    up to where the scan may stop: once the id and the method, or a result or error, are
    known."""
    line = _dumps(msg, ascii_only)  # stdlib: integers beyond 64 bits written as they are
    (found,) = scan_in(split_at(line, cuts))
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
            assert found.literals[key] == _dumps(value, ascii_only)
        elif key in found.literals:
            pytest.fail(f"{key} is not a scalar, yet found {found.literals[key]!r}")


@given(batch=st.lists(objects, max_size=4), cuts=st.lists(st.integers(0, 600), max_size=6))
def test_scan_reads_every_object_of_a_batch(batch: list[dict[str, Any]], cuts: list[int]) -> None:
    found = scan_in(split_at(_dumps(batch, True), cuts))
    assert len(found) == len(batch)
    for members, msg in zip(found, batch, strict=True):
        assert members.keys == set(msg)
        for key in ("id", "method"):
            if key in msg and not isinstance(msg[key], (dict, list)):
                assert members.literals[key] == _dumps(msg[key], True)


def _dumps(value: object, ascii_only: bool) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
