"""What the replay writes about the live client's lines: the JSON-RPC errors for lines that
are not requests the recording can answer, and short shows of values for messages.

Owns: `invalid_answer` (the error line for a line that is not one well-formed request: a
batch, a non-string method, a bad id, garbage, a line too long to read; with the id as the
client wrote it, `core.literals`) and `show`. Must never: do IO, raise on any input, or
hold more than one line.
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_bridge.core import protocol as p
from acp_bridge.core.id_scanner import Members, MemberScanner
from acp_bridge.core.literals import written_id
from acp_bridge.core.messages import Frame

SHOW_CHARS = 200  # the longest value shown in a message or a report


def show(value: Any) -> str:
    """A value from the wire for a message: a string as it is, anything else as JSON (not a
    Python repr), bounded in length."""
    return _bounded(value) if isinstance(value, str) else show_json(value)


def show_json(value: Any) -> str:
    """A value from the wire as JSON (an id: `"7"` and `7` differ), bounded in length."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = "(a value nested too deep to show)"
    return _bounded(text)


def _bounded(text: str) -> str:
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS] + "…"


def valid_id(id_: Any) -> bool:
    """A JSON-RPC id: a string, a number or null (not true, a list or an object)."""
    return id_ is None or (isinstance(id_, (str, int, float)) and not isinstance(id_, bool))


def error_line(id_: Any, code: int, message: str, data: Any = None) -> bytes:
    """One JSON-RPC error as a line; `id_` must be a valid id or a Fragment of one."""
    try:
        return orjson.dumps(p.error_response(id_, code, message, data)) + b"\n"
    except TypeError:  # a message with text orjson will not write (a lone surrogate)
        return orjson.dumps(p.error_response(id_, code, message.encode("ascii", "backslashreplace").decode()))\
            + b"\n"


_BATCH = "acp-bridge replay: a batch is not replayed (ACP has none); send each request on its own line"
_TOO_LONG = "acp-bridge replay: the request is longer than the replay reads ({limit} MiB); it is not answered " \
            "from the recording"


def invalid_answer(frame: Frame) -> tuple[bytes | None, str]:
    """The answer to a line that is not one request, response or notification the replay
    can take (`frame.kind` is OTHER, or a request with an invalid id), and what it was
    (for the report): an error per request in a batch, -32600 for an object that is not a
    valid request (with its id where it can be read), -32700 for a line that does not parse.
    None: nothing to answer (a batch of notifications and answers)."""
    if frame.batch is not None:
        found = MemberScanner.scan(frame.raw)
        errors = [error_line(m.written("id"), p.INVALID_REQUEST, _BATCH).rstrip(b"\n") for m in found
                  if "method" in m.keys and "id" in m.keys]
        if errors:
            return b"[" + b",".join(errors) + b"]\n", "a batch"
        if frame.batch and all(isinstance(e, dict) for e in frame.batch):
            return None, "a batch"
        return error_line(None, p.INVALID_REQUEST, _BATCH), "a batch"
    if frame.msg is not None:
        id_ = frame.msg.get("id")
        if "method" in frame.msg and not isinstance(frame.msg["method"], str):
            what = "a request whose method is not a string"
        elif "method" in frame.msg:
            what = "a request whose id is not a string, a number or null"
        else:
            what = "an object that is not a JSON-RPC request, response or notification"
        id_ = written_id(frame.raw, id_) if valid_id(id_) else None
        return error_line(id_, p.INVALID_REQUEST, f"acp-bridge replay: invalid request: {what}"), what
    found = MemberScanner.scan(frame.raw)
    id_ = found[0].written("id") if len(found) == 1 and "method" in found[0].keys else None
    return error_line(id_, p.PARSE_ERROR, "acp-bridge replay: the line is not a JSON-RPC message "
                                          "(it does not parse as JSON)"), "a line that is not JSON"


def too_long_answer(found: list[Members], limit: int) -> bytes | None:
    """The answer to a line over the read limit, from what a scan of it found: an error for
    the request it was, if any."""
    requests = [m for m in found if "method" in m.keys and "id" in m.keys]
    if not requests:
        return None
    message = _TOO_LONG.format(limit=limit)
    return b"".join(error_line(m.written("id"), p.INVALID_REQUEST, message) for m in requests)
