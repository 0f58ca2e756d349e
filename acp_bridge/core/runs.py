"""Bulk scanning: the runs of complete lines that travel untouched, found chunk-wide.

Owns: the chunk-wide path of `Relay.feed` (the needle search for what makes a line need a
look, the run-min threshold below which the per-line path is the faster one) and the runs it
forwards whole, with no per-line work. Must never: let through a line a rule could concern;
each line it finds is handed to the per-line path (`pieces`), which checks it again
(`Relay.needs_parse`). `tests/core/test_relay.py` proves the runs equal, line for line, to
the per-line path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from acp_bridge.core.chain import RuleError
from acp_bridge.core.forward import VERDICT_PASS, Forward, complete_lines
from acp_bridge.core.lines import LineSplitter, Opaque
from acp_bridge.core.messages import Direction
from acp_bridge.core.scan import Finder
from acp_bridge.core.unparsed import ESCAPE

# Bytes that every request and response contains (the `"id"` member): a line without them
# (and without an escape, which could spell any key: `has_escape`) can only be a
# notification or not JSON-RPC at all, so it is parsed only if a rule's trigger bytes
# appear in it.
ALWAYS_PARSE = (b'"id"',)
RUN_MIN = 2048  # below this many bytes of complete lines, the per-line path is the faster one
_LINE_NOT_AN_OBJECT = re.compile(rb"\n[^{]")  # faster than counting "\n{" against "\n"


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


# The per-line path: each piece of `direction`, at `now`, into `out`.
Pieces = Callable[[Direction, Iterable[bytes | Opaque], float, list[Forward]], object]


class Runs:
    """The bulk path of one relay: which lines of a chunk need a look, and the runs between."""

    def __init__(self, triggers: Iterable[bytes], pieces: Pieces, *, max_line: int, run_min: int = RUN_MIN,
                 native_scan: bool = True) -> None:
        self.needles = tuple(dict.fromkeys(scan_needle(t) for t in triggers))
        self._pieces = pieces
        self.max_line = max_line
        self.run_min = run_min
        self.native_scan = native_scan  # False: the chunk scans use bytes.find only (tests)

    def feed(self, direction: Direction, splitter: LineSplitter, chunk: bytes, now: float,
             out: list[Forward]) -> None:
        """Relay `chunk` through `splitter`: a line in progress is finished on its own, the
        complete lines go as runs where there are enough of them, and the rest is split.

        Raises:
            RuleError: strict, and a rule failed; its `rest` gets the complete lines of
                `chunk` after the failing one, in order (the splitter keeps a torn last one).
        """
        if not splitter.idle:  # finish the line in progress on its own, then look at the rest
            first = chunk.find(b"\n") + 1
            if first == 0:
                self._pieces(direction, splitter.feed(chunk), now, out)
                return
            try:
                self._pieces(direction, splitter.feed(chunk[:first]), now, out)
            except RuleError as exc:
                exc.rest.extend(splitter.feed(chunk[first:]))
                raise
            chunk = chunk[first:]
        end = chunk.rfind(b"\n") + 1
        if end == 0 or end > self.max_line:  # no complete line, or lines that may be too long
            self._pieces(direction, splitter.feed(chunk), now, out)
            return
        body = chunk if end == len(chunk) else chunk[:end]
        try:
            if end < self.run_min:  # a message or two (interactive traffic): nothing to gain from runs
                one = body.find(b"\n") + 1 == end  # the usual case: one message, no copy
                self._pieces(direction, (body,) if one else complete_lines(body), now, out)
            else:
                self._relay_body(direction, body, now, out)
        except RuleError as exc:
            if end < len(chunk):
                exc.rest.extend(splitter.feed(chunk[end:]))
            raise
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
        needles = self.needles + (ESCAPE,) if b"\\" in body else self.needles
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
            try:
                self._pieces(direction, (body[start:stop],), now, out)
            except RuleError as exc:
                exc.rest.extend(complete_lines(body[stop:]))
                raise
            pos = stop

    @staticmethod
    def _pass_untouched(direction: Direction, run: bytes, out: list[Forward]) -> None:
        # Not even its lines are counted: that would be one more pass over every byte.
        out.append(Forward(direction, run, run, VERDICT_PASS, untouched_lines=True))
