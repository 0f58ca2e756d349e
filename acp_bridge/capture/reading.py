"""Reading captures, for a person: records back from JSONL, one-line summaries for `show`,
detail levels, filters, and the aggregation behind `stats`.

Must never: do IO (callers hand it lines and an output stream), import trio or click, or
raise on what a capture holds (a message nested past what can be re-encoded is shown as it
came; a number is shown as it was written, not as a float read it).
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from acp_bridge.capture.redaction import WHOLE
from acp_bridge.core import protocol as p
from acp_bridge.core.frames import Direction, id_key
from acp_bridge.core.protocol import Json

# Numbers orjson reads inexactly: a fraction or exponent (`1.50`, `1e3`), or 19 digits and
# more (beyond 64 bits it reads a float).
_INEXACT_NUMBER = re.compile(rb"[0-9][.eE]|[0-9]{19}")
_BIG_INTEGER = re.compile(rb"[0-9]{19}")
WITHHELD_NOTE = "(withheld whole: the line could hold a secret and could not be masked precisely)"

# -- reading ----------------------------------------------------------------------------------


def load_record(line: bytes) -> Json | None:
    """One capture line back as a record, or None if it is not one. An id beyond 64 bits
    (written as its digits) is read exactly."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    if type(record.get("id")) is float and _BIG_INTEGER.search(line) is not None:
        try:
            record["id"] = json.loads(line)["id"]
        except (ValueError, RecursionError, KeyError, TypeError):
            pass
    return _typed(record)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# The fields the readers use, and the type each must have; a field of another type (a
# capture edited by hand, or written by something else) is dropped, as if absent.
_FIELD_TYPES: dict[str, Callable[[Any], bool]] = {
    **dict.fromkeys(("time", "mono", "latency"), _is_number),
    **dict.fromkeys(("seq", "size", "out_size", "records"),
                    lambda v: isinstance(v, int) and not isinstance(v, bool)),
    **dict.fromkeys(("direction", "kind", "verdict", "raw_b64", "out_b64", "error"),
                    lambda v: isinstance(v, str)),
    "method": lambda v: v is None or isinstance(v, str),
    "session": lambda v: v is None or isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)),
    "rules": lambda v: isinstance(v, list) and all(isinstance(r, str) for r in v),
    "raw": lambda v: isinstance(v, str),
    "out": lambda v: v is None or isinstance(v, str),
    "redacted": lambda v: v == WHOLE or (isinstance(v, list) and all(isinstance(r, str) for r in v)),
    **dict.fromkeys(("truncated", "unfinished"), lambda v: isinstance(v, bool)),
}


def _typed(record: Json) -> Json:
    """`record` without fields of the wrong type, so that no reader trips on one."""
    wrong = [key for key, fits in _FIELD_TYPES.items() if key in record and not fits(record[key])]
    for key in wrong:
        del record[key]
    return record


def record_bytes(record: Json, key: str) -> bytes | None:
    """`raw` or `out` of a record as bytes (None: absent; for `out`, null means dropped)."""
    if key in record:
        text = record[key]
        return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else None
    encoded = record.get(f"{key}_b64")
    if not isinstance(encoded, str):
        return None
    try:
        return base64.b64decode(encoded)
    except ValueError:  # binascii.Error: not base64
        return None


def sent_bytes(record: Json) -> bytes | None:
    """What went out for this record: `out` when it differs, else the line as it came."""
    if "out" in record or "out_b64" in record:
        return record_bytes(record, "out")
    return record_bytes(record, "raw")


def record_message(record: Json, key: str) -> Any:
    """The parsed message of `raw` or `out`, or None when it is not JSON."""
    data = record_bytes(record, key)
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def utc_clock(wall: float) -> str:
    """HH:MM:SS.mmm in UTC (the CLI passes a local-time clock)."""
    return _clock(wall, time.gmtime)


def local_clock(wall: float) -> str:
    return _clock(wall, time.localtime)


def _clock(wall: float, convert: Callable[[float], time.struct_time]) -> str:
    try:
        return time.strftime("%H:%M:%S", convert(wall)) + f".{int(wall * 1000) % 1000:03d}"
    except (OverflowError, OSError, ValueError):  # a time no calendar holds
        return f"t={wall!r}"


def _fmt_id(id_: Any) -> str:
    if isinstance(id_, int) and not isinstance(id_, bool):
        return str(id_)
    try:
        return orjson.dumps(id_).decode()
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


