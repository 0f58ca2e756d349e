"""The one capture reader: records back from a capture's lines, by one policy for what is
not a record (docs/capture-format.md, "Reading a capture"). `show`, `stats`, `export`,
`check`, `replay`, `diff` and `drive` all read through it, strictly; `files.open_capture`
opens the file for it.

The policy:
- The first line that is not blank must be a header record of a format this version
  reads; otherwise (an empty file, a file that is no capture, an unknown version) the
  capture is refused: `UnreadableCapture`.
- A last line without its newline that is no whole record, with no end record before it,
  is what a bridge killed while writing leaves: the records before it are read, and
  `torn` says which line was ignored (`notes()`).
- Any other line that is not a record (edited by hand, or cut short after the end record),
  and a line longer than the reader's limit (never held whole: only its length is known),
  is an error in a `strict` reader (every command: unreadable input, exit 2) and is skipped
  and counted in a lenient one (the findings a page marks, which it goes on without).
- A field of the wrong type, a negative `size` or `out_size`, and a `latency` below 0 or
  beyond a year are read as absent, and said once (`notes()`).
- Blank lines are skipped.

Must never: do IO (lines are handed in), import trio or click, or raise on what a record
holds (a field it cannot use is dropped, as if absent).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from acp_bridge.capture.redaction import WHOLE
from acp_bridge.core.lines import MIB
from acp_bridge.core.literals import integer_id
from acp_bridge.core.protocol import Json

FORMAT_VERSION = 1
MAX_RECORD = 256 * MIB  # the longest line read as a record (a longer one is skipped unread)


def known_format(version: Any) -> bool:
    """Is `version` (a header's `format`) one this version reads? (`true` is not 1 here,
    though Python's `==` says it is.) Every reader of captures asks this one question."""
    return type(version) is int and version == FORMAT_VERSION


def header_problem(record: Json | None) -> str | None:
    """Why `record`, the first record of a file (None: its first line that is not blank is
    no record), is not the header of a capture this version reads; None when it is. The
    reader and the catalog both ask it."""
    if record is None or record.get("type") != "header":
        return "not a capture (the first line is not a header record)"
    version = record.get("format")
    if not known_format(version):
        shown = repr(version) if isinstance(version, (str, int, float, type(None))) else type(version).__name__
        return f"capture format {shown}; this acp-bridge reads format {FORMAT_VERSION}"
    return None


class UnreadableCapture(Exception):
    """A capture that cannot be read: the one line to say names the file, the line (None:
    the file as a whole) and the problem."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if line is None else f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = path, line, problem


class Unterminated(bytes):
    """The last line of a file when it has no newline (the other lines come without theirs)."""


@dataclass(frozen=True)
class LongLine:
    """A line longer than `limit` bytes: skipped unread, so only its length is known."""

    size: int
    limit: int

    def problem(self) -> str:
        limit = f"{self.limit // MIB} MiB" if self.limit >= MIB and not self.limit % MIB else f"{self.limit} bytes"
        return f"a line longer than {limit}, so not a capture record"


Line = bytes | LongLine

NOT_A_RECORD = "not a capture record"


class CaptureReader:
    """The records of one capture, header first, checked as they are iterated (once), by the
    policy above. The header is read when the reader is made, so a file that is no capture
    is refused before anything is shown of it.

    Raises:
        UnreadableCapture: from the constructor (not a capture, an unknown version, a read
            error), and while iterating (a read error; in a `strict` reader, a line that is
            not a record).
    """

    def __init__(self, path: str, lines: Iterable[Line], *, strict: bool = True) -> None:
        self.path = path
        self.strict = strict
        self.line = 0  # the number of the line last read (1-based)
        self.ended = False  # an end record was read
        self.torn: int | None = None  # the torn last line ignored
        self.skipped = 0  # lines that are not records, skipped (a lenient reader)
        self.first_skipped: int | None = None
        self.odd = 0  # records with fields read as absent (`odd_fields`)
        self.odd_names: set[str] = set()
        self.first_odd: int | None = None
        self._lines = iter(lines)
        self._started = False
        self.header = self._first()

    def __repr__(self) -> str:
        return (f"<CaptureReader {self.path!r} line={self.line} ended={self.ended} torn={self.torn} "
                f"skipped={self.skipped}>")

    def _next(self) -> Line | None:
        try:
            line = next(self._lines, None)
        except OSError as exc:
            raise UnreadableCapture(self.path, None, f"cannot read: {exc.strerror or exc}") from None
        if line is not None:
            self.line += 1
        return line

    def _first(self) -> Json:
        line = self._next()
        while line is not None and not isinstance(line, LongLine) and not line.strip():
            line = self._next()
        if line is None:
            raise UnreadableCapture(self.path, None, "empty, not a capture")
        record = None if isinstance(line, LongLine) else self._load(line)
        if (problem := header_problem(record)) is not None:
            raise UnreadableCapture(self.path, self.line, problem)
        assert record is not None
        return record

    def __iter__(self) -> Iterator[Json]:
        if self._started:
            raise RuntimeError("a capture reader is iterated once")
        self._started = True
        yield self.header
        while (line := self._next()) is not None:
            if isinstance(line, LongLine):
                self._not_a_record(line.problem())
                continue
            if not line.strip():
                continue
            record = self._load(line)
            if record is None:
                if isinstance(line, Unterminated) and not self.ended:
                    self.torn = self.line  # a killed bridge's last line: the records end before it
                    return
                self._not_a_record(NOT_A_RECORD)
                continue
            del line  # not held while the record is used: a long line would be held twice
            if record["type"] == "end":
                self.ended = True
            yield record

    def _load(self, line: bytes) -> Json | None:
        # orjson reads bytes, not a subclass of them
        record = load_record(bytes(line) if type(line) is Unterminated else line, checked=False)
        if record is not None and (odd := odd_fields(record)):
            self.odd += 1
            self.odd_names.update(odd)
            if self.first_odd is None:
                self.first_odd = self.line
            for key in odd:
                record.pop(key, None)
        return record

    def _not_a_record(self, problem: str) -> None:
        if self.strict:
            raise UnreadableCapture(self.path, self.line, problem)
        self.skipped += 1
        if self.first_skipped is None:
            self.first_skipped = self.line

    def notes(self) -> list[str]:
        """What to say once the records are read: lines skipped, values read as unknown, a
        torn last line."""
        said = []
        if self.skipped:
            said.append(f"{self.path}: {self.skipped} line(s) that are not capture records were skipped "
                        f"(the first at line {self.first_skipped})")
        if self.odd:
            said.append(f"{self.path}: {self.odd} record(s) hold values of the wrong type or out of range, "
                        f"read as unknown ({', '.join(sorted(self.odd_names))}; the first at line {self.first_odd})")
        if self.torn is not None:
            said.append(f"{self.path}:{self.torn}: the torn last line (the bridge was killed while writing it) "
                        "was ignored")
        return said


def split_lines(data: bytes) -> Iterator[bytes]:
    """The lines of `data` as a file gives them to the reader (a capture held in memory)."""
    lines = data.split(b"\n")
    last = lines.pop()
    yield from lines
    if last:
        yield Unterminated(last)


def load_record(line: bytes, *, checked: bool = True) -> Json | None:
    """One capture line back as a record, or None if it is not one. An id beyond 64 bits
    (written as its digits) is read exactly. Without `checked`, fields of the wrong type
    are left in (for a caller that reads only a few and checks those itself)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    if type(record.get("id")) is float:
        record["id"] = integer_id(line, record["id"])
    return check_fields(record) if checked else record


_NONE = type(None)
_NUMBER, _INT, _TEXT = (int, float), (int,), (str,)

# The fields the readers use, and the exact types each may have (as JSON reads them: `true`
# is a bool, never an int here); a field of another type (a capture edited by hand, or
# written by something else) is dropped, as if absent. Exact types, looked up per field a
# record has: every line a reader reads passes here.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("time", "mono", "latency"), _NUMBER),
    **dict.fromkeys(("seq", "size", "out_size", "records"), _INT),
    **dict.fromkeys(("direction", "kind", "verdict", "raw_b64", "out_b64", "error", "raw"), _TEXT),
    "method": (_NONE, str),
    "session": (_NONE, str, int),
    "rules": (list,),  # of strings
    "out": (_NONE, str),
    "redacted": (str, list),  # WHOLE, or a list of strings
    **dict.fromkeys(("truncated", "unfinished"), (bool,)),
    # `finding` records (docs/health.md)
    **dict.fromkeys(("code", "level", "message"), _TEXT),
    "about": (_NONE, int),
    "count": _INT,
}


