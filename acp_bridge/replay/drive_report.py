"""`drive`'s report: per turn, what differs from the recording and what went wrong.

Owns: `DriveReport` (what the driver saw go wrong, turn by turn) and `drive_result`, which
compares the recording with the live run's capture through replay/compare.py (over
`facts.structure` or `facts.text`, so `drive` and `diff` align and word differences alike)
and joins the driver's problems (replay/driver.py) to them, turn by turn; and the result as
text lines, JSON and JUnit XML (a test case per prompt turn).
Must never: do IO (the command writes what this returns).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from acp_bridge.capture import junit
from acp_bridge.core.printable import printable
from acp_bridge.core.protocol import Json
from acp_bridge.replay import facts
from acp_bridge.replay.client_side import ClientSide, Outgoing
from acp_bridge.replay.compare import CaptureDiff, Difference, DiffOptions, compare_tracks
from acp_bridge.replay.turns import Track, tracks


@dataclass
class TurnReport:
    """What went wrong in one turn, as the driver saw it (nothing: it ran to its end)."""

    where: str
    track: int
    turn: int
    seq: int  # the recorded seq of its prompt (of its first line, for a setup)
    problems: list[str] = field(default_factory=list)


@dataclass
class DriveReport:
    """What the driver saw go wrong (replay/driver.py fills it in)."""

    turns: dict[tuple[int, int], TurnReport] = field(default_factory=dict)
    stopped: str | None = None  # why the driver asked for the agent to be stopped
    unanswered: int = 0  # agent requests the recording could not answer
    not_run: set[tuple[int, int]] = field(default_factory=set)  # turns never started: nothing to compare

    def turn(self, line: Outgoing) -> TurnReport:
        key = (line.track, line.turn)
        if key not in self.turns:
            self.turns[key] = TurnReport(line.where, line.track, line.turn, line.seq)
        return self.turns[key]

    @property
    def failed(self) -> bool:
        return any(t.problems for t in self.turns.values())


NAMES = ("recorded", "live")
PROJECTIONS = {"structure": facts.structure, "text": facts.text}


@dataclass
class TurnResult:
    where: str
    track: int
    turn: int
    seq: int | None  # the recorded seq of its prompt
    differences: list[Difference] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def is_prompt(self) -> bool:
        return self.track > 0 and self.turn > 0

    @property
    def ok(self) -> bool:
        return not self.differences and not self.problems

    def lines(self) -> list[str]:
        return [*(printable(f"{self.where}: {problem}", quote_backslash=False) for problem in self.problems),
                *(d.line(NAMES) for d in self.differences)]

    def as_json(self) -> Json:
        return {"where": self.where, "session": self.track, "turn": self.turn, "seq": self.seq, "ok": self.ok,
                "problems": self.problems, "differences": [d.as_json() for d in self.differences]}


@dataclass
class DriveResult:
    compare: str
    turns: list[TurnResult]
    notes: list[str]
    diff: CaptureDiff | None

    @property
    def ok(self) -> bool:
        return all(turn.ok for turn in self.turns)

    def summary(self) -> str:
        prompts = [t for t in self.turns if t.is_prompt]
        failed = sum(bool(t.problems) for t in prompts)
        differ = sum(bool(t.differences) and not t.problems for t in prompts)
        setup = sum(not t.ok for t in self.turns if not t.is_prompt)
        what = "compared" if self.compare != "none" else "run (not compared)"
        text = f"drive: {len(prompts)} prompt turn(s) {what}: {len(prompts) - failed - differ} as recorded"
        text += f", {differ} differ, {failed} failed"
        return text + (f"; the setup differs or failed in {setup} place(s)" if setup else "")

    def lines(self) -> list[str]:
        out = [line for turn in self.turns for line in turn.lines()]
        out += [printable(note, quote_backslash=False) for note in self.notes]
        return [*out, self.summary()]

    def as_json(self) -> Json:
        return {"ok": self.ok, "compare": self.compare, "summary": self.summary(), "notes": self.notes,
                "turns": [t.as_json() for t in self.turns]}

    def junit_xml(self, name: str) -> str:
        """JUnit XML: a test case per prompt turn; a setup that differs or failed is one more."""
        cases = [junit.Case("acp-bridge.drive",
                            f"{turn.where} (seq {turn.seq})" if turn.seq is not None else turn.where,
                            failure=_failure(turn))
                 for turn in self.turns if turn.is_prompt or not turn.ok]
        return junit.junit_xml("acp-bridge drive", [junit.Suite(name, cases)])


def _failure(turn: TurnResult) -> junit.Failure | None:
    if turn.problems:
        return junit.Failure(turn.problems[0], "failed", "\n".join(turn.lines()))
    if turn.differences:
        return junit.Failure(f"{len(turn.differences)} difference(s)", "differs", "\n".join(turn.lines()))
    return None


def live_tracks(records: Iterable[Json], compare: str) -> list[Track]:
    """The live run's capture cut into tracks for `drive_result`, each message held only as
    far as `compare` reads it (an agent's long output was held whole until compared)."""
    if compare == "none":
        return []
    return tracks(records, keep=functools.partial(facts.kept, with_text=compare == "text"))


def drive_result(side: ClientSide, live: list[Track], report: DriveReport, compare: str) -> DriveResult:
    """The recording (`side`) and the live run (`live`, from its capture) compared turn by
    turn with `compare` ("structure", "text" or "none"), with the driver's problems."""
    turns: dict[tuple[int, int], TurnResult] = {}
    for track in side.tracks:
        for number, messages in enumerate(track.turns):
            if not messages:
                continue
            turns[(track.index, number)] = TurnResult(track.label(number), track.index, number, messages[0].seq)
    for key, problems in report.turns.items():
        turn = turns.setdefault(key, TurnResult(problems.where, *key, problems.seq))
        turn.problems.extend(problems.problems)
    diff = None
    notes: list[str] = []
    if compare != "none":
        diff = compare_tracks(side.tracks, live, DiffOptions(), project=PROJECTIONS[compare])
        for difference in diff.differences:
            key = (difference.session, difference.turn)
            if key in report.not_run:  # what it would have done is all missing: said once, as not run
                continue
            if key not in turns:
                turns[key] = TurnResult(difference.where, *key, None)
            turns[key].differences.append(difference)
        notes = [note.replace("only in B", "only in the live run").replace("only in A", "only in the recording")
                 for note in diff.notes]
    ordered = sorted(turns.values(), key=_order)
    return DriveResult(compare, ordered, notes, diff)


def _order(turn: TurnResult) -> Any:
    return (turn.seq is None, turn.seq if turn.seq is not None else 0, turn.track, turn.turn)
