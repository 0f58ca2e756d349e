"""Relay: bytes in from one side, `Forward`s out, with the rewrite chain in between.

Owns: splitting each direction into lines, deciding which lines to parse, pairing through
`Session`, running the ordered rewrites, and turning their outcomes into bytes with a
destination. Must never: do IO, await, read a clock (the shell passes `now`), or re-encode a
line that no rewrite changed: an untouched line leaves as the very bytes that came in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from acp_bridge.core import protocol as p
from acp_bridge.core.chain import Chain
from acp_bridge.core.chain import Outcome as ChainOutcome
from acp_bridge.core.forward import VERDICT_PASS, complete_lines
from acp_bridge.core.forward import Forward as Forward
from acp_bridge.core.forward import Verdict as Verdict
from acp_bridge.core.id_scanner import Members, MemberScanner
from acp_bridge.core.lines import MIB, LineSplitter, Opaque
from acp_bridge.core.literals import number_literals
from acp_bridge.core.messages import (
    OTHER,
    REQUEST,
    RESPONSE,
    TO_AGENT,
    Direction,
    Frame,
    Kind,
    Unencodable,
    brief,
    classify,
    encode,
)
from acp_bridge.core.rewrites.base import Rewrite
from acp_bridge.core.scan import Finder
from acp_bridge.core.session import Pending, Session

if TYPE_CHECKING:
    from acp_bridge.core.statistics import RelayStatistics

log = logging.getLogger("acp_bridge.relay")


# Bytes that every request and response contains (the `"id"` member): a line without them
# (and without an escape, which could spell any key: `_has_escape`) can only be a
# notification or not JSON-RPC at all, so it is parsed only if a rule's trigger bytes
# appear in it.
_ALWAYS_PARSE = (b'"id"',)
RUN_MIN = 2048  # below this many bytes of complete lines, the per-line path is the faster one
_LINE_NOT_AN_OBJECT = re.compile(rb"\n[^{]")  # faster than counting "\n{" against "\n"
_ESCAPE = b"\\u"


# orjson writes 254 levels of nesting at most, and a line nested that deep has at least
# twice as many bytes: shorter lines need no check.
_DEEP_MIN = 2 * 254


def _writable(frame: Frame) -> bool:
    """Could orjson write this message back? (It reads 1,024 levels, writes 254.)"""
    raw = frame.raw
    if frame.msg is None or raw.count(b"[") + raw.count(b"{") < 254:
        return True
    try:
        encode(frame.msg)  # as a rule's change would be written (lone surrogates and all)
    except Unencodable:
        return False
    return True


def _literals(raw: bytes, parsed: Any) -> dict[int, bytes]:
    try:
        return number_literals(raw, parsed)
    except (ValueError, RecursionError):
        return {}


def _has_escape(data: bytes) -> bool:
    # A one-byte search runs at memchr speed; most lines have no backslash at all.
    return b"\\" in data and _ESCAPE in data


class Relay:
    """The sans-IO proxy: feed it what arrived, send what it returns."""

    def __init__(
        self,
        rewrites: Sequence[Rewrite] = (),
        *,
        strict: bool = False,
        max_line: int = 16 * MIB,
        bulk: bool = True,
        run_min: int = RUN_MIN,
        native_scan: bool = True,
    ) -> None:
        self.chain = Chain(rewrites)
        self.rewrites = self.chain.rewrites
        self.strict = strict
        self.bulk = bulk
        self.run_min = run_min
        self.native_scan = native_scan  # False: the chunk scans use bytes.find only (tests)
        self.max_line = max_line
        self.session = Session()
        self._splitters = {d: LineSplitter(max_line) for d in Direction}
        self._triggers = _ALWAYS_PARSE + tuple(sorted(self.chain.triggers))
        self._wanted = frozenset(kind for kind in Kind if self.chain.wants(kind))
        # What the bridge writes itself must land between whole lines of its destination:
        # held back while a long line is streaming there, and after a line the source left
        # unterminated at its end, preceded by the newline it lacked.
        self._held: dict[Direction, list[Forward]] = {d: [] for d in Direction}
        self._torn = dict.fromkeys(Direction, False)
        self._long: dict[Direction, MemberScanner | None] = dict.fromkeys(Direction)
        self.agent_gone: tuple[str, Any] | None = None  # (message, data) once the agent is gone
        self.unencodable = 0  # lines a rule changed that could not be written back

    def __repr__(self) -> str:
        names = ", ".join(rw.name for rw in self.chain.rewrites)
        return f"<Relay [{names}] strict={self.strict} {self.session!r}>"

    # -- input ------------------------------------------------------------------------------

    def feed(self, direction: Direction, chunk: bytes, now: float = 0.0) -> list[Forward]:
        """Take bytes that arrived travelling `direction`; return what to send, in order.

        The complete lines of a chunk that no rule could concern leave as one run, with no
        per-line work: most traffic is streamed chunks that nothing touches, and their cost
        decides the throughput. `tests/core/test_relay.py` proves the run equal, line for
        line, to the per-line path (`bulk=False`).
        """
        splitter = self._splitters[direction]
        if not self.bulk:
            return self._pieces(direction, splitter.feed(chunk), now)
        out: list[Forward] = []
        if not splitter.idle:  # finish the line in progress on its own, then look at the rest
            first = chunk.find(b"\n") + 1
            if first == 0:
                return self._pieces(direction, splitter.feed(chunk), now)
            out = self._pieces(direction, splitter.feed(chunk[:first]), now)
            chunk = chunk[first:]
        end = chunk.rfind(b"\n") + 1
        if end == 0 or end > self.max_line:  # no complete line, or lines that may be too long
            out.extend(self._pieces(direction, splitter.feed(chunk), now))
            return out
        body = chunk if end == len(chunk) else chunk[:end]
        if end < self.run_min:  # a message or two (interactive traffic): nothing to gain from runs
            one = body.find(b"\n") + 1 == end  # the usual case: one message, no copy
            self._pieces(direction, (body,) if one else complete_lines(body), now, out)
        else:
            self._relay_body(direction, body, now, out)
        if end < len(chunk):
            out.extend(self._pieces(direction, splitter.feed(chunk[end:]), now))
        return out

    def _relay_body(self, direction: Direction, body: bytes, now: float, out: list[Forward]) -> None:
        """Complete lines: each one that needs a look goes the per-line way, and the runs of
        lines between them leave whole.

        The lines that need a look are found by scanning for what makes a line need one (a
        trigger, an escape, a line that does not start with "{"); each scan resumes from its
        last hit, so a chunk costs a few passes over its bytes however many hits it has.
        """
        size = len(body)
        # An escape could hide a key; a backslash alone (a "\n" in some text) does not, and
        # one-byte search is cheap, so look for the two-byte escape only where it can be.
        needles = self._triggers + (_ESCAPE,) if b"\\" in body else self._triggers
        find = Finder(body, use_native=self.native_scan).find  # memmem where there is one
        hits = [find(needle) for needle in needles]
        odd = _LINE_NOT_AN_OBJECT.search(body)
        odd_at = -1 if odd is None else odd.start() + 1
        pos = 0
        adjacent = 0  # lines in a row that needed a look: past a few, runs are unlikely
        while pos < size:
            if adjacent > 8:
                self._pieces(direction, complete_lines(body[pos:]), now, out)
                return
            for i, at in enumerate(hits):  # bring each scan up to `pos`
                if 0 <= at < pos:
                    hits[i] = find(needles[i], pos)
            if 0 <= odd_at < pos:
                odd = _LINE_NOT_AN_OBJECT.search(body, pos - 1 if pos else 0)
                odd_at = -1 if odd is None else odd.start() + 1
            first = min([at for at in hits if at >= 0] + ([odd_at] if odd_at >= 0 else []), default=-1)
            if pos == 0 and not body.startswith(b"{"):
                first = 0
            if first < 0:
                self._pass_untouched(direction, body[pos:] if pos else body, out)
                return
            start = body.rfind(b"\n", pos, first) + 1 or pos
            stop = body.find(b"\n", first) + 1
            if start > pos:
                self._pass_untouched(direction, body[pos:start], out)
                adjacent = 0
            else:
                adjacent += 1
            self._pieces(direction, (body[start:stop],), now, out)
            pos = stop

    def _pass_untouched(self, direction: Direction, run: bytes, out: list[Forward]) -> None:
        # Not even its lines are counted: that would be one more pass over every byte.
        out.append(Forward(direction, run, run, VERDICT_PASS, untouched_lines=True))

    def feed_eof(self, direction: Direction, now: float = 0.0) -> list[Forward]:
        """The stream travelling `direction` ended: flush a partial last line as it is.

        A torn last line goes on as it came, unterminated; only if the bridge then writes a
        message of its own the same way (an answer to a request left in flight) does a
        newline go first, so that the message is a line of its own.
        """
        splitter = self._splitters[direction]
        torn = not splitter.idle
        out = self._pieces(direction, splitter.feed_eof(), now)
        if torn:
            written = [f.data for f in out if f.direction is direction and f.data]
            if written and not written[-1].endswith(b"\n"):  # the stream's last line, unterminated
                self._torn[direction] = True
            self._release_held(direction, out)
        return out

    def needs_parse(self, line: bytes) -> bool:
        """Could this line concern the session or a rewrite? False means: forward as is."""
        for trigger in self._triggers:  # a loop: any() with a generator costs more per line
            if trigger in line:
                return True
        return _has_escape(line)

    def _pieces(self, direction: Direction, pieces: Iterable[bytes | Opaque], now: float,
                out: list[Forward] | None = None) -> list[Forward]:
        if out is None:
            out = []
        for piece in pieces:
            if isinstance(piece, Opaque):
                self._opaque(direction, piece, now, out)
            elif self.needs_parse(piece) or not piece.startswith(b"{"):
                # Anything that does not even start like an object is parsed too, so that
                # banners and other stray output are seen as what they are (and warned about).
                self._line(classify(direction, piece), now, out)
            else:
                out.append(Forward(direction, piece, piece, VERDICT_PASS))
        return out

    # -- one parsed line ------------------------------------------------------------------------

    def _line(self, frame: Frame, now: float, out: list[Forward]) -> None:
        kind = frame.kind
        request: Pending | None = None
        if kind is REQUEST:
            if self.agent_gone is not None and frame.direction is TO_AGENT:
                self._refuse(frame, frame.id, out)
                return
            request = self.session.on_request(frame, now)
        elif kind is RESPONSE:
            request = self.session.on_response(frame)
        elif kind is OTHER:
            self._other(frame, now, out)
            return

        if (kind is RESPONSE and request is None) or kind not in self._wanted:
            out.append(Forward(frame.direction, frame.raw, frame.raw, VERDICT_PASS, frame, (), request))
            return  # unpaired responses: nothing to go on, so nothing to change
        if not self.strict and len(frame.raw) >= _DEEP_MIN and not _writable(frame):
            # Nothing the rules made of it could be written back: they are not asked, so
            # that what they remember stays true to what the client was sent. (Strict: they
            # are, and the bridge stops if what they make of it cannot be written.)
            self._unencodable(frame, [], request, "nested deeper than can be written back", out)
            return
        try:
            outcome = self.chain.run(frame, request, self.session)
        except Exception as exc:
            if self.strict:
                self._not_forwarded(frame, request, out)
                raise
            log.exception("rule failed on %r; forwarding the original", frame)
            self._fail_open(frame, [], request, f"{type(exc).__name__}: {exc}", out)
            return
        if outcome is None:  # every rule passed
            out.append(Forward(frame.direction, frame.raw, frame.raw, VERDICT_PASS, frame, (), request))
            return
        self._verdict(frame, outcome, request, out)

    def _verdict(self, frame: Frame, outcome: ChainOutcome, request: Pending | None,
                 out: list[Forward]) -> None:
        """Turn what the rules decided into bytes: the very line, its re-encoding, nothing;
        then the messages the rules asked the bridge to send."""
        current, rules = outcome.frame, outcome.rules
        # A message the bridge writes is always a whole line: the line's own terminator, or
        # a newline where the line had none (the last line of a stream).
        terminator = frame.terminator or b"\n"
        try:
            if outcome.dropped:
                verdict, data = Verdict.DROP, b""
            elif current is frame:
                verdict, data = Verdict.PASS, frame.raw
            else:
                assert current.msg is not None
                verdict, data = Verdict.REWRITE, encode(current.msg, terminator, source=frame)
            written = [(emit.direction, encode(emit.msg, terminator, source=frame)) for emit in outcome.emits]
        except Unencodable as exc:
            self._unencodable(frame, rules, request, str(exc), out)
            return
        if outcome.dropped and request is not None and frame.kind is Kind.REQUEST:
            self.session.forget(request)  # the bridge answered it, or nobody will
        if data and not data.endswith(b"\n"):
            self._torn[frame.direction] = True  # an unterminated last line, passed on as it came
        out.append(Forward(frame.direction, data, frame.raw, verdict, frame, tuple(rules), request))
        for direction, message in written:
            self._emit(Forward(direction, message, b"", Verdict.EMIT, None, tuple(rules)), out)

    def _unencodable(self, frame: Frame, rules: list[str], request: Pending | None, why: str,
                     out: list[Forward]) -> None:
        """What the rules made of `frame` cannot be written: a rule failure like any other
        (the original goes on; strict: `Unencodable` is raised and nothing goes on)."""
        if self.strict:
            self._not_forwarded(frame, request, out)
            if frame.kind is Kind.RESPONSE:
                what = f"the answer to {request.method if request else '?'} #{brief(frame.id)}"
            else:
                what = f"{frame.method} #{brief(frame.id)}" if frame.kind is REQUEST else str(frame.method)
            raise Unencodable(f"what the rules ({', '.join(rules)}) made of {what} cannot be written back: {why}")
        self.unencodable += 1
        if self.unencodable == 1:
            log.warning("a message the rules would change cannot be written back (%s); it was "
                        "forwarded as it came, unchanged (further ones are not reported)", why)
        self._fail_open(frame, rules, request, f"cannot re-encode: {why}", out)

    def _not_forwarded(self, frame: Frame, request: Pending | None, out: list[Forward]) -> None:
        """Strict, and a rule failed on `frame`: the relay raises, so neither it nor what the
        chunk made before it (`out`) is forwarded. A response among them answered nobody:
        its request is in flight again (the bridge answers it as it stops)."""
        self._in_flight_again(out)
        if frame.kind is RESPONSE and request is not None:
            self.session.track(request)

    def _in_flight_again(self, unsent: Iterable[Forward]) -> None:
        for fwd in unsent:
            request = fwd.request
            if (request is not None and request.origin is TO_AGENT and fwd.direction is not TO_AGENT
                    and (fwd.frame is None or fwd.frame.kind is RESPONSE)):
                self.session.track(request)

    def _fail_open(self, frame: Frame, rules: list[str], request: Pending | None, error: str,
                   out: list[Forward]) -> None:
        out.append(Forward(frame.direction, frame.raw, frame.raw, Verdict.ERROR, frame,
                           tuple(rules), request, error=error))

    def _emit(self, fwd: Forward, out: list[Forward]) -> None:
        """Place a message the bridge wrote: never inside a line of its destination."""
        direction = fwd.direction
        if self._long[direction] is not None:  # a long line is streaming there: after it
            self._held[direction].append(fwd)
            return
        if self._torn[direction]:
            self._torn[direction] = False
            fwd.data = b"\n" + fwd.data
        out.append(fwd)

    def _release_held(self, direction: Direction, out: list[Forward]) -> None:
        held, self._held[direction] = self._held[direction], []
        for fwd in held:
            self._emit(fwd, out)

    # -- lines the parser could not take whole ----------------------------------------------

    def _opaque(self, direction: Direction, piece: Opaque, now: float, out: list[Forward]) -> None:
        """A piece of a line over the parse limit: forwarded at once, and scanned for its id
        and method, so that a long request is answered too if the agent dies."""
        scanner = self._long[direction]
        if scanner is None:
            scanner = self._long[direction] = MemberScanner()
        scanner.feed(piece.data)
        out.append(Forward(direction, piece.data, piece.data, Verdict.OPAQUE))
        if not piece.end:
            return
        self._long[direction] = None
        if piece.data.endswith(b"\n"):
            self._bookkeep(direction, scanner.finish(), now, out)
        else:  # torn by the end of the stream: no message, and what follows needs a newline
            self._torn[direction] = True
        self._release_held(direction, out)

    def _other(self, frame: Frame, now: float, out: list[Forward]) -> None:
        """Not one JSON-RPC message the rules may read: forwarded as it came. A batch's
        requests and responses, and a message orjson rejects for a detail (a lone surrogate,
        NaN), are still paired, so that every request is answered if the agent dies."""
        out.append(Forward(frame.direction, frame.raw, frame.raw, Verdict.OTHER, frame))
        if not frame.raw.endswith(b"\n"):
            return  # torn by the end of the stream: no one can read it as a message
        if frame.batch is not None:
            self._bookkeep_batch(frame, now, out)
        elif frame.msg is None and (b'"id"' in frame.raw or _has_escape(frame.raw)):
            self._bookkeep(frame.direction, MemberScanner.scan(frame.raw), now, out)

    def _bookkeep_batch(self, frame: Frame, now: float, out: list[Forward]) -> None:
        assert frame.batch is not None
        literals: dict[int, bytes] | None = None
        for element in frame.batch:
            if not isinstance(element, dict) or "id" not in element:
                continue
            id_, id_text = element["id"], None
            if not isinstance(id_, (str, int)) and id_ is not None:  # a float: as written
                if literals is None:
                    literals = _literals(frame.raw, frame.batch)
                text = literals.get(id(id_))
                id_text = None if text is None else orjson.Fragment(text)
            method = element.get("method")
            if isinstance(method, str):
                params = element.get("params")
                session_id = params.get("sessionId") if isinstance(params, dict) else None
                self._note_request(Pending(frame.direction, id_, method, session_id, b"", now, id_text), out)
            elif "result" in element or "error" in element:
                self.session.pair(frame.direction, id_)

    def _bookkeep(self, direction: Direction, found: list[Members], now: float, out: list[Forward]) -> None:
        """Requests and responses known only by the member scan: tracked and paired."""
        for members in found:
            if not (members.is_request or members.is_response):
                continue
            try:
                id_ = members.value("id")
                method = members.value("method") if members.is_request else None
                hash(id_)
            except Exception:  # no value anyone could match an answer to: not tracked
                continue
            if members.is_response:
                self.session.pair(direction, id_)
                continue
            if isinstance(method, str):
                id_text = members.written("id")
                self._note_request(Pending(direction, id_, method, None, b"", now, id_text), out)

    def _note_request(self, pending: Pending, out: list[Forward]) -> None:
        """A request the rules cannot read: in flight, or answered here if the agent is gone."""
        if self.agent_gone is not None and pending.origin is Direction.TO_AGENT:
            self._refuse(None, pending.reply_id, out)
        else:
            self.session.track(pending)

    def _refuse(self, frame: Frame | None, id_: Any, out: list[Forward]) -> None:
        """The agent is gone: answer a client request here instead of forwarding it."""
        assert self.agent_gone is not None
        message, data = self.agent_gone
        if frame is not None and frame.kind is Kind.REQUEST:
            out.append(Forward(frame.direction, b"", frame.raw, Verdict.DROP, frame, ("bridge",)))
        self._emit(self._answer(id_, message, data, frame), out)

    def _answer(self, id_: Any, message: str, data: Any, source: Frame | None = None) -> Forward:
        msg = p.error_response(id_, p.INTERNAL_ERROR, message, data)
        try:
            encoded = encode(msg, source=source)
        except Unencodable:  # an id nested past what can be written: JSON-RPC's null id
            encoded = encode(p.error_response(None, p.INTERNAL_ERROR, message, data))
        return Forward(Direction.TO_CLIENT, encoded, b"", Verdict.EMIT, None, ("bridge",))

    # -- faults ---------------------------------------------------------------------------------

    def fail_pending(self, message: str, data: Any = None, *, unsent: Sequence[Forward] = (),
                     cut: bool | None = None) -> list[Forward]:
        """The agent is gone, or the bridge stops: answer every client request still in
        flight with a JSON-RPC error, oldest first, and every later one as it comes
        (nothing else can answer).

        Args:
            unsent: forwards the relay returned that will not be sent (the bridge stops):
                a response among them answered nobody, so its request is in flight again.
            cut: the stream toward the client ends here (the bridge stops), inside a line
                when True: the answers neither wait for a long line to end nor glue on.
        """
        self._in_flight_again(unsent)
        if cut is not None:
            self._long[Direction.TO_CLIENT], self._held[Direction.TO_CLIENT] = None, []
            self._torn[Direction.TO_CLIENT] = cut
        self.agent_gone = (message, data)
        out: list[Forward] = []
        for request in self.session.pending(Direction.TO_AGENT):
            self.session.forget(request)
            answer = self._answer(request.reply_id, message, data)
            answer.request = request
            self._emit(answer, out)
        return out

    def statistics(self) -> RelayStatistics:
        from acp_bridge.core.statistics import RelayStatistics  # only when asked: start-up

        stats = self.session.statistics()
        return RelayStatistics(
            pending_to_agent=stats.pending_to_agent,
            pending_to_client=stats.pending_to_client,
            unpaired_responses=stats.unpaired_responses,
        )
