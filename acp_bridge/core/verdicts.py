"""Per-line verdicts: what becomes of one parsed line, once the rules have seen it.

Owns: pairing a parsed line through `Connection`, running the rule chain on it, and turning the
outcome into `Forward`s: the very line, its re-encoding or nothing, and the messages the rules
emit; failing open when a rule fails or its change cannot be written back (strict: raising),
keeping a request in flight as the rules sent it on (under the id it went on with), and
answering a request a rule dropped or sent on as a notification. Must never: re-encode a
line no rule changed, or leave a dropped request's sender waiting.
"""

from __future__ import annotations

import logging

from acp_bridge.core.answers import Answers, answered_by, answers_sender, dropped_answer, sends_on
from acp_bridge.core.chain import Chain, ChainResult, RuleError
from acp_bridge.core.direction_state import DirectionState
from acp_bridge.core.forward import VERDICT_PASS, Forward, Verdict
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
    id_key,
    is_request,
)
from acp_bridge.core.printable import printable
from acp_bridge.core.rewrites.stray_output import StrayOutput
from acp_bridge.core.session import Connection, Pending
from acp_bridge.core.unparsed import Unparsed

log = logging.getLogger("acp_bridge.relay")

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


class Verdicts:
    """One relay's per-line path after the parse: the rules' outcome for each line, as bytes."""

    def __init__(self, chain: Chain, session: Connection, answers: Answers, unparsed: Unparsed,
                 directions: dict[Direction, DirectionState], stray: StrayOutput, *, strict: bool) -> None:
        self.chain = chain
        self.session = session
        self.answers = answers
        self.unparsed = unparsed
        self.directions = directions
        self.stray = stray
        self.strict = strict
        self.wanted = frozenset(kind for kind in Kind if chain.wants(kind))
        self.unencodable = 0  # lines a rule changed that could not be written back
        self._unencodable_said: set[str] = set()  # the rules whose unwritable change was said
        self.failures: dict[str, int] = {}  # per rule: how often it failed (each said once)
        self._drop_said: set[str] = set()  # the rules whose dropping of a request was said

    def line(self, frame: Frame, now: float, out: list[Forward]) -> None:
        """A parsed line: paired, refused if the agent is gone, shown to the rules that want
        its kind, and forwarded as their outcome says."""
        kind = frame.kind
        request: Pending | None = None
        if kind is REQUEST:
            if self.answers.agent_gone is not None and frame.direction is TO_AGENT:
                self.answers.refuse(frame, frame.id, out)
                return
            request = self.session.on_request(frame, now)
        elif kind is RESPONSE:
            request = self.session.on_response(frame)
        elif kind is OTHER:
            if self.stray.divert and frame.direction is TO_CLIENT and self.stray.line(frame, out):
                return
            self.unparsed.other(frame, now, out)
            return

        if (kind is RESPONSE and request is None) or kind not in self.wanted:
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
            self.rule_failed(exc, frame)
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
        unanswered, notified = outcome.dropped, False  # nobody else will answer `request`
        if request is not None and frame.kind is REQUEST:
            unanswered, notified = self._in_flight(frame, current, outcome, request)
        for direction, message in ahead:  # what must reach its side before this message
            self.answers.emit(Forward(direction, message, b"", Verdict.EMIT, None, tuple(rules), before=True), out)
        if data and not data.endswith(b"\n"):
            self.directions[frame.direction].torn = True  # an unterminated last line, passed on as it came
        out.append(Forward(frame.direction, data, frame.raw, verdict, frame, tuple(rules), request))
        if unanswered and request is not None:
            self._answer_dropped(frame, request, outcome, out, notified=notified)
        for direction, message in written:
            self.answers.emit(Forward(direction, message, b"", Verdict.EMIT, None, tuple(rules)), out)

    def _in_flight(self, frame: Frame, current: Frame, outcome: ChainResult, request: Pending) -> tuple[bool, bool]:
        """What the rules made of the request `frame` is what is in flight (docs/rules.md):
        the request as it goes on, under the id it goes on with (its sender's id is kept
        for the bridge's own answers), or the request a rule emits with its id toward where
        it was going. A request dropped, or sent on as a notification, is in flight no more.
        Returns: is it left unanswered (the bridge answers it, unless the rule did), and was
        it sent on as a notification."""
        emits = (*outcome.before, *outcome.emits)
        msg = None if outcome.dropped else current.msg
        if is_request(msg):
            assert msg is not None
            if current is not frame and id_key(msg["id"]) != id_key(request.id):
                if answers_sender(emits, request):  # its sender has its answer: what goes on is the rule's
                    self.session.forget(request)
                else:
                    self.session.sent_as(request, msg["id"])
            return False, False
        if sends_on(emits, request):
            return False, False  # in flight as it was
        self.session.forget(request)  # the bridge answers it, or the rule did
        return True, not outcome.dropped

    def _answer_dropped(self, frame: Frame, request: Pending, outcome: ChainResult, out: list[Forward], *,
                        notified: bool = False) -> None:
        """A rule dropped a request, or the answer to one, or sent a request on as a
        notification: unless the rule answered it itself, its sender gets an error naming
        the rule where the line would have been (it would wait for ever otherwise). Said
        once per rule; dropped notifications are silent, and so is a dropped response that
        answers nothing the bridge knows of."""
        if answered_by((*outcome.before, *outcome.emits), request):
            return
        # A drop ends the chain: the last rule is the one that dropped.
        rule = outcome.id_by if notified and outcome.id_by is not None else outcome.rules[-1]
        fwd = dropped_answer(frame, request, rule, tuple(outcome.rules), notified=notified)
        fwd.request = request  # what it answers: the capture's method and latency, the request's span
        self.answers.emit(fwd, out)
        if rule not in self._drop_said:
            self._drop_said.add(rule)
            sender = "client" if request.origin is TO_AGENT else "agent"
            what = (f"the {sender}'s request {request.method} id {brief(request.id)}" if frame.kind is REQUEST
                    else f"the answer to the {sender}'s request {request.method} id {brief(request.id)}")
            done = "sent %s on as a notification" if notified else "dropped %s"
            log.warning("rule %r " + done + "; the bridge answered it with an error naming the rule, so that the "
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

    def rule_failed(self, exc: RuleError, frame: Frame) -> None:
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

    def ahead_of_own_answer(self, request: Pending, fwd: Forward) -> list[Forward]:
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
            self.rule_failed(exc, frame)
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
