"""A finding as every observer receives it, and its capture record.

Owns: the `Finding` record (one occurrence of a health finding, or the total of one code
and session at the end) and the shape of its capture record (`"type": "finding"`,
docs/capture-format.md). The health watchdog makes findings; every observer takes them as
they are (the capture file writes them, telemetry hangs them on spans). Health and
telemetry are of one rank and import nothing of each other, so the type sits below both.
It sits in the core rather than in `capture` because the watchdog runs by default and a
plain run loads no capture module (tests/commands/test_run_imports.py); like the session's
facts, a finding is about the traffic, and it needs nothing but the protocol's `Json`.
The codes, with their meaning and advice, are health's (`health.findings`).
Must never: decide when a finding happens (the health engine does) or do IO.
"""

from __future__ import annotations

import enum
from typing import Any

from acp_bridge.core.protocol import Json


class Level(enum.IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class Finding:
    """One occurrence of a finding. `count` is how many of this code and session there have
    been so far, this one included (the first is 1). With `total`, it is not an occurrence
    but the count of them all, said at the end of the connection. A plain class: `run`
    imports this module, and a dataclass costs a millisecond of start-up to define."""

    __slots__ = ("at", "code", "count", "direction", "id", "level", "method", "seq", "session", "text", "total")

    def __init__(self, code: str, level: Level, session: Any, text: str, at: float, seq: int | None = None,
                 direction: str | None = None, method: str | None = None, id_: Any = None, count: int = 1,
                 *, total: bool = False) -> None:
        self.code, self.level, self.session, self.text, self.at = code, level, session, text, at
        self.seq, self.direction, self.method, self.id, self.count = seq, direction, method, id_, count
        self.total = total

    def __repr__(self) -> str:
        total = "total " if self.total else ""
        return (f"<Finding {total}{self.level.label} {self.code} session={self.session!r} seq={self.seq} "
                f"count={self.count}>")

    def record(self, wall: float) -> Json:
        """The capture record of this finding (docs/capture-format.md, `finding`)."""
        if self.total:
            return {"type": "finding", "time": wall, "mono": self.at, "code": self.code,
                    "level": self.level.label, "session": self.session, "message": self.text,
                    "about": None, "count": self.count, "total": True}
        return {
            "type": "finding", "time": wall, "mono": self.at, "code": self.code,
            "level": self.level.label, "session": self.session, "message": self.text,
            "about": self.seq, "direction": self.direction, "method": self.method, "id": self.id,
            "count": self.count,
        }
