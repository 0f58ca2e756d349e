"""JSON pointers (RFC 6901): the one parser of the package, and copy-on-write edits.

Owns: reading a pointer into its reference tokens, the errors that say why a string is not
a pointer, and writing a token back. The config checks `capture.redact` and the `[[rewrite]]`
tables with it at load time, and the redaction and the rules walk messages by the tokens it
returns, so they cannot disagree on what a pointer means. `get_pointer`, `set_pointer` and
`remove_pointer` read and change a message the way rules must: the message given is never
changed, and only the objects along the path are copied (every other value, numbers
included, is the very object it was, so the relay still writes numbers as they came).
Must never: do IO, or change a document it was given.
"""

from __future__ import annotations

import math
import re
from typing import Any

Tokens = tuple[str, ...]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # what `get_pointer` returns for a value that is not there


class PointerError(ValueError):
    """A pointer runs through something it cannot (a string, a number, an index past the end)."""

# "~" is only ever the start of "~0" ("~") or "~1" ("/") (RFC 6901 section 3).
_BAD_TILDE = re.compile(r"~(?![01])")


def parse_pointer(pointer: str) -> Tokens:
    """RFC 6901: "" is the whole document; "/a~1b/m~0n/0" is ("a/b", "m~n", "0").

    Raises ValueError, whose message names the pointer and the rule it breaks.
    """
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON pointer (RFC 6901: starts with /)")
    if _BAD_TILDE.search(pointer):
        raise ValueError(f"{pointer!r} is not a JSON pointer (RFC 6901: ~ is written ~0 and / is written ~1)")
    # "~1" first: "~01" is the token "~1", not "/" (RFC 6901 section 4).
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/"))


def escape_token(token: object) -> str:
    """One reference token as a pointer writes it: "a/b" is "a~1b", "m~n" is "m~0n"."""
    return str(token).replace("~", "~0").replace("/", "~1")


def tokens_of(pointer: str | Tokens) -> Tokens:
    return pointer if isinstance(pointer, tuple) else parse_pointer(pointer)


def _index(token: str, size: int, *, end_ok: bool = False) -> int | None:
    """An array index as RFC 6901 writes it ("0", "12", never "01" or "-1"), or None."""
    if token == "-" and end_ok:
        return size
    if not token.isdigit() or not token.isascii() or (token != "0" and token.startswith("0")):
        return None
    index = int(token)
    return index if index < size or (end_ok and index == size) else None


def get_pointer(doc: Any, pointer: str | Tokens, default: Any = MISSING) -> Any:
    """The value at `pointer` in `doc`, or `default` when there is none."""
    value = doc
    for token in tokens_of(pointer):
        if type(value) is dict:
            if token not in value:
                return default
            value = value[token]
        elif type(value) is list:
            index = _index(token, len(value))
            if index is None:
                return default
            value = value[index]
        else:
            return default
    return value


def set_pointer(doc: Any, pointer: str | Tokens, value: Any) -> Any:
    """A copy of `doc` with `value` at `pointer`, objects missing along it created ({}).

    An array is walked by index (the index one past its end, or "-", appends). Raises
    PointerError when the pointer runs through anything else (a string, a number, null,
    an index too far): then there is nothing sensible to change.
    """
    tokens = tokens_of(pointer)
    if not tokens:
        return value
    return _set(doc, tokens, 0, value)


def _set(node: Any, tokens: Tokens, at: int, value: Any) -> Any:
    token = tokens[at]
    last = at == len(tokens) - 1
    if type(node) is dict:
        copy = dict(node)
        copy[token] = value if last else _set(node.get(token, {}), tokens, at + 1, value)
        return copy
    if type(node) is list:
        index = _index(token, len(node), end_ok=True)
        if index is not None:
            copy_list = list(node)
            if index == len(node):
                if not last:  # appending, then walking on into what was appended
                    copy_list.append(_set({}, tokens, at + 1, value))
                else:
                    copy_list.append(value)
            else:
                copy_list[index] = value if last else _set(node[index], tokens, at + 1, value)
            return copy_list
    where = "".join("/" + escape_token(t) for t in tokens[:at])
    raise PointerError(f"{where or '(the root)'} is {_kind(node)}, not an object: cannot set "
                       f"{''.join('/' + escape_token(t) for t in tokens)}")


def remove_pointer(doc: Any, pointer: str | Tokens) -> Any:
    """A copy of `doc` without the value at `pointer`; `doc` itself when there is none."""
    tokens = tokens_of(pointer)
    if not tokens or get_pointer(doc, tokens) is MISSING:
        return doc
    return _remove(doc, tokens, 0)


def _remove(node: Any, tokens: Tokens, at: int) -> Any:
    token = tokens[at]
    last = at == len(tokens) - 1
    if type(node) is dict:
        copy = dict(node)
        if last:
            del copy[token]
        else:
            copy[token] = _remove(node[token], tokens, at + 1)
        return copy
    index = _index(token, len(node))  # a list: get_pointer found the value, so the index is good
    assert index is not None
    copy_list = list(node)
    if last:
        del copy_list[index]
    else:
        copy_list[index] = _remove(node[index], tokens, at + 1)
    return copy_list


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: `true` is not `1` (as Python's == says), `1` is `1.0`. The
    match of a rule (`where`): a condition written `1` holds for a `1.0`. Whether the
    bridge would write the same bytes is `same_json`."""
    if type(a) is bool or type(b) is bool:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(json_equal(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def same_json(a: Any, b: Any) -> bool:
    """Do `a` and `b` (parsed JSON) stand for the same JSON text, but for the order of an
    object's members? Of one JSON type (`true` is not `1`, as Python's == says), and a
    number of one kind: `1` is not `1.0`, nor `0.0` `-0.0`. The bridge keeps every number
    as it was written (core/literals.py) and keys `1` and `1.0` apart as ids; a client may
    read them as an integer and a fraction. The bridge's own "is it the same?" checks (a
    list the client already holds, a change that changes nothing) take this one: a
    difference it misses is a message never sent.

    A walk with its own stack: a value nested 1,000 deep (orjson reads 1,024 levels) is
    compared without Python's recursion limit.
    """
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        kind = type(x)
        if kind is not type(y):
            return False
        if kind is dict:
            if x.keys() != y.keys():
                return False
            stack.extend((v, y[k]) for k, v in x.items())
        elif kind is list:
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif kind is float:
            if x != y or math.copysign(1.0, x) != math.copysign(1.0, y):
                return False
        elif x != y:
            return False
    return True


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}
    return names.get(type(value), type(value).__name__)
