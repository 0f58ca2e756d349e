"""The live watchdog: the findings engine fed from the forwarding path, as an `Observer`.

Owns: turning each read's `Forward`s into engine events using only what the relay already
parsed (requests and responses, with the relay's pairing; notifications a rule looked at;
what the bridge wrote itself), plus the agent's unparsed lines that came alone and one line
of each read that came in runs (a sample, for session ids and update shapes) and, toward
the agent, the lines that name `session/cancel`; the one timer task; and telling each
finding, once per code and session: in the log, and to the observers (the capture file
writes its record, telemetry makes it a span event). Requests in flight, their pairing and
the `initialize` facts are the relay's `Connection`'s, read and never changed here.

Must never: change, delay or reorder traffic, parse every line of a big read (of its runs
of untouched lines, only the first line is looked at), or take the bridge down: a failure
of its own turns it off for the rest of the connection (said once). Its timer task sleeps
until the earliest deadline, and forever when nothing is pending.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from acp_bridge.config import Config
from acp_bridge.core.forward import (
    VERDICT_EMIT,
    VERDICT_ERROR,
    VERDICT_OPAQUE,
    VERDICT_REWRITE,
    Forward,
    complete_lines,
)
from acp_bridge.core.literals import integer_id
from acp_bridge.core.messages import (
    NOTIFICATION,
    REQUEST,
    RESPONSE,
    TO_AGENT,
    TO_CLIENT,
    Direction,
    Frame,
    brief,
    classify,
    id_key,
)
from acp_bridge.core.methods import SESSION_CANCEL
from acp_bridge.core.rewrites.system_prompt_options import NAME as SYSTEM_PROMPT
from acp_bridge.core.session import Connection, Pending
from acp_bridge.core.shapes import session_named
from acp_bridge.errors import CaptureError
from acp_bridge.health.engine import SPECIAL, Engine, answers_unreadable
from acp_bridge.health.findings import CODES, Finding, Level
from acp_bridge.health.work import RULE_FAILED, failed_rule

if TYPE_CHECKING:
    from collections.abc import Callable

    from acp_bridge.core.session import Connection

log = logging.getLogger("acp_bridge.health")

INF = math.inf
CANCEL = SESSION_CANCEL.encode()  # what an unparsed line toward the agent is searched for
BATCHED_KEPT = 1024  # batched requests of SPECIAL methods awaiting a batched answer
REPORTED_PER_CODE = 10  # findings of one code logged and passed to the observers; the rest are counted
_LOG_LEVEL = {Level.INFO: logging.INFO, Level.WARNING: logging.WARNING, Level.ERROR: logging.ERROR}


class Watchdog:
    """Findings while the bridge runs (docs/health.md): in the log and to the observers.

    Args:
        config: the `[health]` thresholds.
        session: the relay's, whose requests in flight and `initialize` facts it reads.
        tell: called with each finding reported (and the totals at the end), with the wall
            time it came at: the observers' `finding` hook. It may raise CaptureError
            (a required capture that cannot be written), which ends the session.
        last_seq: the `seq` of the last message record the capture wrote, None without
            one (or once it stopped): what a finding's `about` counts from.
    """

    def __init__(self, config: Config, session: Connection, *, tell: Callable[[float, Finding], None] | None = None,
                 last_seq: Callable[[], int | None] | None = None) -> None:
        self.engine = Engine(config.health, session, notify=1)
        self.engine.listeners.append(self._report)
        self.tell = tell
        self.last_seq = last_seq
        self.off = False
        self._wake = INF  # the monotonic time the timer task sleeps until
        self._scope: trio.CancelScope | None = None
        # The seq before the next read's records: the capture has written a read's records
        # by the time the watchdog sees it, so it is read after each read.
        self._base: int | None = last_seq() if last_seq is not None else None
        self._cursor = (0, 0)  # (forwards counted, seq after them) within the current read
        self._reported_by_code: dict[str, int] = {}  # findings logged and recorded, per code
        self._reported_keys: set[tuple[str, object]] = set()  # (code, session key) of those
        # Requests of a v2 batch whose answer teaches something (SPECIAL), by (origin, id key):
        # the relay pairs a batch's answers without telling which request each answered.
        self._batched: dict[tuple[Direction, object], Pending] = {}

    def __repr__(self) -> str:
        return f"<Watchdog {self.engine!r} wake={self._wake} off={self.off}>"

    # -- the forwarding path ------------------------------------------------------------------

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        if self.off or not forwards:
            return
        try:
            self._record(mono, forwards)
            soonest = self.engine.soonest
            if soonest < self._wake:
                self._reschedule(soonest)
        except CaptureError:
            raise  # a finding record could not be written and `capture.required` is set
        except Exception:
            self.off = True
            log.error("health: the watchdog failed and is off for the rest of this connection "
                      "(traffic is not affected; -vv shows why)")
            log.debug("health: the watchdog's failure", exc_info=True)
        if self.last_seq is not None:
            self._base = self.last_seq()

    def _record(self, mono: float, forwards: Sequence[Forward]) -> None:
        """One read's forwards: what each message teaches the engine, in order."""
        engine = self.engine
        source = self._read_starts(mono, forwards[0])
        sampled = source is TO_AGENT
        seq: int | None = None
        base = self._base
        saw_request = False
        reported = engine.unknown_reported()
        unknown = 0  # responses for ids nobody asked, counted at once once `reported`
        plain_answers = not engine.cancels_waiting  # then only SPECIAL methods' answers teach anything
        recent = engine.recent
        for index, fwd in enumerate(forwards):
            frame = fwd.frame
            if frame is None:
                if fwd.verdict is not VERDICT_EMIT:  # the bridge's own answers: the relay's session knows
                    self._unparsed(fwd, source, sampled, mono, forwards, index)
                    sampled = sampled or fwd.untouched_lines
                continue
            kind = frame.kind
            if kind is REQUEST:
                pending = fwd.request
                if pending is None:
                    continue  # refused by the bridge: the agent is gone
                saw_request = True
                if base is not None or pending.method in SPECIAL:
                    if base is not None:
                        seq = self._seq_before(forwards, index) + 1
                    engine.request(pending, seq, frame.msg)
            elif kind is RESPONSE:
                msg = frame.msg
                assert msg is not None
                pending = fwd.request  # paired by the relay's session
                if base is not None:
                    seq = self._seq_before(forwards, index) + 1
                if self._batched:
                    self._batched.pop((fwd.direction.reverse, id_key(msg.get("id"))), None)
                if pending is not None:
                    if plain_answers and pending.method not in SPECIAL:
                        recent.append(pending)  # what engine.answered does with such an answer
                        engine.recent_keys = None
                    else:
                        engine.answered(pending, msg, mono, seq)
                elif answers_unreadable(msg):
                    pass
                elif reported and not (recent and (fwd.direction.reverse, id_key(msg.get("id"))) in
                                   engine.answered_keys()):
                    unknown += 1  # neither a duplicate nor the first unknown id: only counted
                else:
                    engine.unpaired(fwd.direction, msg.get("id"), mono, seq,
                                    written=integer_id(frame.raw, msg.get("id")))
                if "error" in msg and "result" in msg:
                    engine.result_and_error(fwd.direction, integer_id(frame.raw, msg.get("id")), mono, seq)
            else:
                if base is not None:
                    seq = self._seq_before(forwards, index) + 1
                if kind is NOTIFICATION:
                    engine.notification(fwd.direction, frame.msg, mono, seq)  # type: ignore[arg-type]
                elif frame.batch is not None:
                    self._batch(frame.direction, frame.batch, mono, seq)
            if fwd.verdict is VERDICT_ERROR or fwd.verdict is VERDICT_REWRITE:
                self._rules_outcome(fwd, frame, mono, forwards, index)
        self._read_ends(mono, unknown, saw_request)

    def _batch(self, direction: Direction, batch: list[object], mono: float, seq: int | None) -> None:
        """A v2 batch (one line, a JSON array): its elements judged as `check` judges them,
        its notifications too (the relay paired its requests and responses already)."""
        engine = self.engine
        for element in batch:
            if not isinstance(element, dict):
                continue
            method = element.get("method")
            if "id" not in element:
                if isinstance(method, str):
                    engine.notification(direction, element, mono, seq)
                continue
            key = (direction, id_key(element["id"]))
            if isinstance(method, str):
                if method in SPECIAL:
                    params = element.get("params")
                    pending = Pending(direction, element["id"], method,
                                      params.get("sessionId") if isinstance(params, dict) else None, b"", mono)
                    engine.request(pending, seq, element)
                    if len(self._batched) < BATCHED_KEPT:
                        self._batched[key] = pending
            elif "result" in element or "error" in element:
                answered = self._batched.pop((direction.reverse, key[1]), None)
                if answered is not None:
                    engine.answered(answered, element, mono, seq)

    def _read_starts(self, mono: float, first: Forward) -> Direction:
        """Where the read came from (the source of its first forward); the time of the last
        output toward the client, and the read's seq cursor, brought up to it."""
        source = first.frame.direction if first.frame is not None else first.direction
        if source is TO_CLIENT and first.verdict is not VERDICT_EMIT:
            self.engine.last_out = mono
        if self._base is not None:
            self._cursor = (0, self._base)
        return source

    def _rules_outcome(self, fwd: Forward, frame: Frame, mono: float, forwards: Sequence[Forward],
                       index: int) -> None:
        """A rule failed on `fwd`'s message (it went on as it came), or the system prompt
        rule rewrote it: said to the engine."""
        seq = None if self._base is None else self._seq_before(forwards, index) + 1
        if fwd.verdict is VERDICT_ERROR:
            self._rule_failed(fwd, mono, seq)
        if fwd.rules and fwd.verdict is VERDICT_REWRITE and SYSTEM_PROMPT in fwd.rules:
            out = classify(frame.direction, fwd.data).msg
            self.engine.system_prompt_sent(frame.method, frame.msg, out, mono, seq)

    def _read_ends(self, mono: float, unknown: int, saw_request: bool) -> None:
        """The read's unknown ids, counted at once; after a request, a session reused, and
        the soonest a new request may be due."""
        engine = self.engine
        if unknown:
            engine.count_unknown(unknown)
        if saw_request:
            if engine.session.reused():
                engine.reused(mono)
            due = mono + engine.min_threshold  # nothing new is due sooner; the timer's scan tells exactly
            if due < self._wake:
                engine.soonest = min(engine.soonest, due)

    def _rule_failed(self, fwd: Forward, mono: float, seq: int | None) -> None:
        """A rule failed on `fwd`'s message (rare: nothing here is on the hot path)."""
        frame, request = fwd.frame, fwd.request
        assert frame is not None
        msg = frame.msg if isinstance(frame.msg, dict) else {}
        if frame.kind is RESPONSE:
            method = request.method if request is not None else None
        else:
            method = frame.method
        id_ = msg.get("id") if frame.kind is not NOTIFICATION else None
        if type(id_) is float:  # maybe an integer past 64 bits: as written
            id_ = integer_id(frame.raw, id_)
        # The session as the message's capture record names it.
        session = session_named(msg, response=frame.kind is RESPONSE,
                                request_session=None if request is None else request.session_id)
        self.engine.rule_failed(", ".join(fwd.rules) or None, fwd.error, session, mono, seq,
                                direction=fwd.direction, method=method, id_=id_)

    def _unparsed(self, fwd: Forward, source: Direction, sampled: bool, mono: float,
                  forwards: Sequence[Forward], index: int) -> None:
        """A forward the relay did not parse: look at what a rule needs, cheaply."""
        verdict = fwd.verdict
        if verdict is VERDICT_OPAQUE:
            pass
        elif source is TO_AGENT:
            if CANCEL in fwd.raw:
                self._lines(fwd, CANCEL, mono, forwards, index)
        elif self.engine.watching_cancel and b'"state_update"' in fwd.raw:
            self._lines(fwd, b'"state_update"', mono, forwards, index)
        elif not fwd.untouched_lines or not sampled:  # a line that came alone (a small read): parsed
            self._lines(fwd, None, mono, forwards, index)

    def _lines(self, fwd: Forward, needle: bytes | None, mono: float, forwards: Sequence[Forward],
               index: int) -> None:
        """Parse the lines of an unparsed forward that hold `needle` (None: only the first)."""
        if fwd.untouched_lines:
            if needle is None:
                lines = [fwd.raw[:fwd.raw.find(b"\n") + 1]]
            else:
                lines = complete_lines(fwd.raw)
        else:
            lines = [fwd.raw]
        before = None if self._base is None else self._seq_before(forwards, index)
        for number, line in enumerate(lines, 1):
            if needle is not None and needle not in line:
                continue
            frame = classify(fwd.direction, line)
            if frame.kind is NOTIFICATION and frame.msg is not None:
                later = frozenset(id(f.request) for f in forwards[index + 1:] if f.request is not None) \
                    if frame.method == SESSION_CANCEL else frozenset()
                self.engine.notification(fwd.direction, frame.msg, mono, None if before is None else before + number,
                                         later)

    def _seq_before(self, forwards: Sequence[Forward], index: int) -> int:
        """The capture's seq before `forwards[index]`'s records (counted once per read)."""
        counted, seq = self._cursor
        while counted < index:
            seq += forwards[counted].lines_ended
            counted += 1
        self._cursor = (counted, seq)
        return seq

    # -- findings ------------------------------------------------------------------------------

    def finding(self, wall: float, finding: Finding) -> None:
        """The observers' hook for findings: they come from here, so there is nothing to note."""

    def _report(self, finding: Finding) -> None:
        """Log a finding and tell the observers: the first REPORTED_PER_CODE of each code (across
        sessions; a peer naming a new session in every line must not flood stderr, the
        capture or the spans from the forwarding path); the rest are counted (totals at close)."""
        reported = self._reported_by_code.get(finding.code, 0) + 1
        self._reported_by_code[finding.code] = reported
        if reported > REPORTED_PER_CODE:
            return
        self._reported_keys.add(self.engine.told)
        session = finding.session
        if session is not None and not isinstance(session, (str, int)):
            session = brief(session)  # a peer's object: bounded in depth and length
        where = f" (session {session})" if session is not None else ""
        log.log(_LOG_LEVEL[finding.level], "health: %s: %s%s", finding.code, finding.text, where)
        if self.tell is not None:
            self.tell(time.time() - time.monotonic() + finding.at, finding)

    # -- timers --------------------------------------------------------------------------------

    def _reschedule(self, due: float) -> None:
        self._wake = due
        if self._scope is not None:
            self._scope.deadline = trio.current_time() + (due - time.monotonic())

    async def run(self) -> None:
        while True:
            with trio.CancelScope() as scope:
                self._scope = scope
                if self._wake < INF:
                    scope.deadline = trio.current_time() + (self._wake - time.monotonic())
                await trio.sleep_forever()
            self._scope = None
            if self.off:
                self._wake = INF
                continue
            try:
                started = time.perf_counter()
                now = time.monotonic()
                nearest = self.engine.advance(now)
                # A scan reads every request in flight: with very many, space the scans out so
                # that they take at most 2% of the time (findings come that much later).
                self._wake = self.engine.soonest = max(nearest, now + 50 * (time.perf_counter() - started))
            except CaptureError:
                raise
            except Exception:
                self.off = True
                self._wake = INF
                log.error("health: the watchdog failed and is off for the rest of this connection "
                          "(traffic is not affected; -vv shows why)")
                log.debug("health: the watchdog's failure", exc_info=True)

    def close(self, wall: float, mono: float) -> None:
        """Report what was overdue at the end, and how often each finding came in all."""
        if self.off:
            return
        self.engine.finish(mono)
        per_code: dict[str, int] = {}
        for (code, _), count in self.engine.counts.items():
            per_code[code] = per_code.get(code, 0) + count
        for code, count in per_code.items():
            if count > 1:
                log.info("health: %s came %d times", code, count)
        if self.tell is None:
            return
        for (code, session), count in self.engine.counts.items():
            if count > 1 and (code, session) in self._reported_keys:
                if code == RULE_FAILED:  # counted by rule (`rule_key`), not by session
                    rule = session[1] if isinstance(session, tuple) else None
                    self.tell(wall, Finding(code, CODES[code].level, None, f"{failed_rule(rule)} {count} times in all",
                                            mono, count=count, total=True))
                    continue
                self.tell(wall, Finding(code, CODES[code].level, _session_text(session),
                                        f"{count} occurrences in all", mono, count=count, total=True))


def _session_text(key: object) -> object:
    """A session key (type, value) back to the value it stands for."""
    if isinstance(key, tuple) and len(key) == 2:
        return key[1] if isinstance(key[1], (str, int, float)) else None
    return key
