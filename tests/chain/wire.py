"""JSON-RPC lines as the chain harness reads and writes them: a message's top-level members
with their raw text, so that the conductor and the reference proxy can change an id or wrap
a message while every other value goes on byte for byte (stdlib only)."""

from __future__ import annotations

import json
import re
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")

# A member's parsed value and its raw text, exactly as it stood in the line.
Members = dict[str, tuple[Any, str]]


def scan(text: str) -> Members | None:
    """The members of the JSON object `text`, or None when it is not one object."""
    try:
        return _scan(text)
    except (json.JSONDecodeError, IndexError):
        return None


def _scan(text: str) -> Members | None:
    at = _SPACE.match(text, 0).end()  # type: ignore[union-attr]  # the pattern matches empty
    if text[at:at + 1] != "{":
        return None
    at = _skip(text, at + 1)
    members: Members = {}
    if text[at:at + 1] == "}":
        return members if _skip(text, at + 1) == len(text) else None
    while True:
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if not isinstance(key, str) or text[at:at + 1] != ":":
            return None
        start = _skip(text, at + 1)
        value, at = _DECODER.raw_decode(text, start)
        members[key] = (value, text[start:at])
        at = _skip(text, at)
        if text[at:at + 1] == ",":
            at = _skip(text, at + 1)
        elif text[at:at + 1] == "}":
            return members if _skip(text, at + 1) == len(text) else None
        else:
            return None


def _skip(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]  # the pattern matches empty


def value(members: Members, key: str) -> Any:
    return members[key][0] if key in members else None


def raw(members: Members, key: str) -> str | None:
    return members[key][1] if key in members else None


def request(id_raw: str, method_raw: str, params_raw: str | None) -> str:
    params = "" if params_raw is None else f',"params":{params_raw}'
    return f'{{"jsonrpc":"2.0","id":{id_raw},"method":{method_raw}{params}}}'


def notification(method_raw: str, params_raw: str | None) -> str:
    params = "" if params_raw is None else f',"params":{params_raw}'
    return f'{{"jsonrpc":"2.0","method":{method_raw}{params}}}'


def response(id_raw: str, members: Members) -> str:
    """The answer `members` (a response) carried, under another id."""
    key = "error" if "error" in members else "result"
    return f'{{"jsonrpc":"2.0","id":{id_raw},"{key}":{members[key][1]}}}'


def error(id_raw: str, code: int, message: str) -> str:
    return f'{{"jsonrpc":"2.0","id":{id_raw},"error":{json.dumps({"code": code, "message": message})}}}'


def envelope_params(inner: Members, meta_raw: str | None = None) -> str:
    """`{method, params}` of a wrapped message, its params byte for byte."""
    params = "" if "params" not in inner else f',"params":{inner["params"][1]}'
    meta = "" if meta_raw is None else f',"_meta":{meta_raw}'
    return f'{{"method":{inner["method"][1]}{params}{meta}}}'


def id_key(members: Members) -> str:
    """A request id as a dictionary key: its value, canonical (1 and 1.0 are not ids alike)."""
    return json.dumps(value(members, "id"))
