"""The bridge as a link in an ACP proxy chain: what a conductor sends, made into what the
client and the agent said, and back.

Owns: one chain connection's state once its dialect is known (core/proxy_wire.py has the
dialects and the first message): unwrapping what arrives from the successor and wrapping
what goes to it, answers put back under the ids they answer, hop-local cancellation, and
malformed envelopes answered. The ids the link puts on the wire are core/proxy_ids.py's
(its own, as in any chain, mapped both ways); what it changes toward the client is
core/proxy_to_client.py's; where a line over the parse limit goes, and its pieces, are
core/proxy_long_lines.py's (a mixin of the link). Must never:
change a wrapped message's `method` or `params` bytes (they are spliced, never re-encoded),
hold a line over the parse limit whole, or leave an envelope request unanswered because it
was malformed.

Below the relay: the shell feeds it the conductor's lines (`from_conductor`) and feeds the
relay what it returns, as if a client and an agent had written it; the relay's output
toward the agent goes through `to_successor`, toward the client through `to_client`. So
every rule, the capture and health see the messages as the client and the agent sent them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import orjson

from acp_bridge.core.json_spans import spans
from acp_bridge.core.lines import Opaque, Piece
from acp_bridge.core.methods import CANCEL_REQUEST
from acp_bridge.core.proxy_ids import LinkIds
from acp_bridge.core.proxy_long_lines import CONDUCTOR as CONDUCTOR
from acp_bridge.core.proxy_long_lines import FROM_AGENT as FROM_AGENT
from acp_bridge.core.proxy_long_lines import FROM_CLIENT as FROM_CLIENT
from acp_bridge.core.proxy_long_lines import HEAD, Head, LongLines, Routed, Stream
from acp_bridge.core.proxy_to_client import TowardClient
from acp_bridge.core.proxy_wire import (
    ID_BYTES,
    INVALID_PARAMS,
    STRING_BYTES,
    Dialect,
    cancel_line,
    cancelled_id,
    error_line,
    id_key,
    members_of,
    small_string,
    terminator,
)

log = logging.getLogger("acp_bridge.chain")


@dataclass
class ProxyLink(LongLines):
    """One chain connection's bookkeeping (sans-IO): feed it pieces, send what it returns."""

    dialect: Dialect
    max_line: int
    head: int = HEAD  # how much of a long line to read before deciding where it goes
    quick: bool = True  # False: every line on the general path (tests compare the two)
    _ids: LinkIds = field(default_factory=LinkIds)  # the ids the link puts on the wire, both ways
    _client: TowardClient = field(init=False)  # what it changes toward the client
    _in: Stream | None = None
    _out: Stream | None = None
    _said: set[str] = field(default_factory=set)
    _heads: tuple[Head, Head] = field(default_factory=lambda: (Head(), Head()))  # from, to the conductor
    _envelope: re.Pattern[bytes] = field(init=False)

    def __post_init__(self) -> None:
        self._client = TowardClient(self._ids)
        names = b"|".join(re.escape(name.encode()) for name in {self.dialect.request, self.dialect.notification})
        self._envelope = re.compile(rb'\{"jsonrpc":"2\.0",(?:"id":(' + ID_BYTES + rb'),)?"method":"(' + names
                                    + rb')","params":\{"method":(' + STRING_BYTES + rb'),"params":')

    @classmethod
    def started(cls, dialect: Dialect, first_line: bytes, max_line: int, head: int = HEAD) -> ProxyLink:
        link = cls(dialect, max_line, head)
        if dialect.answer_meta:
            where = spans(first_line)
            link._client.initialize_id = id_key(first_line[slice(*where["id"])])
        return link

    @property
    def in_flight(self) -> int:
        """Envelopes waiting for an answer, both ways."""
        return self._ids.in_flight

    def _say_once(self, kind: str, message: str, *args: object) -> None:
        if kind not in self._said:
            self._said.add(kind)
            log.warning(message + " (said once)", *args)

    # -- from the conductor ------------------------------------------------------------

    def from_conductor(self, piece: Piece) -> list[Routed]:
        """A piece of what the conductor sent: where it goes, as what."""
        if isinstance(piece, Opaque):
            return self._from_conductor_opaque(piece)
        quick = self._unwrap_quickly(piece) if self.quick else None
        if quick is not None:
            return quick
        where = members_of(piece)
        if where is None:
            return [(FROM_CLIENT, piece)]  # not an object: the relay passes it on and records it
        method = small_string(piece, where.get("method"))
        if method is not None and method in (self.dialect.request, self.dialect.notification):
            return self._unwrap(piece, method, where)
        if "method" not in where and "id" in where:
            return [self._answer_from_conductor(piece, where)]
        if method == CANCEL_REQUEST and self.dialect.hop_local_cancel:
            return [self._cancel_from_conductor(piece, where)]
        return [(FROM_CLIENT, piece)]

    def _unwrap(self, line: bytes, method: str, where: dict[str, tuple[int, int]]) -> list[Routed]:
        raw_id = line[slice(*where["id"])] if "id" in where else None
        is_request = raw_id is not None
        if not self.dialect.one_envelope and is_request != (method == self.dialect.request):
            return self._malformed(raw_id, f"{method} {'with' if is_request else 'without'} an id")
        inner = members_of(line, where["params"][0]) if "params" in where else None
        if inner is None or small_string(line, inner.get("method")) is None:
            return self._malformed(raw_id, "its params have no method")
        params = line[slice(*inner["params"])] if "params" in inner else None
        if params is not None and params[:1] not in (b"{", b"[") and params != b"null":
            return self._malformed(raw_id, "the params it wraps are neither an object nor an array")
        return [self._unwrapped(raw_id, line[slice(*inner["method"])], params, terminator(line))]

    def _unwrapped(self, raw_id: bytes | None, method: bytes, params: bytes | None, terminator: bytes) -> Routed:
        """The successor's message, out of its envelope: `method` and `params` as they came."""
        body = self._unwrapped_head(raw_id, method)
        if params is not None and params != b"null":
            body += b',"params":' + params
        return (FROM_AGENT, body + b"}" + terminator)

    def _unwrapped_head(self, envelope_id: bytes | None, method: bytes) -> bytes:
        """An unwrapped message's bytes up to its method: a request's (under an id of ours,
        mapped to the envelope's) or a notification's."""
        if envelope_id is None:
            return b'{"jsonrpc":"2.0","method":' + method
        return b'{"jsonrpc":"2.0","id":%d,"method":%s' % (self._ids.upstream_request(envelope_id), method)

    def _unwrap_quickly(self, line: bytes) -> list[Routed] | None:
        """The envelope as conductors write it (members in the usual order, no spaces):
        unwrapped with one match and one parse of the params, which proves them one whole
        value; None for any other line (the general path then reads it)."""
        found = self._envelope.match(line)
        if found is None:
            return None
        ending = terminator(line)
        end = len(line) - len(ending)
        if line[end - 2:end] != b"}}":
            return None
        raw_id, method = found.group(1), found.group(2).decode()
        if not self.dialect.one_envelope and (raw_id is not None) != (method == self.dialect.request):
            return None  # malformed: the general path says why
        params = line[found.end():end - 2]
        if params[:1] not in (b"{", b"["):
            return None
        try:
            orjson.loads(params)
        except orjson.JSONDecodeError:
            return None
        return [self._unwrapped(raw_id, found.group(3), params, ending)]

    def _malformed(self, raw_id: bytes | None, why: str) -> list[Routed]:
        text = f"a malformed {self.dialect.request} envelope from the conductor: {why}"
        self._say_once("malformed:" + why, "%s; answered with an error, not passed on", text)
        if raw_id is None:
            return []
        return [(CONDUCTOR, error_line(raw_id, INVALID_PARAMS, text))]

    def _answer_from_conductor(self, line: bytes, where: dict[str, tuple[int, int]]) -> Routed:
        """A response: to one of our envelopes (the successor's answer, for the client's
        request it wrapped), or the client's answer to a request of the successor's."""
        start, end = where["id"]
        client_id = self._ids.wrapped_answer(line[start:end])
        if client_id is not None:
            return (FROM_AGENT, line[:start] + client_id + line[end:])
        rule_id = self._ids.emitted_answer(line[start:end])
        return (FROM_CLIENT, line if rule_id is None else line[:start] + rule_id + line[end:])

    def _cancel_from_conductor(self, line: bytes, where: dict[str, tuple[int, int]]) -> Routed:
        """The conductor cancels an envelope it sent us: the client is told to cancel the
        request we made of it for that envelope (as if the agent cancelled it)."""
        target = cancelled_id(line, where)
        ours = self._ids.upstream_of(target) if target is not None else None
        if ours is None:
            return (FROM_CLIENT, line)  # the client's own cancel of a request it sent
        return (FROM_AGENT, cancel_line(ours, terminator(line)))

    # -- toward the successor ----------------------------------------------------------

    def to_successor(self, piece: Piece) -> bytes:
        """A piece of what the relay sends toward the agent: what to write to the conductor."""
        if isinstance(piece, Opaque):
            return self._to_successor_opaque(piece)
        where = members_of(piece)
        method = small_string(piece, where.get("method")) if where is not None else None
        if where is None or ("method" in where and method is None):
            self._say_once("unwrappable", "a line toward the successor is not a JSON-RPC message; it is "
                                          "recorded in the capture, and not sent to the conductor")
            return b""
        if method is None:
            return self._answer_to_successor(piece, where)
        if method == CANCEL_REQUEST and self.dialect.hop_local_cancel:
            target = cancelled_id(piece, where)
            ours = self._ids.envelope_of(target) if target is not None else None
            return cancel_line(ours, terminator(piece)) if ours is not None else b""
        return self._wrap(piece, where)

    def _wrap(self, line: bytes, where: dict[str, tuple[int, int]]) -> bytes:
        raw_id = line[slice(*where["id"])] if "id" in where else None
        body = self._envelope_head(raw_id, line[slice(*where["method"])])
        if "params" in where:
            body += b',"params":' + line[slice(*where["params"])]
        return body + b"}}" + terminator(line)

    def _envelope_head(self, client_id: bytes | None, method: bytes) -> bytes:
        """An envelope's bytes up to the wrapped method: a request's (under an id of ours,
        mapped to `client_id`) or a notification's."""
        if client_id is None:
            envelope = self.dialect.notification.encode()
            return b'{"jsonrpc":"2.0","method":"%s","params":{"method":%s' % (envelope, method)
        ours = self._ids.wrapped_request(client_id)
        return b'{"jsonrpc":"2.0","id":%d,"method":"%s","params":{"method":%s' % (
            ours, self.dialect.request.encode(), method)

    def _answer_to_successor(self, line: bytes, where: dict[str, tuple[int, int]]) -> bytes:
        """The client's answer to a request of the successor's: the answer to its envelope."""
        if "id" not in where:
            self._say_once("no-message", "a line toward the successor is neither a request, a notification nor an "
                                         "answer; it is recorded in the capture, and not sent to the conductor")
            return b""
        start, end = where["id"]
        envelope_id = self._ids.upstream_answer(line[start:end])
        if envelope_id is None:
            self._say_once("unknown-answer", "an answer toward the successor to no request of its; not sent")
            return b""
        return line[:start] + envelope_id + line[end:]

    # -- toward the client -------------------------------------------------------------

    def to_client(self, data: bytes) -> bytes:
        """What the relay sends toward the client, as the conductor must see it: a rule's
        request under an id of ours, and in the sacp dialect the answer to `initialize` with
        `_meta.proxy: true`; all else unchanged (core/proxy_to_client.py)."""
        return self._client.rewrite(data)
