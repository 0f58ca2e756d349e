"""Redaction that fails closed: lines that cannot be masked precisely, numbers kept as
written, batches. Table-driven. Command lines and free text: test_text_redaction.py."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.capture.redaction import (
    PROMPT_REDACTED,
    REDACTED,
    WITHHELD,
    Redactor,
)
from acp_bridge.capture.spellings import has_duplicate_keys
from tests.capture.secrets import NEW, SECRET, UNMASKABLE

PROMPT = "Follow the team style guide."


def parsed(line: bytes) -> Any:
    """The line as the capture has it parsed: None when orjson rejects it."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


@pytest.mark.parametrize("line", UNMASKABLE)
def test_a_line_that_does_not_parse_is_withheld_when_it_could_hold_a_secret(line: bytes) -> None:
    assert parsed(line) is None
    assert Redactor().mask_line(line, None) == (WITHHELD, None)


@pytest.mark.parametrize("line", [
    pytest.param(b'{"jsonrpc":"2.0","method":"session/update","params":{"text":"\\ud83d"}}\n', id="lone-surrogate"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"result":{"n":NaN}}\n', id="nan"),
    pytest.param(b"Starting agent v1.2\n", id="banner"),
    pytest.param(b"\xff\xfe oops\n", id="invalid-utf8"),
])
def test_a_line_that_does_not_parse_is_kept_when_nothing_leads_to_a_secret(line: bytes) -> None:
    assert Redactor().mask_line(line, None) == (line, [])


@pytest.mark.parametrize(("line", "pointers"), [
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"token":"S3CR3T"},"params":{}}\n',
                 (), id="params-twice"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"token":"S3CR3T"},'
                 b'"method":"session/cancel"}\n', (), id="method-twice"),
    pytest.param(NEW + b',"mcpServers":[]}}\n', (), id="mcp-servers-twice"),
    pytest.param(b'{"jsonrpc":"2.0","method":"n","params":{"_meta":{"token":"S3CR3T"},"_meta":{}}}\n',
                 ("/params/_meta/token",), id="pointer-parent-twice"),
])
def test_a_member_named_twice_withholds_the_line(line: bytes, pointers: tuple[str, ...]) -> None:
    """orjson keeps the last of two members with one name, so the parse shows no secret
    where the line still holds one."""
    msg = parsed(line)
    assert msg is not None and Redactor(pointers).mask(msg)[1] == []  # the parse shows nothing to mask
    assert has_duplicate_keys(line)
    assert Redactor(pointers).mask_line(line, msg) == (WITHHELD, None)


def test_the_system_prompt_under_a_member_named_twice_withholds_the_line() -> None:
    line = b'{"jsonrpc":"2.0","method":"n","params":{"t":"Follow the team style guide.","t":"x"}}\n'
    assert Redactor((), PROMPT).mask_line(line, parsed(line)) == (WITHHELD, None)
    spelled = b'{"jsonrpc":"2.0","method":"n","params":{"t":"Follow the te\\u0061m style guide.","t":"x"}}\n'
    assert Redactor((), PROMPT).mask_line(spelled, parsed(spelled)) == (WITHHELD, None)


def test_members_named_twice_elsewhere_do_not_withhold() -> None:
    line = b'{"jsonrpc":"2.0","method":"session/update","params":{"a":1,"a":2}}\n'
    assert Redactor().mask_line(line, parsed(line)) == (line, [])


def test_the_system_prompt_in_a_line_that_does_not_parse() -> None:
    redactor = Redactor((), PROMPT)
    plain = b"echo: Follow the team style guide. (NaN)\n"
    assert redactor.mask_line(plain, None) == (f"echo: {PROMPT_REDACTED} (NaN)\n".encode(), [""])
    spelled = b'{"text":"Follow the team style guid\\u0065.","n":NaN}\n'  # no replacement finds it
    assert redactor.mask_line(spelled, None) == (WITHHELD, None)


def test_masking_keeps_every_number_as_written() -> None:
    line = NEW.replace(b'"id":2', b'"id":98765432109876543210987654321') + (
        b',"_meta":{"big":123456789012345678901234567890,"f":1.50,"e":1E3}}}\n')
    masked, hits = Redactor().mask_line(line, parsed(line))
    assert hits == ["/params/mcpServers/0/env/0/value"]
    assert masked == line.replace(b'"S3CR3T"', b'"<redacted>"')


@pytest.mark.parametrize("depth", [300, 1000])
def test_a_message_too_deep_to_write_back_is_withheld_when_it_has_a_secret(depth: int) -> None:
    line = NEW + b',"_meta":' + b"[" * depth + b"]" * depth + b"}}\n"
    msg = parsed(line)
    assert msg is not None
    assert Redactor().mask_line(line, msg) == (WITHHELD, None)
    assert Redactor((), PROMPT).mask_line(line, msg) == (WITHHELD, None)  # the text search recurses too
    clear = line.replace(b"S3CR3T", b"plain").replace(b"mcpServers", b"servers")
    assert Redactor().mask_line(clear, parsed(clear)) == (clear, [])  # nothing to mask: as it came


