"""The proxy protocol's wire, as bytes: its two dialects, the first message that decides
which one a chain speaks, and the small readers and writers of envelope lines.

Owns: the dialects (the official `proxy/initialize` and `proxy/successor` of the unstable
schema, and the older sacp one of `@thinkwell/conductor`: `initialize` with `_meta.proxy`,
`_proxy/successor/*`), what a capture's header says of a chain, the refusal of a first
message that is no conductor's, one spelling per id value, and the splice that adds
`_meta.proxy` to the sacp initialize answer. Must never: re-encode a value it can splice.
core/proxy_link.py keeps a connection's state on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from acp_bridge.core.json_spans import SpanError, spans
from acp_bridge.core.methods import CANCEL_REQUEST, INITIALIZE, PROXY_INITIALIZE, PROXY_SUCCESSOR

# The sacp dialect's envelopes are no ACP method (core/methods.py has the official ones).
SACP_REQUEST = "_proxy/successor/request"
SACP_NOTIFICATION = "_proxy/successor/notification"

INVALID_REQUEST, INVALID_PARAMS = -32600, -32602
STRING_BYTES = rb'"(?:[^"\\]|\\.)*"'  # a JSON string's bytes
ID_BYTES = rb'-?[0-9]+|' + STRING_BYTES


@dataclass(frozen=True, slots=True)
class Dialect:
    """How a conductor says "you are a proxy" and how it wraps a successor's messages."""

    name: str
    initialize: str  # the method of the first request
    request: str  # the envelope of a request to or from the successor
    notification: str  # the envelope of a notification
    hop_local_cancel: bool  # `$/cancel_request` names an envelope of this hop
    answer_meta: bool  # the initialize answer says `_meta.proxy: true`

    @property
    def one_envelope(self) -> bool:
        """Requests and notifications share one envelope method (told apart by the id)."""
        return self.request == self.notification


OFFICIAL = Dialect("official", PROXY_INITIALIZE, PROXY_SUCCESSOR, PROXY_SUCCESSOR,
                   hop_local_cancel=True, answer_meta=False)
SACP = Dialect("sacp", INITIALIZE, SACP_REQUEST, SACP_NOTIFICATION,
               hop_local_cancel=False, answer_meta=True)

def chain_facts(dialect: Dialect) -> dict[str, str]:
    """What a capture's header says of a run as a chain component."""
    return {"role": "proxy", "dialect": dialect.name}


NO_AGENT = ("acp-bridge run was started without an agent: give the agent's command after `--` "
            "(acp-bridge run -- AGENT), or start it as a proxy under an ACP conductor")


@dataclass(frozen=True, slots=True)
class Refusal:
    """The first message was not a conductor's: why, and the answer to send if it had an id."""

    reason: str
    answer: bytes | None


def terminator(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if line.endswith(b"\n") else b""


def load_object(line: bytes) -> dict[str, object] | None:
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None


def error_line(raw_id: bytes, code: int, message: str) -> bytes:
    error = orjson.dumps({"code": code, "message": message})
    return b'{"jsonrpc":"2.0","id":' + raw_id + b',"error":' + error + b"}\n"


def id_key(raw: bytes) -> bytes:
    """One spelling per id value, so that `1` and `1.0` are the same id and `"1"` another."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:  # a number orjson cannot hold: its digits are its name
        return raw.strip()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer past 64 bits
        return raw.strip()


def our_id_in(raw: bytes) -> int | None:
    """The id of one of our own requests that `raw` names (`2` or `2.0`), else None."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def first_message(line: bytes) -> tuple[Dialect, bytes] | Refusal:
    """Decide the chain's dialect from the conductor's first line; return it with the line
    to feed the relay as the client's (an official `proxy/initialize` becomes the
    `initialize` it stands for), or why this is no chain."""
    msg = load_object(line)
    method = msg.get("method") if msg is not None else None
    try:
        where = spans(line) if msg is not None else {}
    except SpanError:
        where = {}
    raw_id = line[slice(*where["id"])] if "id" in where else None
    if method == PROXY_INITIALIZE and raw_id is not None:
        start, end = where["method"]
        return OFFICIAL, line[:start] + b'"initialize"' + line[end:]
    params = msg.get("params") if msg is not None else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if method == INITIALIZE and raw_id is not None and isinstance(meta, dict) and meta.get("proxy") is True:
        return SACP, line
    return Refusal(NO_AGENT, error_line(raw_id, INVALID_REQUEST, NO_AGENT) if raw_id is not None else None)


def with_proxy_meta(line: bytes, start: int, end: int) -> bytes:
    """`line` with `_meta.proxy: true` in the object at `start:end` (an initialize result),
    spliced in: every other byte stays as it was."""
    result = members_of(line, start)
    if result is None:
        return line  # not an object: nothing to say it in
    if "_meta" not in result:
        return _add_member(line, start, end, b'"_meta":{"proxy":true}')
    meta_start, meta_end = result["_meta"]
    meta = members_of(line, meta_start)
    if meta is None:
        return line[:meta_start] + b'{"proxy":true}' + line[meta_end:]
    if "proxy" in meta:
        proxy_start, proxy_end = meta["proxy"]
        return line[:proxy_start] + b"true" + line[proxy_end:]
    return _add_member(line, meta_start, meta_end, b'"proxy":true')


def _add_member(line: bytes, start: int, end: int, member: bytes) -> bytes:
    """`member` added last to the object at `start:end`."""
    close = end - 1  # the object's `}`
    empty = not line[start + 1:close].strip()
    return line[:close] + (member if empty else b"," + member) + line[close:]


def members_of(line: bytes, at: int = 0) -> dict[str, tuple[int, int]] | None:
    """The spans of the members of the object at `at`; None when it is not one."""
    try:
        return spans(line, at)
    except SpanError:
        return None


def cancelled_id(line: bytes, where: dict[str, tuple[int, int]]) -> bytes | None:
    """The id a `$/cancel_request` names, in one spelling per value (`id_key`)."""
    params = members_of(line, where["params"][0]) if "params" in where else None
    if params is None or "requestId" not in params:
        return None
    return id_key(line[slice(*params["requestId"])])


def cancel_line(request_id: int, terminator: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","method":"%s","params":{"requestId":%d}}' % (
        CANCEL_REQUEST.encode(), request_id) + (terminator or b"\n")


def small_value(head: bytes, span: tuple[int, int | None] | None) -> bytes | None:
    """The bytes of a member's value that ended within the head, else None."""
    if span is None or span[1] is None:
        return None
    return head[span[0]:span[1]]


def small_string(head: bytes, span: tuple[int, int | None] | None) -> str | None:
    raw = small_value(head, span)
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None
