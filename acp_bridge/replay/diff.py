"""A compact JSON diff of two messages, for people and for tools.

Owns: `compact_diff(old, new)`: a dict from RFC 6901 pointer to `{"was": old, "now": new}`
(a side that is absent is left out), only for the places that differ, as deep as both sides
are containers of the same kind; `showable(diff)`, a diff that can be written; and
`without_id(line)`, an answer to compare.
Must never: do IO, or raise on any JSON value (a message nested past what can be walked is
compared whole).
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_bridge.core.protocol import Json

MAX_DEPTH = 200  # deeper than this, the two values are compared whole


def showable(diff: Json) -> Json:
    """`diff`, or a note where it is nested past what can be written (254 levels)."""
    try:
        orjson.dumps(diff, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return {"": {"note": "the messages differ, nested deeper than can be written"}}
    return diff


def _token(key: str | int) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _same(old: Any, new: Any) -> bool:
    # 1, true and 1.0 are different JSON values: compare types too (and so at every level:
    # Python finds {"a": 1} == {"a": True}).
    if type(old) is not type(new):
        return False
    if isinstance(old, dict):
        return old.keys() == new.keys() and all(_same(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    return bool(old == new)


def compact_diff(old: Any, new: Any) -> Json:
    """Where `new` differs from `old`, by pointer; `{}` when they are the same JSON value."""
    out: Json = {}
    try:
        _walk(old, new, "", out, 0)
    except RecursionError:  # nested past what Python walks: the two values, whole
        return {} if old == new else {"": {"was": old, "now": new}}
    return out


def _walk(old: Any, new: Any, here: str, out: Json, depth: int) -> None:
    if depth < MAX_DEPTH and isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            where = f"{here}/{_token(key)}"
            if key in new:
                _walk(old[key], new[key], where, out, depth + 1)
            else:
                out[where] = {"was": old[key]}
        for key in new:
            if key not in old:
                out[f"{here}/{_token(key)}"] = {"now": new[key]}
        return
    if depth < MAX_DEPTH and isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            where = f"{here}/{index}"
            if index >= len(new):
                out[where] = {"was": old[index]}
            elif index >= len(old):
                out[where] = {"now": new[index]}
            else:
                _walk(old[index], new[index], where, out, depth + 1)
        return
    if not _same(old, new):
        out[here] = {"was": old, "now": new}


def without_id(line: bytes) -> Any:
    """A JSON-RPC answer without its id, to compare with another (a line that does not
    parse: its text)."""
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line.decode("utf-8", "backslashreplace")
    if isinstance(msg, dict):
        msg.pop("id", None)
    return msg
