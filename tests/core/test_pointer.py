"""The one JSON pointer parser (RFC 6901) that the config and the capture's redaction share."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.pointer import (
    MISSING,
    PointerError,
    escape_token,
    get_pointer,
    json_equal,
    parse_pointer,
    remove_pointer,
    same_json,
    set_pointer,
)


@pytest.mark.parametrize(("pointer", "tokens"), [
    ("", ()),
    ("/", ("",)),
    ("/a", ("a",)),
    ("/a/0/b", ("a", "0", "b")),
    ("/a~1b/m~0n", ("a/b", "m~n")),
    ("/~01", ("~1",)),  # "~1" is decoded first: this is "~" then "1", never "/"
    ("/~10", ("/0",)),
    ("//x/", ("", "x", "")),
    ("/ü ñ", ("ü ñ",)),
])
def test_pointers_and_their_tokens(pointer: str, tokens: tuple[str, ...]) -> None:
    assert parse_pointer(pointer) == tokens


@pytest.mark.parametrize(("pointer", "rule"), [
    ("a/b", "starts with /"),
    ("#/a", "starts with /"),
    ("/a~", "~ is written ~0 and / is written ~1"),
    ("/a~2b", "~ is written ~0 and / is written ~1"),
    ("/~~01", "~ is written ~0 and / is written ~1"),  # passed the old check of the config
    ("/ok/~x", "~ is written ~0 and / is written ~1"),
])
def test_what_is_not_a_pointer(pointer: str, rule: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_pointer(pointer)
    assert str(caught.value) == f"{pointer!r} is not a JSON pointer (RFC 6901: {rule})"


@given(st.lists(st.text()))
def test_escaped_tokens_read_back(tokens: list[str]) -> None:
    pointer = "".join("/" + escape_token(token) for token in tokens)
    assert parse_pointer(pointer) == tuple(tokens)


def test_escape_token_takes_array_indexes() -> None:
    assert escape_token(3) == "3"
    assert escape_token("a/b~c") == "a~1b~0c"


# -- reading and changing a document, copy on write ------------------------------------------

DOC = {"params": {"update": {"sessionUpdate": "usage_update", "used": 1.5}, "list": [{"a": 1}, 2]}, "n": None}


@pytest.mark.parametrize(("pointer", "value"), [
    ("", DOC),
    ("/params/update/sessionUpdate", "usage_update"),
    ("/params/list/0/a", 1),
    ("/params/list/1", 2),
    ("/n", None),
    ("/params/list/2", MISSING),  # past the end
    ("/params/list/01", MISSING),  # RFC 6901: no leading zeros
    ("/params/list/-", MISSING),  # "-" names no element to read
    ("/params/update/used/x", MISSING),  # through a number
    ("/nope", MISSING),
])
def test_get_pointer(pointer: str, value: object) -> None:
    assert get_pointer(DOC, pointer) is value or get_pointer(DOC, pointer) == value


@pytest.mark.parametrize(("pointer", "value", "expected"), [
    ("/params/_meta/x", True, {"params": {"list": [1, 2], "_meta": {"x": True}}}),  # missing objects are made
    ("/params/list/1", 3, {"params": {"list": [1, 3]}}),
    ("/params/list/2", 3, {"params": {"list": [1, 2, 3]}}),  # one past the end appends
    ("/params/list/-", {"b": 1}, {"params": {"list": [1, 2, {"b": 1}]}}),
    ("/params/list/-/b", 1, {"params": {"list": [1, 2, {"b": 1}]}}),
    ("/a~1b", 1, {"params": {"list": [1, 2]}, "a/b": 1}),
])
def test_set_pointer_copies_along_the_path_only(pointer: str, value: object, expected: object) -> None:
    doc = {"params": {"list": [1, 2]}}
    before = orjson.dumps(doc)
    out = set_pointer(doc, pointer, value)
    assert out == expected
    assert orjson.dumps(doc) == before  # the document given is never changed


@pytest.mark.parametrize(("pointer", "message"), [
    ("/params/list/x", "/params/list is an array, not an object: cannot set /params/list/x"),
    ("/params/list/5", "/params/list is an array, not an object: cannot set /params/list/5"),
    ("/s/x", "/s is a string, not an object: cannot set /s/x"),
    ("/params/n/x", "/params/n is null, not an object: cannot set /params/n/x"),
])
def test_set_pointer_through_a_non_object_is_refused(pointer: str, message: str) -> None:
    with pytest.raises(PointerError) as caught:
        set_pointer({"s": "text", "params": {"list": [1, 2], "n": None}}, pointer, 1)
    assert str(caught.value) == message


def test_remove_pointer() -> None:
    doc = {"a": {"b": 1, "c": [1, 2]}, "d": 2}
    assert remove_pointer(doc, "/a/b") == {"a": {"c": [1, 2]}, "d": 2}
    assert remove_pointer(doc, "/a/c/0") == {"a": {"b": 1, "c": [2]}, "d": 2}
    assert remove_pointer(doc, "/a/x") is doc  # nothing there: the very document
    assert remove_pointer(doc, "/d/x") is doc
    assert doc == {"a": {"b": 1, "c": [1, 2]}, "d": 2}


@pytest.mark.parametrize(("a", "b", "equal"), [
    (1, 1.0, True), (True, 1, False), (1, True, False), (False, 0, False), (None, None, True),
    ("1", 1, False), ({"a": [1, True]}, {"a": [1.0, True]}, True), ({"a": 1}, {"a": 1, "b": 2}, False),
    ([1], [1, 1], False), (MISSING, None, False),
])
def test_json_equal(a: object, b: object, equal: bool) -> None:
    assert json_equal(a, b) is equal


@pytest.mark.parametrize(("a", "b", "same"), [
    (1, 1, True), (1, 1.0, False), (1.0, 1, False), (True, 1, False), (1, True, False), (False, 0, False),
    (0, False, False), (None, False, False), (0.0, -0.0, False), (0.5, 0.5, True), ("1", 1, False),
    ([True], [1], False), ([1, 2], [1, 2], True), ([1], [1, 1], False),
    ({"a": 1, "b": [None]}, {"b": [None], "a": 1}, True),  # members in another order: the same object
    ({"a": [1, True]}, {"a": [1.0, True]}, False), ({"a": 1}, {"a": 1, "b": 2}, False), ({"a": 1}, {"b": 1}, False),
    ([], {}, False), (MISSING, None, False),
])
def test_same_json(a: object, b: object, same: bool) -> None:
    assert (same_json(a, b), same_json(b, a)) == (same, same)


# Leaves that Python's == confuses with one another, so that near misses are common.
confusable = st.sampled_from([0, 1, 0.0, -0.0, 1.0, True, False, None, "1", "", 2**63 - 1, 0.1])
near_values = st.recursive(
    confusable, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner, max_size=2),
    max_leaves=8)


@given(a=near_values, b=near_values)
def test_same_json_is_the_same_text_but_for_member_order(a: object, b: object) -> None:
    """The bridge's "is it the same?" is "would it be written the same?" (members sorted)."""
    def text(value: object) -> bytes:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    assert same_json(a, b) is (text(a) == text(b))
    assert same_json(a, orjson.loads(text(a)))