def summarize(record: Json, clock: Callable[[float], str] = utc_clock) -> Summary:
    """The one-line summary of a message record."""
    direction = record.get("direction")
    arrow = Direction(direction).arrow if direction in ("to-agent", "to-client") else "??"
    kind, verdict = record.get("kind"), record.get("verdict", "")
    method = record.get("method")
    sent = record.get("out") is not None or "out_b64" in record
    msg = record_message(record, "out" if sent else "raw")
    if kind == "request":
        label = f"{method} #{_fmt_id(record.get('id'))}"
    elif kind == "notification":
        label = str(method)
        update = p.get_path(msg, "params", "update", "sessionUpdate")
        if isinstance(update, str):
            label += f" {update}"
    elif kind == "response":
        label = f"#{_fmt_id(record.get('id'))} {method or '(unpaired)'}"
        code = p.get_path(msg, "error", "code")
        label += f" error {code}" if isinstance(msg, dict) and "error" in msg else " ok"
        latency = record.get("latency")
        if isinstance(latency, (int, float)):
            label += f" {fmt_seconds(latency)}"
    elif verdict == "opaque":
        label = "(line over the parse limit)"
    else:
        raw = record_bytes(record, "raw") or b""
        label = "(blank line)" if not raw.strip() else "(not JSON-RPC)"
    session = record.get("session")
    size = f"{record.get('size', 0)}B"
    if "out_size" in record and verdict != "emit":
        size += f"->{record['out_size']}B"
    elif verdict == "emit":
        size = f"{record.get('out_size', 0)}B"
    rules = ",".join(record.get("rules") or ())
    marks: list[str] = []
    if verdict in ("rewrite", "drop", "emit"):
        name = "bridge" if verdict == "emit" else verdict
        marks.append(f"[{name}: {rules}]" if rules else f"[{name}]")
    elif verdict == "error":
        marks.append(f"[error: {record.get('error', '')}]")
    if record.get("truncated"):
        marks.append("[truncated]")
    if record.get("unfinished"):
        marks.append("[unfinished]")
    if record.get("redacted") == WHOLE:
        marks.append("[redacted: whole line]")
    elif record.get("redacted"):
        marks.append("[redacted]")
    return Summary(
        clock=clock(float(record.get("time", 0.0))),
        arrow=arrow,
        label=label,
        session="" if session is None else f"({session})",
        size=size,
        marks=tuple(marks),
        verdict=str(verdict),
    )


def pretty(obj: Any) -> str:
    """Indented JSON. Raises TypeError for what orjson cannot write (nested past 254 levels)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def _exact_message(data: bytes) -> Any:
    """`data` parsed for display, every number kept as written; None when it is not JSON."""
    try:
        msg = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if _INEXACT_NUMBER.search(data) is not None:
        try:
            msg = json.loads(data, parse_int=orjson.Fragment, parse_float=orjson.Fragment)
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
    return [prefix + line for line in text.splitlines()]


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


@dataclass(frozen=True)
class RecordFilter:
    methods: tuple[str, ...] = ()
    session: str | None = None
    direction: str | None = None

    def __call__(self, record: Json) -> bool:
        if self.methods and record.get("method") not in self.methods:
            return False
        if self.session is not None and str(record.get("session")) != self.session:
            return False
        return self.direction is None or record.get("direction") == self.direction


# -- stats ------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted `values` (q in 0..100)."""
    rank = max(1, math.ceil(q / 100 * len(values)))
    return values[rank - 1]


