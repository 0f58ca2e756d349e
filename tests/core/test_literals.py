"""Ids and numbers as written (core/literals.py): the one test of which lines orjson may not
read exactly, the exact readings, scanned literals read as the parser reads them, and the
scanning primitives the scans share."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.literals import (
    LongInteger,
    blank_escapes,
    decode_key,
    exact_reading,
    inexact_numbers,
    integer_id,
    json_value,
    number_literals,
    splice_id,
    with_exact_integers,
    written_id,
)

# JSON number texts as writers write them: integers of any size, fractions with trailing
# zeros, exponents in either case and sign.
number_texts = st.builds(
    lambda sign, digits, fraction, exponent: (sign + digits + fraction + exponent).encode(),
    st.sampled_from(["", "-"]),
    st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,24}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,6}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"[eE][-+]?[0-9]{1,2}", fullmatch=True)),
).filter(lambda text: text != b"-0")  # read as the integer 0 by both parsers: see the module


@given(number_texts)
def test_a_number_inexact_numbers_passes_over_is_written_back_as_it_came(text: bytes) -> None:
    if not inexact_numbers(text):
        assert orjson.dumps(orjson.loads(text)) == text


@pytest.mark.parametrize(("text", "inexact"), [
    (b"1", False), (b"-42", False), (b"1" * 18, False), (b"1" * 19, True), (b"1.50", True),
    (b"1e3", True), (b"2E-1", True), (b'{"id":7,"t":"v1.2"}', True),
])
def test_inexact_numbers(text: bytes, inexact: bool) -> None:
    assert inexact_numbers(text) is inexact


@given(st.lists(number_texts, min_size=1, max_size=6))
def test_an_exact_reading_writes_back_every_number_as_written(texts: list[bytes]) -> None:
    line = b'{"id":' + texts[0] + b',"params":[' + b",".join(texts) + b',{"n":' + texts[-1] + b"}]}"
    if all(abs(float(text)) < 1e300 for text in texts):  # orjson refuses what a double cannot hold
        assert orjson.dumps(exact_reading(line)) == line


@given(st.lists(number_texts, min_size=1, max_size=6))
def test_number_literals_maps_each_float_to_its_text(texts: list[bytes]) -> None:
    line = b'{"a":[' + b",".join(texts) + b'],"b":{"c":' + texts[0] + b"}}"
    try:
        parsed = orjson.loads(line)
    except orjson.JSONDecodeError:  # a number beyond a double: such a line is never a Frame's
        return
    found = number_literals(line, parsed)
    for value, text in zip([*parsed["a"], parsed["b"]["c"]], [*texts, texts[0]], strict=True):
        if type(value) is float:
            assert found[id(value)] == text
    assert len(found) == sum(type(v) is float for v in [*parsed["a"], parsed["b"]["c"]])


BIG = b"123456789012345678901234567890"


@pytest.mark.parametrize(("line", "written"), [
    pytest.param(b'{"id":' + BIG + b',"method":"m"}', BIG, id="beyond-64-bits"),
    pytest.param(b'{"id":1.50,"method":"m"}', b"1.50", id="fraction"),
    pytest.param(b'{"id":1E3,"result":{}}', b"1E3", id="exponent"),
    pytest.param(b'{"params":{"id":2.5},"id":-0.0,"method":"m"}', b"-0.0", id="top-level-only"),
    pytest.param(b'{"id":1.5,"method":"m","id":2.50}', b"2.50", id="the-last-of-two-as-orjson"),
    pytest.param(b'{"id":7,"method":"m"}', None, id="an-int-as-it-is"),
    pytest.param(b'{"id":"1.5","method":"m"}', None, id="a-string-as-it-is"),
    pytest.param(b'{"id":2.5,"method":"m","p":' + b"[" * 1010 + b"]" * 1010 + b"}", None, id="too-deep-as-read"),
])
def test_written_id_gives_the_id_as_written(line: bytes, written: bytes | None) -> None:
    id_ = orjson.loads(line)["id"]
    got = written_id(line, id_)
    if written is None:
        assert got is id_
    else:
        assert isinstance(got, orjson.Fragment) and orjson.dumps(got) == written


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"type":"message","id":' + BIG + b',"time":1.5}', int(BIG)),
    (b'{"type":"message","id":1.5,"time":1.5}', 1.5),
    (b'{"type":"message","id":1e3}', 1000.0),
])
def test_integer_id_reads_an_integer_beyond_64_bits_exactly(line: bytes, expected: Any) -> None:
    got = integer_id(line, orjson.loads(line)["id"])
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("literal", "value"), [
    (b"1", 1), (b"-3", -3), (b"18446744073709551615", 18446744073709551615),
    (b"18446744073709551616", 1.8446744073709552e19), (b"1e3", 1000.0), (b'"a"', "a"),
    (b"9" * 400, LongInteger("9" * 400)), (b"-" + b"9" * 5000, LongInteger("-" + "9" * 5000)),
    (b'"\\ud83d"', "\ud83d"), (b'"\xff"', "\udcff"), (b"null", None), (b"true", True),
])
def test_json_value_reads_ids_the_way_the_parser_does(literal: bytes, value: object) -> None:
    got = json_value(literal)
    assert got == value and type(got) is type(value)


# -- scanning -----------------------------------------------------------------------------------


@given(st.text(), st.booleans())
def test_blank_escapes_leaves_a_string_ending_at_its_closing_quote(text: str, ascii_only: bool) -> None:
    literal = json.dumps(text, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    view = blank_escapes(literal)
    assert len(view) == len(literal) and view.find(b'"', 1) == len(literal) - 1


def test_blank_escapes_pairs_escapes_left_to_right() -> None:
    assert blank_escapes(b'"a\\\\" "b\\"c\\\\\\""') == b'"a__" "b__c____"'
    line = b'{"no":"escape"}'
    assert blank_escapes(line) is line


@pytest.mark.parametrize(("literal", "key"), [
    (b'"id"', "id"), (b'"\\u0069d"', "id"), (b'"caf\xc3\xa9"', "café"), (b'"\xff"', None),
    (b'"a\\x"', None), (b'"\\ud83d"', "\ud83d"),
])
def test_decode_key(literal: bytes, key: str | None) -> None:
    assert decode_key(literal) == key


@given(st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(max_size=20), st.none(),
                 st.floats(allow_nan=False, allow_infinity=False)),
       st.dictionaries(st.text(max_size=5).filter(lambda k: k != "id"), st.integers(-100, 100), max_size=3),
       st.booleans())
def test_splice_id_replaces_exactly_the_top_level_id(old: Any, others: dict[str, Any], ascii_only: bool) -> None:
    msg = {**others, "id": old, "x": {"id": "inner"}, "s": "\"id\":[}\\", "t": ["id", {"id": 1}]}
    line = json.dumps(msg, ensure_ascii=ascii_only, separators=(", ", " : ")).encode("utf-8", "surrogatepass")
    spliced = splice_id(line, b'"live"')
    assert spliced is not None and orjson.loads(spliced) == {**msg, "id": "live"}


def test_splice_id_finds_an_id_named_with_escapes() -> None:
    assert splice_id(b'{"\\u0069d":7,"result":{}}', b"8") == b'{"\\u0069d":8,"result":{}}'


def test_splice_id_without_a_scalar_id_is_none() -> None:
    assert splice_id(b'{"a":"id","id":{"x":1}}', b"1") is None
    assert splice_id(b'{"result":{"id":1}}', b"1") is None
    assert splice_id(b'{"id":"unclosed', b"1") is None


PAST_64_BITS = 2**64 + 1  # orjson reads it as the float 2**64, as it reads 2**64


@pytest.mark.parametrize("raw", [b'{"v":18446744073709551617}', '{"v":18446744073709551617}'])
def test_with_exact_integers_reads_an_integer_past_64_bits_again_exactly(raw: bytes | str) -> None:
    assert with_exact_integers(raw, orjson.loads(raw)) == {"v": PAST_64_BITS}


def test_with_exact_integers_keeps_orjsons_reading_where_it_is_exact_or_the_stdlib_cannot_read() -> None:
    exact = orjson.loads(b'{"v":123456789012345678}')  # 18 digits: orjson's reading is exact
    assert with_exact_integers(b'{"v":123456789012345678}', exact) is exact
    in_a_string = b'{"v":"1234567890123456789012"}'  # 19 digits, read again: the same value
    assert with_exact_integers(in_a_string, orjson.loads(in_a_string)) == {"v": "1234567890123456789012"}
    deep = b"[" * 5000 + b"1234567890123456789012" + b"]" * 5000  # past the stdlib's depth
    assert with_exact_integers(deep, "orjson's reading") == "orjson's reading"
