"""json_spans: the byte spans of members and values, whole and over pieces."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.json_spans import SpanError, ValueEnd, head_members, spans, value_end
from tests.core.json_values import JSON_VALUES, encoded


@pytest.mark.parametrize(("line", "expected"), [
    pytest.param(b'{"a":1,"b":"x"}', {"a": b"1", "b": b'"x"'}, id="compact"),
    pytest.param(b'{ "a" : [1, {"}": "]"}] , "b" :\t{} }', {"a": b'[1, {"}": "]"}]', "b": b"{}"}, id="spaced"),
    pytest.param(b'{"k\\"ey":"v\\\\","n":1234567890123456789012345678901234567890}',
                 {'k"ey': b'"v\\\\"', "n": b"1234567890123456789012345678901234567890"}, id="escapes-and-a-big-number"),
    pytest.param(b'{"\\u0061":true,"a":null}', {"a": b"null"}, id="an-escaped-key-repeated-last-wins"),
    pytest.param(b"{}", {}, id="empty"),
])
def test_spans_are_each_members_own_bytes(line: bytes, expected: dict[str, bytes]) -> None:
    assert {key: line[start:end] for key, (start, end) in spans(line).items()} == expected


@pytest.mark.parametrize("line", [b"[1]", b'{"a":1', b'{"a" 1}', b'{"a":"x}', b'{"a":1,}', b"", b'{"a":{"b":1}'])
def test_what_is_not_a_whole_object_is_a_span_error(line: bytes) -> None:
    with pytest.raises(SpanError):
        spans(line)


def test_nesting_100000_deep_is_a_counter_not_a_stack() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    line = b'{"a":' + deep + b',"b":2}'
    assert spans(line) == {"a": (5, 5 + len(deep)), "b": (len(line) - 2, len(line) - 1)}


@given(value=JSON_VALUES, spacing=st.integers(0, 2))
def test_a_values_end_is_the_end_of_its_bytes(value: Any, spacing: int) -> None:
    data = encoded(value, spacing)
    assert value_end(data + b" ,", 0) == len(data)


@given(members=st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=5), spacing=st.integers(0, 2))
def test_each_span_decodes_to_its_members_value(members: dict[str, Any], spacing: int) -> None:
    line = encoded(members, spacing)
    found = spans(line)
    assert list(found) == list(members)
    assert {key: json.loads(line[start:end]) for key, (start, end) in found.items()} == members


@given(value=st.lists(JSON_VALUES, max_size=4) | st.dictionaries(st.text(max_size=4), JSON_VALUES) | st.text(),
       spacing=st.integers(0, 2), cuts=st.lists(st.integers(0, 400), max_size=6), rest=st.binary(max_size=20))
def test_over_any_pieces_the_end_is_found_where_it_is(value: Any, spacing: int, cuts: list[int], rest: bytes) -> None:
    data = encoded(value, spacing) + rest
    end = value_end(data, 0)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    follower, found = ValueEnd(), None
    for start, stop in itertools.pairwise(bounds):
        at = follower.feed(data[start:stop])
        if at is not None:
            found = start + at
            break
    assert found == end


def test_a_head_stops_at_the_value_it_cannot_see_the_end_of() -> None:
    head = b'{"jsonrpc":"2.0","id":7,"method":"m","params":{"text":"a very long'
    assert list(head_members(head)) == [("jsonrpc", 11, 16), ("id", 22, 23), ("method", 33, 36), ("params", 46, None)]
    assert list(head_members(b'{"id":12')) == []  # a number cut short is not known to have ended
