"""Two captures compared: `acp-bridge diff`, the MCP tool `diff_captures`, and `drive`'s report.

Owns: `compare_captures(a, b, options)`, which aligns two captures' messages by session (in
the order they were created), turn, then message by message (a longest common subsequence
over direction, kind, method and update kind), and says what is missing from B, what is
extra in B, and for each aligned pair the JSON pointers whose values differ; the bound on
that alignment (`align`); and the result, `CaptureDiff`, as data (`as_json`) and as the
lines the CLI prints (`lines`). `compare_tracks` does the same over tracks already cut
(`replay/turns.py`), with an optional projection of each turn (`drive --compare structure`
compares facts made of the messages, not the messages).
Must never: do IO, import trio or click, or take memory quadratic in a turn's length, or time
quadratic in a capture's: past `max_cells` a turn is aligned position by position, and so is
every turn once the tables of the turns before have reached `max_total_cells` (a capture of a
hundred turns of a thousand messages would otherwise take a minute); the result says so.

Not to be confused with `replay/diff.py`, the pointer diff of two messages this builds on.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.core.printable import printable
from acp_bridge.core.protocol import Json
from acp_bridge.replay.diff import compact_diff, showable
from acp_bridge.replay.turns import Recorded, Track, tracks

MISSING, EXTRA, CHANGED = "missing", "extra", "changed"

# Values that differ from one run to the next of the same session: compared only with
# `strict_ids`. (Session id values are recognised wherever they are: see `_same_session`.)
ID_POINTERS = ("/id", "/params/requestId", "/params/update/toolCallId", "/params/toolCall/toolCallId",
               "/params/update/messageId", "/result/messageId", "/result/terminalId", "/params/terminalId")
TIME_POINTERS = ("/params/update/updatedAt",)
MAX_CELLS = 1_000_000  # the largest alignment table (cells) of one turn's messages
MAX_TOTAL_CELLS = 10_000_000  # the alignment tables of a whole comparison together (a few seconds)
SHOWN_POINTERS = 3  # pointers spelled out per changed message in the text lines
SHOWN_VALUE = 60  # characters of a value shown in the text lines


@dataclass(frozen=True)
class DiffOptions:
    """What to compare: `ignore` adds JSON pointers (into the message) whose values, and what
    is under them, are not compared; `strict_ids` compares ids and session ids too."""

    ignore: tuple[str, ...] = ()
    strict_ids: bool = False
    max_cells: int = MAX_CELLS
    max_total_cells: int = MAX_TOTAL_CELLS

    def ignored(self) -> tuple[str, ...]:
        return (*self.ignore, *TIME_POINTERS, *(() if self.strict_ids else ID_POINTERS))


@dataclass(frozen=True)
class Difference:
    """One message missing from B, extra in B, or aligned and changed (`pointers`)."""

    what: str
    where: str  # "session 1 turn 2"
    session: int
    turn: int
    a: Recorded | None
    b: Recorded | None
    anchor: int | None  # the seq in A where it happens (for an extra message: the next A message's)
    pointers: Json = field(default_factory=dict)  # pointer -> {"was": ..., "now": ...}

    def as_json(self) -> Json:
        message = self.a if self.a is not None else self.b
        assert message is not None
        out: Json = {"what": self.what, "where": self.where, "session": self.session, "turn": self.turn,
                     "a_seq": None if self.a is None else self.a.seq, "b_seq": None if self.b is None else self.b.seq,
                     "anchor": self.anchor, "direction": message.direction, "kind": message.kind,
                     "method": message.method, "update": message.update}
        if self.what == CHANGED:
            out["pointers"] = _writable(self.pointers)
        return out

    def line(self, names: tuple[str, str] = ("A", "B")) -> str:
        a, b = names
        if self.what == MISSING:
            assert self.a is not None
            text = f"{self.where}: missing from {b}: {a} seq {self.a.seq} {self.a.describe()}"
        elif self.what == EXTRA:
            assert self.b is not None
            near = "" if self.anchor is None else f" (before {a} seq {self.anchor})"
            text = f"{self.where}: extra in {b}: {b} seq {self.b.seq}{near} {self.b.describe()}"
        else:
            assert self.a is not None and self.b is not None
            shown = [f"{pointer or '(whole)'} {_value(change, 'was')} -> {_value(change, 'now')}"
                     for pointer, change in list(self.pointers.items())[:SHOWN_POINTERS]]
            if len(self.pointers) > SHOWN_POINTERS:
                shown.append(f"and {len(self.pointers) - SHOWN_POINTERS} more")
            text = f"{self.where}: {a} seq {self.a.seq} / {b} seq {self.b.seq} {self.a.describe()}: {'; '.join(shown)}"
        return printable(text, quote_backslash=False)


def _value(change: Json, side: str) -> str:
    if side not in change:
        return "(absent)"
    try:
        text = orjson.dumps(change[side]).decode()
    except TypeError:  # an integer past 64 bits (written with all its digits), or nesting too deep
        try:
            text = json.dumps(change[side], ensure_ascii=False, separators=(",", ":"))
        except (RecursionError, ValueError):
            text = "(nested too deep to show)"
    return text if len(text) <= SHOWN_VALUE else text[:SHOWN_VALUE - 1] + "…"


def _writable(pointers: Json) -> Json:
    """`pointers` as `--json` writes them: an integer past 64 bits kept (the stdlib writes it
    with all its digits); a note where they are nested past what can be written."""
    try:
        json.dumps(pointers)
    except (RecursionError, ValueError):
        return showable(pointers)
    return pointers


@dataclass
class CaptureDiff:
    """What `compare_captures` found: the differences in order, and notes (turns aligned by
    position past the bound; sessions or turns only one side has)."""

    differences: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    aligned: int = 0  # pairs of messages aligned
    cells: int = 0  # cells of the exact alignment tables made so far (bounded by `max_total_cells`)
    spent: bool = False  # a turn was aligned by position for want of cells left
    a_messages: int = 0
    b_messages: int = 0

    @property
    def same(self) -> bool:
        return not self.differences

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys((MISSING, EXTRA, CHANGED), 0)
        for difference in self.differences:
            counts[difference.what] += 1
        return counts

    def summary(self, names: tuple[str, str] = ("A", "B")) -> str:
        if self.same:
            return f"same: {self.aligned} messages aligned, no difference"
        counts = self.counts()
        return (f"{names[0]} and {names[1]} differ: {counts[MISSING]} missing, {counts[EXTRA]} extra, "
                f"{counts[CHANGED]} changed ({self.aligned} of {self.a_messages} and {self.b_messages} "
                "messages aligned)")

    def lines(self, names: tuple[str, str] = ("A", "B")) -> list[str]:
        """What the CLI prints: one line per difference, the notes, then the summary."""
        return [*(d.line(names) for d in self.differences),
                *(printable(note, quote_backslash=False) for note in self.notes), self.summary(names)]

    def as_json(self) -> Json:
        return {"same": self.same, "counts": self.counts(), "aligned": self.aligned,
                "messages": {"a": self.a_messages, "b": self.b_messages}, "notes": list(self.notes),
                "differences": [d.as_json() for d in self.differences]}


Projection = Callable[[list[Recorded]], list[Recorded]]
Pairs = list[tuple[int | None, int | None]]


def compare_captures(a: Iterable[Json], b: Iterable[Json], options: DiffOptions = DiffOptions()) -> CaptureDiff:
    """The differences between two captures' records (as the one capture reader yields
    them; records of other types than `message` are skipped)."""
    return compare_tracks(tracks(a), tracks(b), options)


def compare_tracks(a: Sequence[Track], b: Sequence[Track], options: DiffOptions = DiffOptions(),
                   project: Projection | None = None) -> CaptureDiff:
    """`compare_captures` over tracks already cut; `project` turns a turn's messages into
    what is compared (by default, the messages themselves)."""
    result = CaptureDiff()
    sessions = _SessionIds(a, b) if not options.strict_ids else None
    ignored = options.ignored()
    for index in range(max(len(a), len(b))):
        track_a = a[index] if index < len(a) else None
        track_b = b[index] if index < len(b) else None
        shown = track_a if track_a is not None else track_b
        assert shown is not None
        if track_a is None or track_b is None:
            side = "B" if track_a is None else "A"
            result.notes.append(f"session {index} is only in {side}")
        turns_a = track_a.turns if track_a is not None else []
        turns_b = track_b.turns if track_b is not None else []
        for turn in range(max(len(turns_a), len(turns_b))):
            messages_a = turns_a[turn] if turn < len(turns_a) else []
            messages_b = turns_b[turn] if turn < len(turns_b) else []
            if project is not None:
                messages_a, messages_b = project(messages_a), project(messages_b)
            result.a_messages += len(messages_a)
            result.b_messages += len(messages_b)
            _compare_turn(result, shown.label(turn), index, turn, messages_a, messages_b, options, ignored, sessions)
    return result


def _compare_turn(result: CaptureDiff, where: str, session: int, turn: int, a: list[Recorded], b: list[Recorded],
                  options: DiffOptions, ignored: tuple[str, ...], sessions: _SessionIds | None) -> None:
    keys_a, keys_b = [m.key for m in a], [m.key for m in b]
    left = options.max_total_cells - result.cells
    pairs, exact = align(keys_a, keys_b, min(options.max_cells, left))
    if exact:
        result.cells += table_cells(keys_a, keys_b)
    elif table_cells(keys_a, keys_b) <= options.max_cells:
        if not result.spent:  # said once: a long capture would otherwise have a note per turn
            result.spent = True
            result.notes.append(f"{where}: {len(a)} x {len(b)} messages is past what is left of the comparison's "
                                f"bound ({options.max_total_cells} cells in all): aligned by position, and so "
                                "is every turn after it that would need a table")
    else:
        result.notes.append(f"{where}: {len(a)} x {len(b)} messages is past the exact alignment's bound "
                            f"({options.max_cells} cells): aligned by position")
    anchors = _anchors(pairs, a)
    for (i, j), anchor in zip(pairs, anchors, strict=True):
        if j is None:
            assert i is not None
            result.differences.append(Difference(MISSING, where, session, turn, a[i], None, a[i].seq))
        elif i is None:
            result.differences.append(Difference(EXTRA, where, session, turn, None, b[j], anchor))
        else:
            result.aligned += 1
            if a[i].line and a[i].line == b[j].line and a[i].msg == b[j].msg:
                continue  # the same line
            changes = {pointer: change for pointer, change in compact_diff(a[i].msg, b[j].msg).items()
                       if not _ignored(pointer, ignored) and not (sessions and sessions.same(change))}
            if changes:
                result.differences.append(Difference(CHANGED, where, session, turn, a[i], b[j], a[i].seq, changes))


def _anchors(pairs: Pairs, a: list[Recorded]) -> list[int | None]:
    """For each pair, the seq of the next A message from it on (the last one's at the end)."""
    out: list[int | None] = [None] * len(pairs)
    following = a[-1].seq if a else None
    for index in range(len(pairs) - 1, -1, -1):
        i = pairs[index][0]
        if i is not None:
            following = a[i].seq
        out[index] = following
    return out


def _ignored(pointer: str, ignored: tuple[str, ...]) -> bool:
    return any(pointer == prefix or pointer.startswith(prefix + "/") for prefix in ignored)


class _SessionIds:
    """Session id values of A and B by the order of their sessions: a value that is the Nth
    session's id on both sides is the same session, whatever its spelling."""

    def __init__(self, a: Sequence[Track], b: Sequence[Track]) -> None:
        self.a = {_hashable(t.session): t.index for t in a if t.session is not None}
        self.b = {_hashable(t.session): t.index for t in b if t.session is not None}

    def same(self, change: Json) -> bool:
        if "was" not in change or "now" not in change:
            return False
        index = self.a.get(_hashable(change["was"]))
        return index is not None and index == self.b.get(_hashable(change["now"]))


def _hashable(value: Any) -> Any:
    return (type(value), value) if isinstance(value, (str, int)) else None


def align(a: Sequence[Any], b: Sequence[Any], max_cells: int = MAX_CELLS) -> tuple[Pairs, bool]:
    """Pairs `(i, j)` of a longest common subsequence of keys `a` and `b`, with `(i, None)`
    for what only A has and `(None, j)` for what only B has, in order (within a gap, A's
    first); and whether the alignment is exact. The common head and tail are matched at
    once; a middle of more than `max_cells` cells is aligned position by position (equal
    keys paired, unequal ones missing and extra)."""
    n, m = len(a), len(b)
    head, tail = _common_ends(a, b)
    pairs: Pairs = [(k, k) for k in range(head)]
    mid_a, mid_b = range(head, n - tail), range(head, m - tail)
    exact = not mid_a or not mid_b or (len(mid_a) + 1) * (len(mid_b) + 1) <= max_cells
    if exact:
        pairs.extend(_lcs(a, b, mid_a, mid_b))
    else:
        for k in range(max(len(mid_a), len(mid_b))):
            i = mid_a[k] if k < len(mid_a) else None
            j = mid_b[k] if k < len(mid_b) else None
            if i is not None and j is not None and a[i] == b[j]:
                pairs.append((i, j))
            else:
                if i is not None:
                    pairs.append((i, None))
                if j is not None:
                    pairs.append((None, j))
    pairs.extend((n - tail + k, m - tail + k) for k in range(tail))
    return pairs, exact


def _common_ends(a: Sequence[Any], b: Sequence[Any]) -> tuple[int, int]:
    """How many keys `a` and `b` share at their start, and then at their end."""
    n, m = len(a), len(b)
    head = 0
    while head < n and head < m and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and a[n - 1 - tail] == b[m - 1 - tail]:
        tail += 1
    return head, tail


def table_cells(a: Sequence[Any], b: Sequence[Any]) -> int:
    """The cells of the table `align` makes to align `a` and `b` exactly (0: none needed)."""
    head, tail = _common_ends(a, b)
    rows, cols = len(a) - head - tail, len(b) - head - tail
    return 0 if not rows or not cols else (rows + 1) * (cols + 1)


def _lcs(a: Sequence[Any], b: Sequence[Any], rows: range, cols: range) -> Pairs:
    if not rows or not cols:
        return [*((i, None) for i in rows), *((None, j) for j in cols)]
    codes: dict[Any, int] = {}
    xs = [codes.setdefault(a[i], len(codes)) for i in rows]
    ys = [codes.setdefault(b[j], len(codes)) for j in cols]
    n, m = len(xs), len(ys)
    width = m + 1
    # table[i * width + j]: the length of an LCS of xs[i:] and ys[j:] (suffixes, so the
    # walk that reads it goes forward).
    table = array("i", bytes(4 * (n + 1) * width))
    for i in range(n - 1, -1, -1):
        x, row, below = xs[i], i * width, (i + 1) * width
        for j in range(m - 1, -1, -1):
            if x == ys[j]:
                table[row + j] = table[below + j + 1] + 1
            else:
                down, right = table[below + j], table[row + j + 1]
                table[row + j] = down if down >= right else right
    out: Pairs = []
    i = j = 0
    while i < n and j < m:
        if xs[i] == ys[j]:
            out.append((rows[i], cols[j]))
            i += 1
            j += 1
        elif table[(i + 1) * width + j] >= table[i * width + j + 1]:
            out.append((rows[i], None))
            i += 1
        else:
            out.append((None, cols[j]))
            j += 1
    out.extend((rows[k], None) for k in range(i, n))
    out.extend((None, cols[k]) for k in range(j, m))
    return out
