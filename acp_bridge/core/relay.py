"""Relay: bytes in from one side, `Forward`s out, with the rewrite chain in between.

Owns: splitting each direction into lines (its `DirectionState`), deciding which lines to
parse, and handing each piece to its path: runs of untouched lines to the bulk scan
(core/runs.py), parsed lines to the rules' verdicts (core/verdicts.py), lines the rules
cannot read to `Unparsed`. Must never: do IO, await, read a clock (the shell passes `now`),
or re-encode a line that no rewrite changed: an untouched line leaves as the very bytes that
came in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from acp_bridge.core.answers import BRIDGE, Answers
from acp_bridge.core.chain import Chain, RuleError
from acp_bridge.core.direction_state import direction_states
from acp_bridge.core.forward import VERDICT_PASS
from acp_bridge.core.forward import Forward as Forward
from acp_bridge.core.forward import Verdict as Verdict
from acp_bridge.core.lines import MIB, Opaque
from acp_bridge.core.messages import RESPONSE, TO_AGENT, TO_CLIENT, Direction, classify
from acp_bridge.core.proxy_long_lines import HEAD
from acp_bridge.core.rewrites.base import Rule
from acp_bridge.core.rewrites.stray_output import StrayOutput
from acp_bridge.core.runs import ALWAYS_PARSE, RUN_MIN, Runs
from acp_bridge.core.runs import scan_needle as scan_needle
from acp_bridge.core.session import Connection
from acp_bridge.core.uncarried import Uncarried
from acp_bridge.core.unparsed import Unparsed, has_escape
from acp_bridge.core.verdicts import Verdicts

if TYPE_CHECKING:
    from acp_bridge.core.statistics import RelayStatistics

__all__ = ["RUN_MIN", "Forward", "Relay", "Verdict", "scan_needle"]


class Relay:
    """The sans-IO proxy: feed it what arrived, send what it returns."""

    def __init__(
        self,
        rewrites: Sequence[Rule] = (),
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
        self.session = Connection()
        self._directions = direction_states(max_line)  # one record per direction, shared with the two below
        self._triggers = ALWAYS_PARSE + tuple(sorted(self.chain.triggers))
        self._answers = Answers(self.session, self._directions)  # what the bridge writes itself, and where
        self._unparsed = Unparsed(self.session, self._answers, self._directions)
        self._verdicts = Verdicts(self.chain, self.session, self._answers, self._unparsed, self._directions,
                                  self.stray, strict=strict)
        self._line = self._verdicts.line  # a parsed line's way (bound once: it is taken per line)
        if self.chain.wants(RESPONSE):
            self._answers.ahead_of_answer = self._verdicts.ahead_of_own_answer
        self._runs = Runs(self._triggers, self._pieces, max_line=max_line, run_min=run_min, native_scan=native_scan)
        self.failures = self._verdicts.failures  # per rule: how often it failed (each said once)

    def as_chain_link(self, head: int = HEAD) -> None:
        """Relay as a link of a proxy chain, where each message toward the agent goes in an
        envelope of its own: a client's batch, or request whose method is no string, cannot,
        and the bridge answers it at once (core/uncarried.py); so is a request over the parse
        limit the link cannot wrap as it streams. `head`: the link's (`ProxyLink.head`)."""
        self._unparsed.uncarried = Uncarried(self.session, self._answers, head)

    @property
    def unencodable(self) -> int:
        """Lines a rule changed that could not be written back."""
        return self._verdicts.unencodable

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
        if self.bulk:
            self._runs.feed(direction, splitter, chunk, now, out)
        else:
            self._pieces(direction, splitter.feed(chunk), now, out)

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
        left = iter(pieces)
        try:
            for piece in left:
                if isinstance(piece, Opaque):
                    if not (self.stray.divert and direction is TO_CLIENT and self.stray.piece(piece, out)):
                        self._unparsed.opaque(direction, piece, now, out)
                elif self.needs_parse(piece) or not piece.startswith(b"{"):
                    # Anything that does not even start like an object is parsed too, so that
                    # banners and other stray output are seen as what they are (and warned about).
                    self._line(classify(direction, piece), now, out)
                else:
                    out.append(Forward(direction, piece, piece, VERDICT_PASS))
        except RuleError as exc:  # strict: the pieces after the failing one are its rest
            exc.rest.extend(left)
            raise
        return out

    # -- faults ---------------------------------------------------------------------------------

    def fail_pending(self, message: str, data: Any = None, *, unsent: Sequence[Forward] = (),
                     cut: bool | None = None) -> list[Forward]:
        """The agent is gone, or the bridge stops: answer every client request in flight,
        and every later one as it comes (`Answers.fail_pending`)."""
        return self._answers.fail_pending(message, data, unsent=unsent, cut=cut)

    def refuse_rest(self, rest: Iterable[bytes | Opaque], now: float = 0.0) -> list[Forward]:
        """The bridge stopped (after `fail_pending`) on a client line a rule failed on: the
        lines the same read held after it (`RuleError.rest`) are not sent; each client
        request among them is answered as every later one is. Returns those answers (with the
        records of the requests they stand for), nothing else: a rule that fails again on
        one of the lines (a request is answered before any rule sees it) stops nothing more."""
        out: list[Forward] = []
        pieces: list[bytes | Opaque] = list(rest)
        while pieces:  # each turn leaves fewer: the failing line stays behind
            try:
                self._pieces(TO_AGENT, pieces, now, out)
                break
            except RuleError as exc:
                pieces = exc.rest
        return [fwd for fwd in out if fwd.rules == (BRIDGE,)]

    def refuse_unread(self, chunk: bytes, now: float = 0.0) -> list[Forward]:
        """As `refuse_rest`, for what the client had written and the bridge reads only as it
        stops: `chunk` goes on from where the read that made it stop left off (b"": the
        client's end, a torn last line as it is)."""
        splitter = self._directions[TO_AGENT].splitter
        return self.refuse_rest(splitter.feed(chunk) if chunk else splitter.feed_eof(), now)

    def statistics(self) -> RelayStatistics:
        from acp_bridge.core.statistics import RelayStatistics  # only when asked: start-up

        stats = self.session.statistics()
        return RelayStatistics(
            pending_to_agent=stats.pending_to_agent,
            pending_to_client=stats.pending_to_client,
            unpaired_responses=stats.unpaired_responses,
        )
