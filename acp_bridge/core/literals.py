"""Literals: ids and numbers as they were written, and the scanning of JSON text that finds them.

Owns: telling which lines orjson may not read exactly (`inexact_numbers`), reading a line or
its id again exactly (`exact_reading`, `number_literals`, `written_id`, `integer_id`,
`with_exact_integers`), reading
a scanned literal as the relay's parser would (`json_value`, `LongInteger`), putting an id
into a line unparsed (`splice_id`), and the primitives every scan of JSON text shares:
`blank_escapes` (after which a quote always opens or closes a string) and `decode_key`.

Why: orjson reads `1e3` as `1000.0`, and an integer beyond 64 bits as a float, so what it
writes back differs from what came. Ids must go back as the peer wrote them (a client
matches its answers by them), and the capture shows numbers as written.

Must never: do IO, or raise on what comes from the wire where it does not say so.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# A number orjson may write differently from how it was read: a fraction or an exponent
# (`1.50`, `1e3`), or 19 digits and more (beyond 64 bits it reads a float). Not `-0`, which
# it reads as the integer 0: no re-reading keeps that one either.
_INEXACT_NUMBER = re.compile(rb"[0-9][.eE]|[0-9]{19}")
_INTEGER = re.compile(rb"-?[0-9]+")
_LONG_BYTES, _LONG_TEXT = re.compile(rb"[0-9]{19}"), re.compile(r"[0-9]{19}")  # maybe past 64 bits
_FLOAT_DIGITS = 308  # beyond this many digits an integer is no float (orjson rejects it)
_BACKSLASH, _QUOTE = ord("\\"), ord('"')  # ints: `in` tries an operand as an int first


def inexact_numbers(raw: bytes) -> bool:
    """Could orjson's reading of `raw` write some number back otherwise than it is written?
    False is certain; true is often wrong (a `1.5` in a string counts)."""
    return _INEXACT_NUMBER.search(raw) is not None


def exact_reading(raw: bytes) -> Any:
    """`raw` parsed with every number an `orjson.Fragment` of its text, which orjson writes
    back as it was written (a masked copy, a message shown to a person).

    Raises:
        ValueError: not JSON.
        RecursionError: nested deeper than the stdlib reads.
    """
    return json.loads(raw, parse_int=orjson.Fragment, parse_float=orjson.Fragment)


def with_exact_integers(raw: bytes | str, read: Any) -> Any:
    """`read`, orjson's reading of `raw`; or, where `raw` may hold an integer past 64 bits
    (which orjson reads as a float: two such integers that one float stands for compare
    equal), `raw` read again by the stdlib, every integer exact. `read` where the stdlib
    cannot read it (nested past its depth, a lone surrogate)."""
    long = _LONG_TEXT.search(raw) if isinstance(raw, str) else _LONG_BYTES.search(raw)
    if long is None:
        return read
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return read


class _Literal:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def number_literals(raw: bytes, parsed: Any) -> dict[int, bytes]:
    """Map each float object in `parsed` (orjson's reading of `raw`) to its text in `raw`
    ({} when `inexact_numbers` says none could differ).

    Floats are fresh objects per parse, so identity finds them again in a rewritten copy
    that kept them (rewrites copy on write).

    Raises:
        ValueError, RecursionError: as `exact_reading`.
    """
    if _INEXACT_NUMBER.search(raw) is None:
        return {}
    exact = json.loads(raw, parse_float=_Literal, parse_int=_Literal)
    found: dict[int, bytes] = {}
    stack = [(parsed, exact)]
    while stack:
        ours, theirs = stack.pop()
        if type(ours) is float and isinstance(theirs, _Literal):
            found[id(ours)] = theirs.text.encode()
        elif type(ours) is dict and type(theirs) is dict:
            stack.extend((v, theirs[k]) for k, v in ours.items() if k in theirs)
        elif type(ours) is list and type(theirs) is list:
            stack.extend(zip(ours, theirs, strict=False))
    return found


def written_numbers(raw: bytes, parsed: Any) -> dict[int, bytes]:
    """`number_literals`, or {} when `raw` cannot be read exactly (nested too deep, say):
    its numbers are then written as orjson read them."""
    try:
        return number_literals(raw, parsed)
    except (ValueError, RecursionError):
        return {}


_UNREAD: Any = object()


def _id_read_again(raw: bytes, id_: Any, number: Any, fraction: Any) -> Any:
    """The top-level id of `raw` read by the stdlib with these number types; `_UNREAD` when
    orjson's reading `id_` is written back the same anyway, or `raw` cannot be read again."""
    if type(id_) is not float or _INEXACT_NUMBER.search(raw) is None:
        return _UNREAD
    try:
        exact = json.loads(raw, parse_int=number, parse_float=fraction)
    except (ValueError, RecursionError):
        return _UNREAD
    return exact.get("id", _UNREAD) if type(exact) is dict else _UNREAD


def written_id(raw: bytes, id_: Any) -> Any:
    """`id_`, the top-level id orjson read from `raw`, to write back: an `orjson.Fragment`
    of its text when orjson would write it otherwise (a fraction, an exponent, an integer
    beyond 64 bits, which it reads as a float); else `id_` itself, which is also what comes
    back when `raw` cannot be read again (nested deeper than the stdlib reads)."""
    found = _id_read_again(raw, id_, orjson.Fragment, orjson.Fragment)
    return found if isinstance(found, orjson.Fragment) else id_


def integer_id(raw: bytes, id_: Any) -> Any:
    """`id_` (as in `written_id`) as a Python int when it is written as an integer beyond 64
    bits, which orjson reads as a float; else `id_` itself. For a person and for pairing:
    the int is exact, and equal ids are equal keys."""
    found = _id_read_again(raw, id_, int, float)
    return found if type(found) is int else id_


class LongInteger(str):
    """An integer id too long for a float (or for Python's int parsing limit): keyed by its
    text, which is what both sides of the bridge then see, since orjson rejects such lines."""

    __slots__ = ()


def json_value(literal: bytes) -> Any:
    """Read one scalar the way the relay's parser would, for use as an id key.

    orjson reads integers beyond 64 bits as floats; so does this, so that a request read
    one way pairs with a response read the other. Invalid UTF-8 in a string is kept (as
    surrogate escapes), so such an id still pairs with itself.

    Raises:
        ValueError: not a JSON value.
    """
    if _INTEGER.fullmatch(literal):
        if len(literal) - literal.startswith(b"-") > _FLOAT_DIGITS:
            return LongInteger(literal.decode())
        value = int(literal)
        return value if -(2**63) <= value < 2**64 else float(value)
    return json.loads(literal.decode("utf-8", "surrogateescape"))


# -- scanning JSON text without parsing it -----------------------------------------------------

# What a scan stops at: containers, strings and the commas between members.
STRUCTURE = re.compile(rb'[{}\[\]",]')
_COLON = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*")
_SCALAR = re.compile(rb"[-+.0-9a-zA-Z]+")  # a number, true, false or null (and garbage)


def blank_escapes(data: bytes) -> bytes:
    """`data` with every escape pair that could hide a quote (`\\\\`, `\\"`) blanked, so
    that each quote left opens or closes a string and `find` gives a string's end. Of the
    same length, so offsets in it are offsets in `data`; `data` itself without a backslash.

    Escapes occur only inside strings, and JSON pairs them left to right, as `replace`
    does: `\\\\"` is an escaped backslash and then the closing quote. The copies run at C
    speed, which is why the scans take this over a regex that matches whole strings.
    """
    if _BACKSLASH not in data:
        return data
    return data.replace(b"\\\\", b"__").replace(b'\\"', b"__")


def decode_key(literal: bytes) -> str | None:
    """A member name from its literal (quotes included), escapes read; None if it is not one."""
    if _BACKSLASH not in literal:
        try:
            return literal[1:-1].decode()
        except UnicodeDecodeError:
            return None
    try:
        key = json.loads(literal)
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def splice_id(line: bytes, id_text: bytes) -> bytes | None:
    """`line` (one JSON object) with the value of its top-level `id` replaced by `id_text`,
    found without parsing (for a line nested deeper than can be written again). None when
    the line has no such scalar id."""
    view = blank_escapes(line)
    depth = at = 0
    while (found := STRUCTURE.search(view, at)) is not None:
        start = at = found.end()
        char = view[start - 1]
        if char != _QUOTE:
            if char in b"{[":
                depth += 1
            elif char in b"}]":
                depth -= 1
            continue
        end = view.find(b'"', start)
        if end < 0:
            return None
        at = end + 1
        colon = _COLON.match(view, at) if depth == 1 else None
        if colon is None or decode_key(line[start - 1:at]) != "id":
            continue  # not a member name of the object itself, or another one
        value = colon.end()
        if view[value:value + 1] == b'"':
            stop = view.find(b'"', value + 1) + 1
            if stop == 0:
                return None
        else:
            scalar = _SCALAR.match(view, value)
            if scalar is None:
                continue  # an id that is not a scalar
            stop = scalar.end()
        return line[:value] + id_text + line[stop:]
    return None
