"""How JSON spells a text, and the byte searches that rely on it.

Owns: the spellings JSON writers give a text inside a string (plain, minimally escaped,
escaped beyond ASCII), the ASCII view of a line (its \\u00XX escapes and escaped slashes
undone, so that a name spelled that way shows), the test for an object naming a member twice,
and the one-call search for any of several needles. The redaction searches lines with these
before (or instead of) parsing them. Must never: parse more than the duplicate test needs,
do IO, or raise on anything read from the wire.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

BACKSLASH = ord("\\")  # an int: `in` tries an operand as an int before as bytes
# ASCII spelled as a \u escape, and an escaped slash: how a key can hide from a byte search.
_ASCII_ESCAPE = re.compile(rb"\\u00([2-7][0-9a-fA-F])")


def spelled(text: str) -> tuple[str, str, str]:
    """`text` as it is, escaped the minimal way (orjson, JavaScript, json with
    `ensure_ascii=False`), and with everything beyond ASCII as \\u escapes (Python's json)."""
    return text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]


def text_spellings(text: str) -> tuple[str, ...]:
    """The ways JSON writers spell `text` inside a string (`spelled`, each once). A lone
    surrogate is spelled too, never refused."""
    return tuple(dict.fromkeys(spelled(text)))


def spellings(text: str) -> tuple[bytes, ...]:
    """`text_spellings` as the bytes of a line (a lone surrogate as Python reads one)."""
    return tuple(dict.fromkeys(spelling.encode("utf-8", "surrogatepass") for spelling in text_spellings(text)))


def ascii_view(data: bytes) -> bytes:
    """`data` with ASCII written as \\u00XX escapes and escaped slashes decoded (`data`
    itself when it has no backslash): a key or method spelled that way shows in it."""
    if BACKSLASH not in data or (b"\\u00" not in data and b"\\/" not in data):
        return data
    return _ASCII_ESCAPE.sub(lambda m: bytes([int(m[1], 16)]), data).replace(b"\\/", b"/")


class _Duplicate(Exception):
    pass


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> None:
    if len({key for key, _ in pairs}) != len(pairs):
        raise _Duplicate


def has_duplicate_keys(line: bytes) -> bool:
    """Whether some object of `line` (valid JSON) names a member twice; True also when
    that cannot be told (nested too deep). orjson keeps only the last of the two."""
    try:
        json.loads(line, object_pairs_hook=_reject_duplicates,
                   parse_int=len, parse_float=len, parse_constant=len)
    except (_Duplicate, ValueError, RecursionError):
        return True
    return False


def any_in(needles: Iterable[bytes], data: bytes) -> bool:
    """Whether one of `needles` is in `data`."""
    for needle in needles:  # noqa: SIM110 - a loop: any() with a generator costs more per call
        if needle in data:
            return True
    return False
