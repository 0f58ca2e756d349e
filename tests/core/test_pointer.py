"""The one JSON pointer parser (RFC 6901) that the config and the capture's redaction share."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.pointer import escape_token, parse_pointer


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
