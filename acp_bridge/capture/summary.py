"""What `show` prints of a capture's records: one-line summaries, detail levels, findings
and filters, for a person. The aggregation behind `stats` is in `stats`; reading records
back from a file is `reader`.

Must never: do IO (callers hand it records and print what it returns), read the clock or
the time zone (a clock is passed in: `files.local_clock` in the CLI), import trio or click,
or raise on what a capture holds (a message nested past what can be re-encoded is shown as it
came; a number is shown as it was written, not as a float read it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from acp_bridge.capture.reader import record_bytes, record_message
from acp_bridge.capture.redaction import WHOLE
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.literals import exact_reading, inexact_numbers
from acp_bridge.core.messages import Direction
from acp_bridge.core.printable import printable, printable_lines
from acp_bridge.core.protocol import Json

WITHHELD_NOTE = "(withheld whole: the line could hold a secret and could not be masked precisely)"


def utc_clock(wall: float) -> str:
    """HH:MM:SS.mmm in UTC, counted from the Unix epoch: no calendar or time zone needed (the
    CLI passes a local-time clock, `files.local_clock`)."""
    try:
        seconds = math.floor(wall)
    except (OverflowError, ValueError):  # not a time at all: inf or nan
        return f"t={wall!r}"
    return (f"{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
            f".{int(wall * 1000) % 1000:03d}")


def fmt_id(id_: Any) -> str:
    """An id for a person: as JSON, with what JSON leaves raw (DEL, C1, bidi) escaped too."""
    if isinstance(id_, int) and not isinstance(id_, bool):
        return str(id_)
    try:
        return printable(orjson.dumps(id_).decode(), quote_backslash=False)
    except TypeError:  # nested too deep to write
        return "(unwritable id)"


def fmt_seconds(seconds: float) -> str:
    return f"{seconds * 1000:.1f}ms" if seconds < 1 else f"{seconds:.2f}s"


@dataclass(frozen=True)
class Summary:
    """One message, told in one line: the parts `show` prints (and colours)."""

    clock: str
    arrow: str
    label: str
    session: str
    size: str
    marks: tuple[str, ...]
    verdict: str

    def plain(self) -> str:
        parts = [self.clock, self.arrow, self.label]
        if self.session:
            parts.append(self.session)
        parts.append(self.size)
        parts.extend(self.marks)
        return " ".join(parts)


SESSION_SHOWN = 8  # a session id longer than SESSION_LONG shows as its first 8 characters and "…"
SESSION_LONG = 12


def short_session(session: str) -> str:
    """A long session id cut to a prefix that `show --session` takes back."""
    return session if len(session) <= SESSION_LONG else session[:SESSION_SHOWN] + "…"


class AmbiguousSession(ValueError):
    """A session id prefix that starts several of a capture's session ids."""

    def __init__(self, given: str, candidates: list[str]) -> None:
        super().__init__(f"{given!r} is the start of {len(candidates)} sessions: "
                         f"{', '.join(map(printable, candidates))}")
        self.given, self.candidates = given, candidates


def resolve_session(given: str, sessions: Iterable[str]) -> str:
    """The session `given` names among a capture's `sessions`: itself when one has that id,
    else the one whose id starts with it (`short_session` cuts ids so), else `given` (which
    then matches nothing).

    Raises:
        AmbiguousSession: it starts several ids and is none of them.
    """
    known = set(sessions)
    if given in known:
        return given
    candidates = sorted(s for s in known if s.startswith(given))
    if len(candidates) > 1:
        raise AmbiguousSession(given, candidates)
    return candidates[0] if candidates else given


_UNREAD: Any = object()


def summarize(record: Json, clock: Callable[[float], str] = utc_clock, *, short: bool = False,
              message: Any = _UNREAD) -> Summary:
    """The one-line summary of a message record (with `short`, a long session id cut short).
    What came from the wire is made `printable`: a method or session id can hold anything.
    `message`: the record's message as the caller has already parsed it (`out` when it is
    there and not null, else `raw`; None when it is not JSON), so it is not parsed again."""
    direction = record.get("direction")
    arrow = Direction(direction).arrow if direction in ("to-agent", "to-client") else "??"
    kind, verdict = record.get("kind"), record.get("verdict", "")
    method = None if record.get("method") is None else printable(str(record["method"]))
    msg = message
    if msg is _UNREAD:
        sent = record.get("out") is not None or "out_b64" in record
        msg = record_message(record, "out" if sent else "raw")
    if kind == "request":
        label = f"{method} id {fmt_id(record.get('id'))}"
    elif kind == "notification":
        label = str(method)
        update = read.message_update_kind(msg)
        if update is not None:
            label += f" {printable(update)}"
    elif kind == "response":
        label = f"{method or '(unpaired)'} id {fmt_id(record.get('id'))}"
        code = p.get_path(msg, "error", "code")
        label += f" error {fmt_id(code)}" if isinstance(msg, dict) and "error" in msg else " ok"
        latency = record.get("latency")
        if isinstance(latency, (int, float)):
            label += f" {fmt_seconds(latency)}"
    elif verdict == "opaque":
        label = "(line over the parse limit)"
    else:
        raw = record_bytes(record, "raw") or b""
        label = "(blank line)" if not raw.strip() else "(not JSON-RPC)"
    session = record.get("session")
    size = _size(record, verdict)
    marks = _marks(record, verdict)
    return Summary(
        clock=clock(float(record.get("time", 0.0))),
        arrow=arrow,
        label=label,
        session="" if session is None else f"({printable(short_session(str(session)) if short else str(session))})",
        size=size,
        marks=tuple(printable(mark, quote_backslash=False) for mark in marks),  # rule names, errors
        verdict=str(verdict),
    )