def test_a_batch_is_masked_message_by_message() -> None:
    line = orjson.dumps([
        {"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": {"token": SECRET}},
        {"jsonrpc": "2.0", "method": "n", "params": {"_meta": {"token": SECRET}}},
        {"jsonrpc": "2.0", "id": 2, "result": {}},
    ]) + b"\n"
    masked, hits = Redactor(("/params/_meta/token",)).mask_line(line, parsed(line))
    assert hits == ["/0/params/token", "/1/params/_meta/token"]
    assert orjson.loads(masked) == [
        {"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": {"token": REDACTED}},
        {"jsonrpc": "2.0", "method": "n", "params": {"_meta": {"token": REDACTED}}},
        {"jsonrpc": "2.0", "id": 2, "result": {}},
    ]


def test_may_hold_any_secret_sees_spellings_and_configuration() -> None:
    redactor = Redactor(("/params/apiKey", "/params/list/0"), PROMPT)
    assert [redactor.may_hold_any_secret(data) for data in (
        b"plain text", b'"apiKey":1', b'"\\u0061piKey":1', b'"list":[1]', PROMPT.encode(),
        json.dumps(PROMPT).encode(), b"header", b"headers", b"mcp\\u0053ervers")] == [
        False, True, True, True, True, True, False, True, True]
    assert Redactor(("/0",)).may_hold_any_secret(b"anything")  # no name to look for: anything could


# -- passes_unmasked: a byte search that stands in for a parse only where it is certain ----

_NAMES = ["mcpServers", "env", "headers", "value", "apiKey", "clé", "a\"b", "token", "params", "method",
          "x", "list", "0"]
_METHODS = ["authenticate", "auth/login", "terminal/create", "session/new", "session/update", "n"]
_POINTERS = ["/params/apiKey", "/params/x/0/token", '/a"b', "/params/list/0", "/params/clé", "/0"]


def _escaped(text: str, how: int) -> str:
    """`text` as a JSON string body, spelled one of the ways a writer may."""
    if how == 0:
        return json.dumps(text, ensure_ascii=False)[1:-1]
    if how == 1:
        return json.dumps(text)[1:-1]
    if how == 2:  # every character as \\uXXXX, upper-case hex
        return "".join(f"\\u{ord(c):04X}" for c in text)
    return json.dumps(text, ensure_ascii=False)[1:-1].replace("/", "\\/")