class CaptureStats:
    """Counts, bytes, latencies, rules and loose ends of a capture, record by record."""

    def __init__(self) -> None:
        self.header: Json | None = None
        self.ended = False
        self.records = 0
        self.unreadable = 0  # capture lines that are not records
        self.messages: Counter[tuple[str, str]] = Counter()
        self.bytes: Counter[tuple[str, str]] = Counter()
        self.latency: defaultdict[str, list[float]] = defaultdict(list)
        self.rules: Counter[tuple[str, str]] = Counter()
        self.malformed: Counter[str] = Counter()
        self.opaque = 0
        self.redacted = 0
        self._open: dict[tuple[str, Any], Json] = {}

    def __repr__(self) -> str:
        return f"<CaptureStats records={self.records} open={len(self._open)}>"

    def add_line(self, line: bytes) -> None:
        if not line.strip():
            return
        record = load_record(line)
        if record is None:
            self.unreadable += 1
        else:
            self.add(record)

    def add(self, record: Json) -> None:
        kind = record.get("type")
        if kind == "header":
            self.header = record
            return
        if kind == "end":
            self.ended = True
            return
        if kind != "message":
            return
        self.records += 1
        direction = str(record.get("direction"))
        verdict = record.get("verdict")
        size = record.get("out_size", 0) if verdict == "emit" else record.get("size", 0)
        if record.get("kind") == "other":
            if verdict == "opaque":
                self.opaque += 1
            else:
                self.malformed[direction] += 1
            label = "(opaque)" if verdict == "opaque" else "(not JSON-RPC)"
        else:
            label = str(record.get("method") or "(unpaired response)")
        self.messages[(label, direction)] += 1
        self.bytes[(label, direction)] += int(size or 0)
        for rule in record.get("rules") or ():
            self.rules[(rule, str(verdict))] += 1
        if record.get("redacted"):
            self.redacted += 1
        self._pair(record, direction)

    def _pair(self, record: Json, direction: str) -> None:
        try:
            key_id = id_key(record.get("id"))
        except (TypeError, ValueError):
            return
        if record.get("kind") == "request":
            self._open[(direction, key_id)] = record
        elif record.get("kind") == "response":
            other = "to-agent" if direction == "to-client" else "to-client"
            request = self._open.pop((other, key_id), None)
            latency = record.get("latency")
            if not isinstance(latency, (int, float)) and request is not None:
                latency = float(record.get("mono", 0.0)) - float(request.get("mono", 0.0))
            method = record.get("method") or (request or {}).get("method")
            if isinstance(latency, (int, float)) and method:
                self.latency[str(method)].append(float(latency))

    @property
    def unanswered(self) -> list[Json]:
        return sorted(self._open.values(), key=lambda r: r.get("seq", 0))

    def report(self, clock: Callable[[float], str] = utc_clock) -> list[str]:
        """The text `acp-bridge stats` prints."""
        out: list[str] = []
        if self.header is not None:
            h = self.header
            out.append(f"capture: format {h.get('format')}, bridge {h.get('bridge')}, "
                       f"started {h.get('started')}, config {h.get('config')}")
        else:
            out.append("capture: no header record")
        total_bytes = sum(self.bytes.values())
        out.append(f"messages: {self.records} ({total_bytes} bytes), "
                   f"malformed lines: {sum(self.malformed.values())}, "
                   f"over the parse limit: {self.opaque}, redacted: {self.redacted}"
                   + ("" if self.ended else ", capture not closed cleanly")
                   + (f", unreadable capture lines: {self.unreadable}" if self.unreadable else ""))
        out.append("")
        out.append(f"{'method':<36} {'direction':<9} {'count':>7} {'bytes':>10}")
        for (label, direction), count in sorted(self.messages.items()):
            out.append(f"{label:<36} {direction:<9} {count:>7} {self.bytes[(label, direction)]:>10}")
        out.append("")
        out.append(f"{'latency':<36} {'count':>7} {'p50':>9} {'p90':>9} {'p99':>9} {'max':>9}")
        if not self.latency:
            out.append("(no answered requests)")
        for method, values in sorted(self.latency.items()):
            values = sorted(values)
            cells = " ".join(f"{fmt_seconds(percentile(values, q)):>9}" for q in (50, 90, 99))
            out.append(f"{method:<36} {len(values):>7} {cells} {fmt_seconds(values[-1]):>9}")
        out.append("")
        out.append(f"{'rule':<36} {'verdict':<9} {'count':>7}")
        if not self.rules:
            out.append("(no rule changed anything)")
        for (rule, verdict), count in sorted(self.rules.items()):
            out.append(f"{rule:<36} {verdict:<9} {count:>7}")
        out.append("")
        unanswered = self.unanswered
        out.append(f"unanswered requests: {len(unanswered)}")
        for record in unanswered:
            arrow = "->" if record.get("direction") == "to-agent" else "<-"
            session = record.get("session")
            where = f" ({session})" if session is not None else ""
            out.append(f"  {clock(float(record.get('time', 0.0)))} {arrow} "
                       f"{record.get('method')} #{_fmt_id(record.get('id'))}{where}")
        return out
