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

from acp_bridge.core.answers import Answers, answered_by, dropped_answer
from acp_bridge.core.chain import Chain, ChainResult, RuleError
from acp_bridge.core.direction_state import direction_states
from acp_bridge.core.forward import VERDICT_PASS, complete_lines
from acp_bridge.core.forward import Forward as Forward
from acp_bridge.core.forward import Verdict as Verdict
from acp_bridge.core.lines import MIB, Opaque
from acp_bridge.core.messages import (
    OTHER,
    REQUEST,
    RESPONSE,
    TO_AGENT,
    TO_CLIENT,
    Direction,
    Frame,
    Kind,
    Unencodable,
    brief,
    classify,
    encode,
)
from acp_bridge.core.printable import printable
from acp_bridge.core.rewrites.base import Rewrite
from acp_bridge.core.rewrites.stray_output import StrayOutput
from acp_bridge.core.scan import Finder
from acp_bridge.core.session import Pending, Session
from acp_bridge.core.unparsed import ESCAPE, Unparsed, has_escape

if TYPE_CHECKING:
    from acp_bridge.core.statistics import RelayStatistics

log = logging.getLogger("acp_bridge.relay")


# Bytes that every request and response contains (the `"id"` member): a line without them
# (and without an escape, which could spell any key: `has_escape`) can only be a
# notification or not JSON-RPC at all, so it is parsed only if a rule's trigger bytes
# appear in it.
_ALWAYS_PARSE = (b'"id"',)
RUN_MIN = 2048  # below this many bytes of complete lines, the per-line path is the faster one
_LINE_NOT_AN_OBJECT = re.compile(rb"\n[^{]")  # faster than counting "\n{" against "\n"


# orjson writes 254 levels of nesting at most, and a line nested that deep has at least
# twice as many bytes: shorter lines need no check.
_DEEP_MIN = 2 * 254