def test_same_json_of_values_nested_past_the_recursion_limit() -> None:
    deep = orjson.loads(b"[" * 1000 + b"1" + b"]" * 1000)
    assert same_json(deep, orjson.loads(b"[" * 1000 + b"1" + b"]" * 1000))
    assert not same_json(deep, orjson.loads(b"[" * 1000 + b"true" + b"]" * 1000))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)
tokens = st.lists(st.sampled_from(["a", "b", "0", "1", "x/y", "~"]), min_size=1, max_size=4)


@given(doc=st.dictionaries(st.text(max_size=3), json_values, max_size=4), path=tokens, value=json_values)
def test_set_then_get_and_remove_then_get(doc: dict[str, object], path: list[str], value: object) -> None:
    """Whatever the document: the original is unchanged, a set reads back, a remove leaves
    nothing there, and everything off the path is the very same object."""
    before = orjson.dumps(doc)
    pointer = "".join("/" + escape_token(t) for t in path)
    try:
        out = set_pointer(doc, pointer, value)
    except PointerError:
        assert orjson.dumps(doc) == before
        return
    assert orjson.dumps(doc) == before
    assert json_equal(get_pointer(out, pointer), value)
    for key, kept in doc.items():
        if key != path[0]:
            assert out[key] is kept  # copied along the path only
    removed = remove_pointer(out, pointer)
    assert get_pointer(removed, pointer) is MISSING or isinstance(get_pointer(out, tuple(path[:-1])), list)