_json_values = st.recursive(
    st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["S3CR3T", "v", *_METHODS])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(_NAMES), inner, max_size=4)),
    max_leaves=12)


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    """A JSON object line whose every key and string is spelled by a drawn writer."""
    def spell(value: Any) -> str:
        if isinstance(value, dict):
            return "{" + ",".join(f'"{_escaped(k, draw(st.integers(0, 3)))}":{spell(v)}'
                                  for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ",".join(spell(v) for v in value) + "]"
        if isinstance(value, str):
            return '"' + _escaped(value, draw(st.integers(0, 3))) + '"'
        return json.dumps(value)
    message = {"jsonrpc": "2.0", "id": 1, "method": draw(st.sampled_from(_METHODS)),
               "params": draw(st.dictionaries(st.sampled_from(_NAMES), _json_values, max_size=4))}
    return spell(message).encode("utf-8", "surrogatepass") + b"\n"


@settings(max_examples=300, deadline=None)
@given(line=_lines(), pointers=st.lists(st.sampled_from(_POINTERS), max_size=2, unique=True),
       secret=st.sampled_from([None, "", "S3CR3T"]))
def test_a_line_that_passes_unmasked_is_one_that_masking_leaves_alone(
        line: bytes, pointers: list[str], secret: str | None) -> None:
    """The shortcut the page's row builder takes never skips a line that masking would change."""
    redactor = Redactor(tuple(pointers), secret)
    if redactor.passes_unmasked(line):
        assert redactor.mask_line(line, parsed(line)) == (line, [])


@pytest.mark.parametrize(("redactor", "line", "passes"), [
    pytest.param(Redactor(), b'{"method":"session/update","params":{"text":"hi"}}', True, id="plain"),
    pytest.param(Redactor(), b'{"method":"auth\\/login","params":{"t":"S3CR3T"}}', False, id="escaped-slash"),
    pytest.param(Redactor(), b'{"method":"\\u0061uthenticate","params":{}}', False, id="escaped-method"),
    pytest.param(Redactor(), b'{"params":{"mcp\\u0053ervers":[]}}', False, id="escaped-key"),
    pytest.param(Redactor(), b'{"params":{"env":1}}', False, id="env"),
    pytest.param(Redactor(), b"not json at all", True, id="unparsed-harmless"),
    pytest.param(Redactor(("/params/apiKey",)), b'{"params":{"a\\u0070iKey":"k"}}', False, id="pointer-escaped"),
    pytest.param(Redactor(("/params/apiKey",)), b'{"params":{"other":"k"}}', True, id="pointer-absent"),
    pytest.param(Redactor(("/params/cl\u00e9",)), b'{"params":{"other":"k"}}', False, id="pointer-not-ascii"),
    pytest.param(Redactor(("/0",)), b'{"params":{}}', False, id="pointer-without-a-name"),
    pytest.param(Redactor((), PROMPT), b'{"params":{}}', False, id="a-secret-text"),
    pytest.param(Redactor((), ""), b'{"params":{}}', True, id="an-empty-secret-text-is-none"),
])
def test_passes_unmasked(redactor: Redactor, line: bytes, passes: bool) -> None:
    assert redactor.passes_unmasked(line) is passes


def test_a_name_beyond_ascii_spelled_in_upper_case_hex_is_masked_so_never_passed_unmasked() -> None:
    """Why a pointer naming more than printable ASCII turns the shortcut off: this spelling
    is none the byte search knows, and the parse finds the value all the same."""
    redactor = Redactor(("/params/cl\u00e9",))
    line = b'{"params":{"cl\\u00E9":"k"}}\n'
    assert redactor.may_hold_any_secret(line)  # only because any escape may spell such a name
    assert redactor.mask_line(line, parsed(line))[1] == ["/params/cl\u00e9"]
    assert not redactor.passes_unmasked(line)


@pytest.mark.parametrize(("name", "spelled"), [
    pytest.param('a"b"c', 'a\\"b\\u0022c', id="two-quotes-each-escaped-its-own-way"),
    pytest.param("a\\b\\c", "a\\u005cb\\\\c", id="two-backslashes-each-escaped-its-own-way"),
    pytest.param('a"b\\c', 'a\\u0022b\\\\c', id="a-quote-and-a-backslash"),
])
def test_a_name_with_two_characters_json_escapes_two_ways_is_never_passed_unmasked(name: str, spelled: str) -> None:
    """`"` and `\\` are each written `\\"` / `\\\\` or as a \\u escape. `ascii_view` undoes
    the second form only, so a name holding two of them, spelled one each way, is neither of
    the spellings the byte search knows, and the parse finds the value all the same."""
    pointer = "/params/" + name.replace("~", "~0").replace("/", "~1")
    redactor = Redactor((pointer,))
    line = b'{"jsonrpc":"2.0","method":"n","params":{"' + spelled.encode() + b'":"S3CR3T"}}\n'
    assert parsed(line)["params"] == {name: SECRET}
    assert redactor.may_hold_any_secret(line)  # only because any escape may spell such a name
    assert redactor.mask_line(line, parsed(line))[1] == [pointer]
    assert not redactor.passes_unmasked(line)


@pytest.mark.parametrize(("pointer", "spelled"), [
    pytest.param("/params/cl\u00e9", "cl\\u00E9", id="beyond-ascii-in-upper-case-hex"),
    pytest.param('/params/a"b"c', 'a\\"b\\u0022c', id="two-quotes-each-escaped-its-own-way"),
])
def test_a_member_named_twice_is_withheld_however_the_pointer_name_is_spelled(pointer: str, spelled: str) -> None:
    """orjson keeps the last of two `params`: the first one's value at the pointer is not in
    the parse, so a line that could name the pointer twice is withheld whole. The search for
    the name misses these spellings, so with such a name any line with an escape is checked."""
    line = (b'{"jsonrpc":"2.0","method":"n","params":{"' + spelled.encode() + b'":"S3CR3T"},"params":{}}\n')
    assert Redactor((pointer,)).mask_line(line, parsed(line)) == (WITHHELD, None)
    plain = b'{"jsonrpc":"2.0","method":"n","params":{"other":"v"}}\n'
    assert Redactor((pointer,)).mask_line(plain, parsed(plain)) == (plain, [])


@pytest.mark.parametrize(("pointer", "spelled"), [
    pytest.param("/params/cl\u00e9", "cl\\u00E9", id="beyond-ascii-in-upper-case-hex"),
    pytest.param('/params/a"b"c', 'a\\"b\\u0022c', id="two-quotes-each-escaped-its-own-way"),
])
def test_a_head_or_a_torn_line_that_may_spell_such_a_pointer_name_is_withheld(pointer: str, spelled: str) -> None:
    """What is never parsed (the head of a long line, a line that does not parse) is only
    searched: with a pointer name the search cannot spell every way, an escape may be it."""
    redactor = Redactor((pointer,))
    head = b'{"jsonrpc":"2.0","method":"n","params":{"' + spelled.encode() + b'":"S3CR3T","pad":"xxxx'
    assert redactor.may_hold_any_secret(head)
    assert redactor.mask_line(head, None) == (WITHHELD, None)
    plain = b'{"jsonrpc":"2.0","method":"n","params":{"other":"xxxx'
    assert not redactor.may_hold_any_secret(plain)
    assert redactor.mask_line(plain, None) == (plain, [])