def scan_needle(trigger: bytes) -> bytes:
    """What the chunk-wide scan looks for to find the lines that may hold `trigger`: a part
    of it, since each line found is checked for the whole trigger again (`needs_parse`).

    A trigger quoted whole (`"usage_update"`) is looked for without its closing quote:
    memmem skips on two-byte hashes, and a needle ending in a pair as common in ACP as `e"`
    (`"sessionUpdate"`, `"update"`) skips little, so it costs every read up to twice as much.
    """
    if len(trigger) > 5 and trigger.startswith(b'"') and trigger.endswith(b'"'):
        return trigger[:-1]
    return trigger


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
        divert_stray: bool = False,
    ) -> None:
        self.chain = Chain(rewrites)
        self.rewrites = self.chain.rewrites
        self.strict = strict
        self.bulk = bulk
        self.run_min = run_min
        self.native_scan = native_scan  # False: the chunk scans use bytes.find only (tests)
        self.max_line = max_line
        # `[relay] stray_output = "stderr"`: agent lines that are not a JSON object are not
        # forwarded; the shell shows them on stderr (core/rewrites/stray_output.py).
        self.stray = StrayOutput(divert_stray)
        self.session = Session()
        self._directions = direction_states(max_line)  # one record per direction, shared with the two below
        self._triggers = _ALWAYS_PARSE + tuple(sorted(self.chain.triggers))
        self._needles = tuple(dict.fromkeys(scan_needle(t) for t in self._triggers))
        self._wanted = frozenset(kind for kind in Kind if self.chain.wants(kind))
        self._answers = Answers(self.session, self._directions)  # what the bridge writes itself, and where
        if self.chain.wants(RESPONSE):
            self._answers.ahead_of_answer = self._ahead_of_own_answer
        self._unparsed = Unparsed(self.session, self._answers, self._directions)
        self.unencodable = 0  # lines a rule changed that could not be written back
        self._unencodable_said: set[str] = set()  # the rules whose unwritable change was said
        self.failures: dict[str, int] = {}  # per rule: how often it failed (each said once)
        self._drop_said: set[str] = set()  # the rules whose dropping of a request was said

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

        Raises:
            RuleError: strict, and a rule failed; its `sent_first` holds what the chunk made
                before the line it failed on, to be sent as one line at a time would have been.
        """
        out: list[Forward] = []
        try:
            self._feed(direction, chunk, now, out)
        except RuleError as exc:
            exc.sent_first = out
            raise
        return out

    def _feed(self, direction: Direction, chunk: bytes, now: float, out: list[Forward]) -> None:
        splitter = self._directions[direction].splitter
        if not self.bulk:
            self._pieces(direction, splitter.feed(chunk), now, out)
            return
        if not splitter.idle:  # finish the line in progress on its own, then look at the rest
            first = chunk.find(b"\n") + 1
            if first == 0:
                self._pieces(direction, splitter.feed(chunk), now, out)
                return
            self._pieces(direction, splitter.feed(chunk[:first]), now, out)
            chunk = chunk[first:]
        end = chunk.rfind(b"\n") + 1
        if end == 0 or end > self.max_line:  # no complete line, or lines that may be too long
            self._pieces(direction, splitter.feed(chunk), now, out)
            return
        body = chunk if end == len(chunk) else chunk[:end]
        if end < self.run_min:  # a message or two (interactive traffic): nothing to gain from runs
            one = body.find(b"\n") + 1 == end  # the usual case: one message, no copy
            self._pieces(direction, (body,) if one else complete_lines(body), now, out)
        else:
            self._relay_body(direction, body, now, out)
        if end < len(chunk):
            self._pieces(direction, splitter.feed(chunk[end:]), now, out)

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
        needles = self._needles + (ESCAPE,) if b"\\" in body else self._needles
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
        state = self._directions[direction]
        splitter = state.splitter
        torn = not splitter.idle
        out: list[Forward] = []
        try:
            self._pieces(direction, splitter.feed_eof(), now, out)
        except RuleError as exc:
            exc.sent_first = out
            raise
        if torn:
            written = [f.data for f in out if f.direction is direction and f.data]
            if written and not written[-1].endswith(b"\n"):  # the stream's last line, unterminated
                state.torn = True
            self._answers.release_held(direction, out)
        return out

    def needs_parse(self, line: bytes) -> bool:
        """Could this line concern the session or a rewrite? False means: forward as is."""
        for trigger in self._triggers:  # a loop: any() with a generator costs more per line
            if trigger in line:
                return True
        return has_escape(line)

    def _pieces(self, direction: Direction, pieces: Iterable[bytes | Opaque], now: float,
                out: list[Forward] | None = None) -> list[Forward]:
        if out is None:
            out = []
        for piece in pieces:
            if isinstance(piece, Opaque):
                if not (self.stray.divert and direction is TO_CLIENT and self.stray.piece(piece, out)):
                    self._unparsed.opaque(direction, piece, now, out)
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
            if self._answers.agent_gone is not None and frame.direction is TO_AGENT:
                self._answers.refuse(frame, frame.id, out)
                return
            request = self.session.on_request(frame, now)
        elif kind is RESPONSE:
            request = self.session.on_response(frame)
        elif kind is OTHER:
            if self.stray.divert and frame.direction is TO_CLIENT and self.stray.line(frame, out):
                return
            self._unparsed.other(frame, now, out)
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
        except RuleError as exc:
            if self.strict:
                self._not_forwarded(frame, request)
                raise
            self._rule_failed(exc, frame)
            self._fail_open(frame, [exc.rule], request, exc.detail, out)
            return
        if outcome is None:  # every rule passed
            out.append(Forward(frame.direction, frame.raw, frame.raw, VERDICT_PASS, frame, (), request))
            return
        self._verdict(frame, outcome, request, out)

    def _verdict(self, frame: Frame, outcome: ChainResult, request: Pending | None,
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
            ahead = [(emit.direction, encode(emit.msg, terminator, source=frame)) for emit in outcome.before]
        except Unencodable as exc:
            self._unencodable(frame, rules, request, str(exc), out)
            return
        if outcome.dropped and request is not None and frame.kind is Kind.REQUEST:
            self.session.forget(request)  # the bridge answers it, or the rule did
        for direction, message in ahead:  # what must reach its side before this message
            self._answers.emit(Forward(direction, message, b"", Verdict.EMIT, None, tuple(rules), before=True), out)
        if data and not data.endswith(b"\n"):
            self._directions[frame.direction].torn = True  # an unterminated last line, passed on as it came
        out.append(Forward(frame.direction, data, frame.raw, verdict, frame, tuple(rules), request))
        if outcome.dropped and request is not None:
            self._answer_dropped(frame, request, outcome, out)
        for direction, message in written:
            self._answers.emit(Forward(direction, message, b"", Verdict.EMIT, None, tuple(rules)), out)

    def _answer_dropped(self, frame: Frame, request: Pending, outcome: ChainResult, out: list[Forward]) -> None:
        """A rule dropped a request, or the answer to one: unless the rule answered it
        itself, its sender gets an error naming the rule where the line would have been
        (it would wait for ever otherwise). Said once per rule; dropped notifications are
        silent, and so is a dropped response that answers nothing the bridge knows of."""
        if answered_by((*outcome.before, *outcome.emits), request):
            return
        rule = outcome.rules[-1]  # a drop ends the chain: the last rule is the one that dropped
        fwd = dropped_answer(frame, request, rule, tuple(outcome.rules))
        fwd.request = request  # what it answers: the capture's method and latency, the request's span
        self._answers.emit(fwd, out)
        if rule not in self._drop_said:
            self._drop_said.add(rule)
            sender = "client" if request.origin is TO_AGENT else "agent"
            what = (f"the {sender}'s request {request.method} id {brief(request.id)}" if frame.kind is REQUEST
                    else f"the answer to the {sender}'s request {request.method} id {brief(request.id)}")
            log.warning("rule %r dropped %s; the bridge answered it with an error naming the rule, so that the "
                        "%s does not wait for ever (further ones by this rule are not reported)",
                        rule, printable(what, quote_backslash=False), sender)

    def _unencodable(self, frame: Frame, rules: list[str], request: Pending | None, why: str,
                     out: list[Forward]) -> None:
        """What the rules made of `frame` cannot be written: a rule failure like any other
        (the original goes on; strict: a `RuleError` is raised and nothing goes on)."""
        if self.strict:
            self._not_forwarded(frame, request)
            if frame.kind is Kind.RESPONSE:
                what = f"the answer to {request.method if request else '?'} id {brief(frame.id)}"
            else:
                what = f"{frame.method} id {brief(frame.id)}" if frame.kind is REQUEST else str(frame.method)
            raise RuleError(", ".join(rules) or "?", Unencodable(
                f"what the rules ({', '.join(rules)}) made of {what} cannot be written back: {why}"))
        self.unencodable += 1
        who = ", ".join(rules)
        if who not in self._unencodable_said:  # once per rule (a user's garbage is not hidden by another's)
            self._unencodable_said.add(who)
            what = f"what the rules ({who}) made of a message" if who else "a message the rules would change"
            log.warning("%s cannot be written back (%s); it was forwarded as it came, unchanged "
                        "(further ones are not reported)", what, why)
        self._fail_open(frame, rules, request, f"cannot re-encode: {why}", out)

    def _rule_failed(self, exc: RuleError, frame: Frame) -> None:
        """Said once per rule however often it fails (a rule that fails on every chunk
        must not flood the editor's log); each traceback at -vv."""
        count = self.failures[exc.rule] = self.failures.get(exc.rule, 0) + 1
        if count == 1:
            log.warning("%s, on %r; the line went on as it came (its further failures are not "
                        "reported; -vv shows each, with its traceback)", exc, frame)
        log.debug("rule %r failed on %r", exc.rule, frame, exc_info=exc.error)

    def _not_forwarded(self, frame: Frame, request: Pending | None) -> None:
        """Strict, and a rule failed on `frame`: the relay raises, and `frame` is not
        forwarded (what the chunk made before it is: `RuleError.sent_first`). A response
        answered nobody: its request is in flight again (the bridge answers it as it stops)."""
        if frame.kind is RESPONSE and request is not None:
            self.session.track(request)

    def _fail_open(self, frame: Frame, rules: list[str], request: Pending | None, error: str,
                   out: list[Forward]) -> None:
        out.append(Forward(frame.direction, frame.raw, frame.raw, Verdict.ERROR, frame,
                           tuple(rules), request, error=error))

    # -- faults ---------------------------------------------------------------------------------

    def fail_pending(self, message: str, data: Any = None, *, unsent: Sequence[Forward] = (),
                     cut: bool | None = None) -> list[Forward]:
        """The agent is gone, or the bridge stops: answer every client request in flight,
        and every later one as it comes (`Answers.fail_pending`)."""
        return self._answers.fail_pending(message, data, unsent=unsent, cut=cut)

    def _ahead_of_own_answer(self, request: Pending, fwd: Forward) -> list[Forward]:
        """The bridge answers a client request itself (the agent is gone, the bridge stops):
        what the rules send toward the client ahead of such an answer, as they would ahead
        of the agent's (its answer to a prompt ends the turn: the tool calls left open are
        closed first). Their response hooks see the answer; it goes on as the bridge wrote
        it whatever they make of it, and a rule that fails on it is said, not fatal (the
        bridge is stopping, and the client must get its answer)."""
        frame = classify(TO_CLIENT, fwd.data)
        try:
            outcome = self.chain.run(frame, request, self.session)
        except RuleError as exc:
            self._rule_failed(exc, frame)
            return []
        if outcome is None:
            return []
        ahead: list[Forward] = []
        for emit in outcome.before:
            if emit.direction is TO_CLIENT:
                try:
                    data = encode(emit.msg, source=frame)
                except Unencodable:
                    continue
                ahead.append(Forward(TO_CLIENT, data, b"", Verdict.EMIT, None, tuple(outcome.rules), before=True))
        return ahead

    def statistics(self) -> RelayStatistics:
        from acp_bridge.core.statistics import RelayStatistics  # only when asked: start-up

        stats = self.session.statistics()
        return RelayStatistics(
            pending_to_agent=stats.pending_to_agent,
            pending_to_client=stats.pending_to_client,
            unpaired_responses=stats.unpaired_responses,
        )