def _size(record: Json, verdict: Any) -> str:
    """The size a summary shows: as it came, and as it went when the bridge changed it; `?`
    for one the record does not say (or says wrong, so the reader dropped it)."""
    if verdict == "emit":
        return f"{record.get('out_size', '?')}B"
    size = f"{record.get('size', '?')}B"
    if "out_size" in record:
        size += f"->{record['out_size']}B"
    return size


def _marks(record: Json, verdict: Any) -> list[str]:
    """What a summary marks: what the bridge did (and which rules), truncated, unfinished,
    redacted."""
    rules = ",".join(record.get("rules") or ())
    marks: list[str] = []
    if verdict in ("rewrite", "drop", "emit", "diverted"):
        name = "bridge" if verdict == "emit" else verdict
        marks.append(f"[{name}: {rules}]" if rules else f"[{name}]")
    elif verdict == "error":  # the rule that failed, when the capture names it
        marks.append(f"[error: {rules}: {record.get('error', '')}]" if rules else f"[error: {record.get('error', '')}]")
    if record.get("truncated"):
        marks.append("[truncated]")
    if record.get("unfinished"):
        marks.append("[unfinished]")
    if record.get("redacted") == WHOLE:
        marks.append("[redacted: whole line]")
    elif record.get("redacted"):
        marks.append("[redacted]")
    return marks


def pretty(obj: Any) -> str:
    """Indented JSON. Raises TypeError for what orjson cannot write (nested past 254 levels)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def _exact_message(data: bytes) -> Any:
    """`data` parsed for display, every number kept as written; None when it is not JSON."""
    try:
        msg = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if inexact_numbers(data):
        try:
            msg = exact_reading(data)
        except (ValueError, RecursionError):
            pass  # deeper than the stdlib reads: the display falls back to the text
    return msg


def _as_text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace").rstrip("\r\n")


def display(record: Json, key: str, *, part: bool = False) -> str:
    """`raw` or `out` of a record for a person: indented JSON (with `part`, only the params,
    result or error), or the line itself when it is not JSON or cannot be re-encoded."""
    if record.get("redacted") == WHOLE:
        return WITHHELD_NOTE
    data = record_bytes(record, key)
    if data is None:
        return "(nothing)"
    msg = _exact_message(data)
    if msg is None:
        text = repr(data)
        if record.get("truncated") and key == "raw":
            kept = len(data)
            text += f"\n… ({int(record.get('size', kept)) - kept} more bytes not kept)"
        return text
    try:
        if part and isinstance(msg, dict):
            for name in ("params", "result", "error"):
                if name in msg:
                    return pretty(msg[name])
        return pretty(msg)
    except TypeError:  # nested past what orjson writes: the line as it came
        return _as_text(data)


def _body(record: Json, key: str) -> str:
    """The interesting part of a message: params, result or error; else the whole line."""
    return display(record, key, part=True)


def _indent(text: str, prefix: str = "    ") -> list[str]:
    """`text` (indented JSON, or a line as it came) indented, and made printable: JSON leaves
    DEL, C1 controls, U+2028 and bidi overrides raw in its strings."""
    return [prefix + line for line in printable_lines(text).split("\n")]


def detail_lines(record: Json, detail: int) -> list[str]:
    """What `--detail` adds under a summary: 2 the params, 3 before and after."""
    if detail < 2:
        return []
    changed = "out" in record or "out_b64" in record
    if detail == 2 or not changed:
        return _indent(_body(record, "out" if changed else "raw"))
    if record.get("verdict") == "emit":
        return ["  sent:", *_indent(pretty_message(record, "out"))]
    lines = ["  before:", *_indent(pretty_message(record, "raw")), "  after:"]
    if record.get("out") is None and "out_b64" not in record:
        lines.append("    (dropped)")
    else:
        lines += _indent(pretty_message(record, "out"))
    return lines


def pretty_message(record: Json, key: str) -> str:
    return display(record, key)


def finding_line(record: Json, clock: Callable[[float], str] = utc_clock) -> str:
    """One line for a `finding` record (the watchdog's, as it wrote them into the capture)."""
    session = record.get("session")
    where = f" ({printable(short_session(str(session)))})" if session is not None else ""
    about = record.get("about")
    seq = f" [seq {about}]" if about is not None else ""
    told = printable(f"{record.get('level', '?')} {record.get('code', '?')}: {record.get('message', '')}",
                     quote_backslash=False)  # the message quotes ids, some as repr()s
    return f"{clock(float(record.get('time', 0.0)))} !! {told}{where}{seq}"


def mark_line(level: str, code: str, text: str) -> str:
    """A finding marked under the message it concerns (`show --findings`)."""
    return f"    !! {level} {code}: {printable(text, quote_backslash=False)}"


@dataclass(frozen=True)
class RecordFilter:
    methods: tuple[str, ...] = ()
    session: str | None = None
    direction: str | None = None
    updates: tuple[str, ...] = ()  # `params.update.sessionUpdate` of a `session/update`
    seqs: tuple[int, ...] = ()  # the record's own number, `seq N` wherever one is named

    def __call__(self, record: Json) -> bool:
        if self.seqs and not (type(seq := record.get("seq")) is int and seq in self.seqs):
            return False
        if self.methods and record.get("method") not in self.methods:
            return False
        if self.updates and not self.updates_match(record):
            return False
        if self.session is not None and str(record.get("session")) != self.session:
            return False
        return self.direction is None or record.get("direction") == self.direction

    def updates_match(self, record: Json) -> bool:
        """A `session/update` of one of the kinds, as it came or as it was sent (a rewrite
        that changes the kind matches both); the message is parsed only here."""
        if record.get("method") != p.SESSION_UPDATE:
            return False
        return any(read.message_update_kind(record_message(record, key)) in self.updates
                   for key in ("raw", "out"))
