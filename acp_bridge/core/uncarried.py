"""What a proxy chain cannot carry toward the agent, answered by the bridge at once.

Owns: the bridge's answers, in a chain, to a client line no envelope can hold (a conductor
wraps one message, named by its string `method`): a batch, and a request whose `method` is
not a string. As JSON-RPC 2.0 says: a batch's answer is an array of one error per request
(and per element that is no message, under its id or a null one), none for a notification;
an empty batch gets one error under a null id; a batch of notifications gets nothing. A
batch over the parse limit streamed on (the link drops it): answered as it ends. A request
over the parse limit that the link cannot wrap as a request as it streams (its method no
string, or its method or id not before its params: `proxy_long_lines.outgoing` says, from
the same head the link reads): answered as it ends. A client's answer inside a batch
answers the successor's request with an error instead, so that it does not wait for ever.
Must never: answer a notification, answer a request twice (what it answers is never
tracked as in flight), or say a kind more than once on stderr.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import orjson

from acp_bridge.core import protocol as p
from acp_bridge.core.answers import BRIDGE, Answers, answer
from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.id_scanner import Members
from acp_bridge.core.lines import Opaque
from acp_bridge.core.literals import written_numbers
from acp_bridge.core.messages import TO_AGENT, TO_CLIENT, Frame, Unencodable, encode
from acp_bridge.core.proxy_long_lines import HEAD, Head, Outgoing, outgoing
from acp_bridge.core.session import Connection

log = logging.getLogger("acp_bridge.chain")

NO_BATCH = ("acp-bridge: a batch cannot be carried across a proxy chain (the conductor takes each message in an "
            "envelope of its own); send its messages one a line")
NO_METHOD = ("acp-bridge: a request whose method is not a string cannot be carried across a proxy chain (its "
             "envelope names the method)")
NO_ORDER = ("acp-bridge: a request over the parse limit cannot be carried across a proxy chain unless its method "
            "and id come before its params (its envelope is written as the line streams)")
BATCH_ANSWER = ("acp-bridge: the client answered this request in a batch, which cannot be carried across a proxy "
                "chain")

_ORDER_SAID = ("a message over the parse limit from the client whose method and id do not come before its params "
               "cannot be carried across a proxy chain as it is; a request is answered with an error")
_METHOD_SAID = ("a message from the client whose method is not a string cannot be carried across a proxy chain; a "
                "request is answered with an error, and it is not sent on")
_BATCH_SAID = ("a batch from the client cannot be carried across a proxy chain; its requests are answered with an "
               "error, and it is not sent on")

# What an element of a batch is, for its answer: (kind, its id as written, its id's value).
REQUEST, NOTIFICATION, ANSWER, INVALID = "request", "notification", "answer", "invalid"
Element = tuple[str, Any, Any]


def _kind(keys: Iterable[str]) -> str:
    """A batch element with these members: a notification, an answer, or a request (also
    one that is no message: it is answered as a request)."""
    keys = set(keys)
    if "method" in keys:
        return REQUEST if "id" in keys else NOTIFICATION
    return ANSWER if "id" in keys and ("result" in keys or "error" in keys) else INVALID


def _value(members: Members) -> Any:
    """The value of the id the scan found, to pair an answer by; None when it kept none."""
    try:
        return members.value("id") if "id" in members.literals else None
    except Exception:  # a literal no JSON reader takes: it pairs with nothing
        return None


def _error(id_: Any, message: str, source: Frame | None = None) -> bytes:
    """An Invalid Request error under `id_`, unterminated; under a null id when `id_` cannot
    be written (nested past what orjson writes)."""
    try:
        return encode(p.error_response(id_, p.INVALID_REQUEST, message), b"", source=source)
    except Unencodable:
        return encode(p.error_response(None, p.INVALID_REQUEST, message), b"")


class Uncarried:
    """A chain link's relay: client lines that cannot go on, answered where they came from."""

    def __init__(self, session: Connection, answers: Answers, head: int = HEAD) -> None:
        self.session = session
        self.answers = answers
        self.head = head  # the link's (`ProxyLink.head`): a long line's bytes read to say how it goes on
        self._head = Head()  # of the long line toward the agent under way
        self._long: Outgoing | None = None  # what the link makes of it, once its head is read
        self._said: set[str] = set()

    def refused(self, frame: Frame, out: list[Forward]) -> bool:
        """Answer `frame` (a line toward the agent the rules cannot read) if no envelope can
        carry it; False: it goes on as before."""
        if frame.direction is not TO_AGENT:
            return False
        if frame.batch is not None:
            self._say("batch", _BATCH_SAID)
            out.append(Forward(TO_AGENT, b"", frame.raw, Verdict.DROP, frame, (BRIDGE,)))
            self._batch(frame, out)
            return True
        msg = frame.msg
        if msg is None or "method" not in msg or isinstance(msg["method"], str):
            return False
        self._say("method", _METHOD_SAID)
        out.append(Forward(TO_AGENT, b"", frame.raw, Verdict.DROP, frame, (BRIDGE,)))
        if "id" in msg:
            self._emit(_error(msg["id"], NO_METHOD, frame) + (frame.terminator or b"\n"), out)
        return True

    def _batch(self, frame: Frame, out: list[Forward]) -> None:
        assert frame.batch is not None
        terminator = frame.terminator or b"\n"
        if not frame.batch:  # JSON-RPC 2.0: an empty array is one invalid request
            self._emit(_error(None, NO_BATCH) + terminator, out)
            return
        literals: dict[int, bytes] | None = None
        elements: list[Element] = []
        for element in frame.batch:
            if not isinstance(element, dict):
                elements.append((INVALID, None, None))
                continue
            id_ = value = element.get("id")
            if type(id_) is float:  # as written: `1.50`, or an integer no float holds
                if literals is None:
                    literals = written_numbers(frame.raw, frame.batch)
                text = literals.get(id(id_))
                id_ = id_ if text is None else orjson.Fragment(text)
            elements.append((_kind(element.keys()), id_, value))
        self._answer(elements, terminator, out)

    def long_batch(self, found: list[Members], out: list[Forward]) -> None:
        """A batch over the parse limit has ended (it streamed on, and the link dropped it):
        its requests and answers, as far as the member scan found them, answered as a short
        batch's are (an element that is no object is not seen)."""
        self._say("batch", _BATCH_SAID)
        self._answer([(_kind(members.keys), members.written("id"), _value(members)) for members in found], b"\n", out)

    def long_piece(self, piece: Opaque) -> Outgoing | None:
        """A piece of a line over the parse limit toward the agent: its head read as the link
        reads it (`proxy_long_lines.outgoing`); at the line's end, what the link made of it."""
        if self._long is None:
            head = self._head.take(piece, self.head)
            if head is not None:
                self._long = outgoing(head[:self.head])
        if not piece.end:
            return None
        long, self._long = self._long, None
        return long

    def long_message(self, long: Outgoing, found: list[Members], out: list[Forward]) -> list[Members]:
        """A line over the parse limit toward the agent has ended whole, and the link made
        `long` of it: a request it did not wrap as one (its method no string, or its method
        or id not before its params) is answered here, and not tracked; the rest of `found`
        is returned, to be tracked as before."""
        if long.wrapped_request or long.answer or len(found) != 1:
            return found
        members = found[0]
        method = members.literals.get("method")
        if "method" in members.keys and (method is None or method[:1] != b'"'):
            kind, said, message = "method", _METHOD_SAID, NO_METHOD
        elif long.params is None or "id" in members.literals:
            kind, said, message = "order", _ORDER_SAID, NO_ORDER
        else:
            return found  # a notification, wrapped
        if long.message:  # else the link said it had no message to wrap (`ProxyLink._open_outgoing`)
            self._say(kind, said)
        if "id" in members.literals:
            self._emit(_error(members.written("id"), message) + b"\n", out)
        return []

    def _answer(self, elements: list[Element], terminator: bytes, out: list[Forward]) -> None:
        """One error per request or element that is no message, in one array toward the
        client; then an error for each request of the agent's that an answer here answered."""
        errors = [_error(id_, NO_BATCH) for kind, id_, _ in elements if kind in (REQUEST, INVALID)]
        if errors:
            self._emit(b"[" + b",".join(errors) + b"]" + terminator, out)
        for kind, _, value in elements:
            if kind == ANSWER:
                self._answered_in_batch(value, out)

    def _answered_in_batch(self, id_: Any, out: list[Forward]) -> None:
        """The client's answer in a batch: the request it answers gets an error instead."""
        request = self.session.pair(TO_AGENT, id_)
        if request is not None:
            self.answers.emit(answer(request.reply_id, BATCH_ANSWER, None, toward=TO_AGENT), out)

    def _emit(self, data: bytes, out: list[Forward]) -> None:
        self.answers.emit(Forward(TO_CLIENT, data, b"", Verdict.EMIT, None, (BRIDGE,)), out)

    def _say(self, kind: str, message: str) -> None:
        if kind not in self._said:
            self._said.add(kind)
            log.warning("%s (said once)", message)
