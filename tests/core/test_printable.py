"""printable: what a hostile agent puts in a session id or method reaches a person's
terminal as visible escapes, never as control sequences."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.printable import printable, printable_lines

# Any code point, lone surrogates included (a file name that is not UTF-8 gives them).
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()))
SAFE_CHARS = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp", "Cf"),
                           exclude_characters="\\\ufffe\uffff")
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param("sess-1", "sess-1", id="plain"),
        pytest.param("x\x1b]0;PWNED\x07y", "x\\u001b]0;PWNED\\u0007y", id="osc-retitle"),
        pytest.param("a\x1b[2Jb", "a\\u001b[2Jb", id="csi-clear"),
        pytest.param("a\nacp-bridge: ERROR: forged", "a\\nacp-bridge: ERROR: forged", id="newline"),
        pytest.param("a\rb\tc", "a\\rb\\tc", id="cr-tab"),
        pytest.param("\x00\x7f", "\\u0000\\u007f", id="nul-del"),
        pytest.param("\x85\x9b", "\\u0085\\u009b", id="c1"),
        pytest.param("a\u2028b\u2029", "a\\u2028b\\u2029", id="separators"),
        pytest.param("abc\u202edcb", "abc\\u202edcb", id="right-to-left-override"),
        pytest.param("\u2066x\u2069", "\\u2066x\\u2069", id="isolates"),
        pytest.param("\ud800", "\\ud800", id="lone-surrogate"),
        pytest.param("\ufffe\uffff", "\\ufffe\\uffff", id="xml-forbidden"),
        pytest.param("x\\u001by", "x\\\\u001by", id="literal-escape-differs"),
        pytest.param("C:\\dir", "C:\\\\dir", id="backslash"),
        pytest.param("é中😀\u00a0\u200d", "é中😀\u00a0\u200d", id="printable-unicode-kept"),
    ],
)
def test_printable_escapes_what_acts_on_a_terminal(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_without_quoting_backslashes_an_escaped_text_is_not_escaped_twice() -> None:
    assert printable("id 'x\\x1by' and x\x1by", quote_backslash=False) == "id 'x\\x1by' and x\\u001by"


def test_printable_lines_keeps_the_line_feeds() -> None:
    assert printable_lines('  "a\x9b": 1,\n  "b": "\\n\u2028"') == '  "a\\u009b": 1,\n  "b": "\\n\\u2028"'


def test_a_safe_text_is_returned_as_it_is() -> None:
    text = "session/prompt"
    assert printable(text) is text


def unescape(shown: str) -> str:
    """The inverse of `printable`: proof that it loses nothing."""
    return re.sub(r"\\(u[0-9a-f]{4}|.)",
                  lambda m: chr(int(m.group(1)[1:], 16)) if len(m.group(1)) == 5
                  else {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[m.group(1)], shown)


def _shows_nothing_unsafe(shown: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or c in BIDI or c in "\ufffe\uffff"
                   for c in shown)


@given(ANY_TEXT)
def test_printable_output_holds_no_control_character(text: str) -> None:
    assert _shows_nothing_unsafe(printable(text))
    assert _shows_nothing_unsafe(printable(text, quote_backslash=False))
    assert _shows_nothing_unsafe(printable_lines(text).replace("\n", ""))
    printable(text).encode("utf-8")  # no lone surrogate left to fail the encoder


@given(ANY_TEXT)
def test_printable_is_injective(text: str) -> None:
    """Two different texts never show alike: the escaping can be undone."""
    assert unescape(printable(text)) == text


@given(st.text(SAFE_CHARS))
def test_printable_text_is_unchanged(text: str) -> None:
    assert printable(text) == text
    assert printable("\\" + text, quote_backslash=False) == "\\" + text