# A latency beyond this is no measurement (no bridge runs a year): read as unknown.
MAX_LATENCY = 366 * 86400.0


def plausible_latency(seconds: float) -> bool:
    """Is `seconds` a latency a bridge could have measured (0 to a year)? A capture edited by
    hand may say -2.5 or 1e299; `stats` asks it of the latencies it computes too."""
    return 0 <= seconds <= MAX_LATENCY


def check_fields(record: Json) -> Json:
    """`record` without fields of the wrong type or out of range, so that no reader trips on
    one (`odd_fields`)."""
    for key in odd_fields(record):
        record.pop(key, None)
    return record


def odd_fields(record: Json) -> list[str]:
    """The fields of `record` every reader reads as absent: of the wrong type, and numbers
    out of range (a negative `size` or `out_size`, a latency that is no `plausible_latency`)."""
    types = _FIELD_TYPES
    wrong = [key for key, value in record.items()
             if (allowed := types.get(key)) is not None and type(value) not in allowed]
    for key in ("size", "out_size"):
        value = record.get(key)
        if type(value) is int and value < 0:
            wrong.append(key)
    latency = record.get("latency")
    if isinstance(latency, (int, float)) and not plausible_latency(latency):  # a bool is in `wrong` already
        wrong.append("latency")
    # the items of the two lists, only when there are some (most records have `rules: []`)
    rules = record.get("rules")
    if rules and type(rules) is list and not all(type(item) is str for item in rules):
        wrong.append("rules")
    redacted = record.get("redacted")
    if redacted is not None and (redacted != WHOLE if type(redacted) is str else
                                 type(redacted) is list and not all(type(item) is str for item in redacted)):
        wrong.append("redacted")
    return wrong


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
    """The parsed message of `raw` or `out`, or None when it is not JSON. Text is parsed as
    it is (orjson refuses a lone surrogate in it as in its bytes), not copied into bytes first."""
    text = record.get(key)
    data = text if isinstance(text, str) else record_bytes(record, key)
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
