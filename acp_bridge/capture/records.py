"""Capture records: Forwards in, JSONL bytes out (docs/capture-format.md).

Owns: the header record, one record per forwarded line (one for a whole line over the
parse limit, however many pieces it went out in: its head and size are gathered in
`long_line_records`), and the trailer: the general path, which parses and masks each line.
Runs of untouched lines take the lean path (`runs`) unless the encoder is made with
`lean=False`. Redaction lives in `redaction`, reading in `reader`, masking a record again to
serve it in `masking`.
Must never: do IO, read a clock (times are passed in), import trio or click, touch the bytes
the relay forwards (redaction changes the record only), or raise on anything from the wire:
a record that cannot be written as it should be is still written, with what could be. A line
nothing needs to mask is stored as it came (decoded, never parsed and re-encoded), so `raw`
round-trips to its bytes.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from acp_bridge import __version__
from acp_bridge.capture.long_line_records import LongLineRecords, long_record
from acp_bridge.capture.masking import withhold
from acp_bridge.capture.reader import FORMAT_VERSION
from acp_bridge.capture.redaction import REDACTED, Redactor
from acp_bridge.capture.runs import LeanRuns
from acp_bridge.capture.text_redaction import mask_argv
from acp_bridge.core.literals import written_id
from acp_bridge.core.messages import Direction, Frame, Kind, classify
from acp_bridge.core.protocol import Json
from acp_bridge.core.relay import Forward, Verdict
from acp_bridge.core.shapes import session_named

MAX_MASKED_ERRORS = 1000  # rule errors remembered to mask the findings that quote them
ERROR_START = 40  # characters of an error that a finding always quotes in full
FINDING_TAIL = " (the message went on as it came)"  # after the error, in a rule-failed finding


# Enum values by member: a dict lookup costs less than Enum's `.value` descriptor.
_VALUES: dict[Any, str] = {member: member.value for enum in (Direction, Kind, Verdict) for member in enum}

# -- writing ----------------------------------------------------------------------------------


def _put_text(record: Json, key: str, data: bytes) -> None:
    try:
        record[key] = data.decode("utf-8")
    except UnicodeDecodeError:
        record[f"{key}_b64"] = base64.b64encode(data).decode("ascii")


def utf8_safe(text: str) -> str:
    """`text` as valid UTF-8: a command-line argument or a value read by the stdlib may
    hold lone surrogates, which orjson refuses to write. A byte that was not UTF-8 (U+DC80
    to U+DCFF, as Python reads argv) becomes `\\xNN`, any other surrogate `\\uXXXX`."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    return "".join(_surrogate_text(ord(c)) if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def _surrogate_text(code: int) -> str:
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def _utc_text(wall: float) -> str:
    """ISO 8601 UTC to the second (`2025-01-02T03:04:05Z`) of a Unix time; the shell reads
    the clock, and no time zone is looked up."""
    return datetime.fromtimestamp(math.floor(wall), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def header_record(*, wall: float, mono: float, argv: Sequence[str], config_digest: str,
                  pid: int, redact: Sequence[str] = (), include_system_prompt: bool = False,
                  chain: dict[str, str] | None = None) -> Json:
    """The first record of every capture. `chain`: the bridge ran as a component of a proxy
    chain (its role and the conductor's dialect), absent otherwise."""
    header: Json = {
        "type": "header",
        "format": FORMAT_VERSION,
        "bridge": __version__,
        "started": _utc_text(wall),
        "time": wall,
        "mono": mono,
        "pid": pid,
        "argv": [utf8_safe(arg) for arg in mask_argv(argv)],
        "config": config_digest,
        "redact": list(redact),
        "include_system_prompt": include_system_prompt,
    }
    if chain is not None:
        header["chain"] = dict(chain)
    return header


def dumps(record: Json) -> bytes:
    """One record as one JSONL line."""
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def _encodable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


def safe_dumps(record: Json) -> bytes:
    """`dumps`, for a record that may hold what cannot be written (an id nested past 254
    levels, a method with a lone surrogate): those values give way, and it is said in
    `error`; an integer id past 64 bits is written with all its digits. Never raises."""
    try:
        return dumps(record)
    except TypeError:
        pass
    record = dict(record)
    notes = []
    for key in ("id", "session"):
        if type(record.get(key)) is int:  # past 64 bits (a finding names an id as written): all its digits
            record[key] = orjson.Fragment(str(record[key]))
        if key in record and not _encodable(record[key]):
            record[key] = None
            notes.append(f"capture: the {key} cannot be written (nested too deep, or not UTF-8)")
    for key in ("method", "error"):
        if isinstance(record.get(key), str):
            record[key] = utf8_safe(record[key])
    if "rules" in record:  # a message's (a finding has none)
        record["rules"] = [utf8_safe(str(rule)) for rule in record.get("rules") or ()]
    if notes:
        record["error"] = "; ".join([record["error"], *notes] if record.get("error") else notes)
    try:
        return dumps(record)
    except TypeError:
        return dumps({"type": record.get("type"), "seq": record.get("seq"), "time": record.get("time"),
                      "mono": record.get("mono"), "error": "capture: this record cannot be written"})


class CaptureEncoder:
    """Turns Forward batches into record lines, numbering them. No IO: the shell writes.

    Args:
        redactor: what the records mask (the defaults when None).
        lean: record runs of untouched lines on the lean path (`lean.LeanRuns`); False
            records each of their lines on the general path, which writes the same bytes
            (the property in tests/capture/test_runs.py compares the two), slower.
    """

    def __init__(self, redactor: Redactor | None = None, *, lean: bool = True) -> None:
        self.redactor = redactor or Redactor()
        self.seq = 0
        self._runs = LeanRuns(self.redactor) if lean else None
        self._long = LongLineRecords(self.redactor)  # lines over the parse limit, by direction
        # Errors of rules that failed on lines holding a secret, as written and as masked:
        # a finding about one quotes it (`mask_finding`). The first MAX_MASKED_ERRORS.
        self._masked_errors: dict[str, str] = {}
        self._too_many_masked_errors = False

    def __repr__(self) -> str:
        return f"<CaptureEncoder seq={self.seq} lean={self._runs is not None} {self.redactor!r}>"

    def mask_finding(self, record: Json) -> Json:
        """A finding's record with the error of a rule that failed on a line holding a
        secret masked as that line's record has it (`ValueError: <redacted>`): the
        health engine quotes the error, cut short, before `FINDING_TAIL`."""
        text = record.get("message")
        if record.get("code") != "rule-failed" or not isinstance(text, str):
            return record
        end = text.rfind(FINDING_TAIL)
        end = len(text) if end < 0 else end
        for error, masked in self._masked_errors.items():
            at = text.find(error[:ERROR_START])
            if 0 <= at < end:
                return {**record, "message": text[:at] + masked + text[end:]}
        if self._too_many_masked_errors:
            return {**record, "message": f"a rule failed: {REDACTED}{text[end:]}"}
        return record

    def encode_batch(self, wall: float, mono: float, forwards: Iterable[Forward]) -> bytes:
        """Every forward of one read as record lines, ready for a single write. Never
        raises: whatever the forwards hold, each line gets a record."""
        # One growing buffer rather than a list of small bytes objects: each record's bytes
        # are freed at once and their memory reused, which measured ~0.6 us a line faster.
        out = bytearray()
        opaque = Verdict.OPAQUE
        runs = self._runs
        for fwd in forwards:
            mark, seq = len(out), self.seq
            try:
                if fwd.verdict is opaque:  # a piece of a long line: one record a line
                    self._long_piece(fwd, wall, mono, out)
                elif fwd.untouched_lines:  # a run of untouched lines: one record a line
                    if runs is not None:
                        runs.encode(self, fwd, wall, mono, out)
                    else:
                        for line in fwd.lines():
                            out += self.full_record(line, wall, mono)
                else:
                    record = self.record(fwd, wall, mono)
                    try:
                        out += dumps(record)
                    except TypeError:
                        out += safe_dumps(record)
            except Exception:  # a capture bug: each line on the full path, which cannot fail
                del out[mark:]
                self.seq = seq
                for line in fwd.lines():
                    out += self.full_record(line, wall, mono)
        return bytes(out)

    def full_record(self, fwd: Forward, wall: float, mono: float) -> bytes:
        """The record line of one forwarded piece on the general path (never raises)."""
        return safe_dumps(self.record(fwd, wall, mono))

    def _long_piece(self, fwd: Forward, wall: float, mono: float, out: bytearray) -> None:
        """Take one piece of a line over the parse limit (`long_line_records`); its record
        comes with the last."""
        long = self._long.take(fwd)
        if long is not None:
            self.seq += 1
            out += safe_dumps(long_record(self.seq, fwd.direction, long, wall, mono))

    def trailer(self, wall: float, mono: float, **facts: Any) -> bytes:
        """The records of long lines cut short (`unfinished`), then the `end` record."""
        out = bytearray()
        for direction, long in self._long.cut_short():
            self.seq += 1
            out += safe_dumps(long_record(self.seq, direction, long, wall, mono, unfinished=True))
        out += safe_dumps({"type": "end", "time": wall, "mono": mono, "records": self.seq, **facts})
        return bytes(out)

    def record(self, fwd: Forward, wall: float, mono: float) -> Json:
        """The record of one forwarded piece (never raises: a bad record is still a record)."""
        self.seq += 1
        try:
            return self._record(fwd, wall, mono)
        except Exception as exc:  # a capture bug must not lose the line or stop the relay
            record = self._base(fwd, wall, mono, Kind.OTHER)
            withheld = False
            if fwd.verdict is not Verdict.EMIT:
                withheld |= self._put_masked(record, "raw", fwd.raw, None) is None
            if fwd.data != fwd.raw:
                if fwd.verdict is Verdict.DROP or not fwd.data:
                    record["out"] = None
                else:
                    withheld |= self._put_masked(record, "out", fwd.data, None) is None
                record["out_size"] = len(fwd.data)
            if withheld:
                withhold(record)
            record["error"] = f"capture: {type(exc).__name__}: {exc}"
            return record

    def _put_masked(self, record: Json, key: str, data: bytes, msg: Any) -> list[str] | None:
        """Put `data`, masked, in `record` as `key`; return the pointers masked, or None
        when it was withheld whole."""
        masked, hits = self.redactor.mask_line(data, msg)
        _put_text(record, key, masked)
        return hits

    def _base(self, fwd: Forward, wall: float, mono: float, kind: Kind) -> Json:
        return {
            "type": "message", "seq": self.seq, "time": wall, "mono": mono,
            "direction": _VALUES[fwd.direction], "kind": _VALUES[kind], "verdict": _VALUES[fwd.verdict],
            "method": None, "id": None, "session": None, "rules": list(fwd.rules) if fwd.rules else [],
            "size": len(fwd.raw),
        }

    def _record(self, fwd: Forward, wall: float, mono: float) -> Json:
        frame: Frame | None = fwd.frame
        if fwd.verdict is Verdict.EMIT:
            frame = classify(fwd.direction, fwd.data)
        elif frame is None and fwd.verdict is not Verdict.OPAQUE:
            frame = classify(fwd.source, fwd.raw)  # the relay had no reason to parse it
        kind = frame.kind if frame is not None else Kind.OTHER
        msg = frame.msg if frame is not None else None
        record = self._base(fwd, wall, mono, kind)
        request = fwd.request
        if kind is Kind.RESPONSE:
            if request is not None:
                record["method"] = request.method
                record["latency"] = round(mono - request.at, 6)
        elif frame is not None:
            record["method"] = frame.method
        if kind in (Kind.REQUEST, Kind.RESPONSE) and isinstance(msg, dict):
            id_ = msg.get("id")
            if type(id_) is float:  # maybe an integer beyond 64 bits: as written
                id_ = written_id(fwd.data if fwd.verdict is Verdict.EMIT else fwd.raw, id_)
            record["id"] = id_
        record["session"] = session_named(msg, response=kind is Kind.RESPONSE,
                                          request_session=request.session_id if request is not None else None)
        hits = self._put_texts(record, fwd, frame, msg)
        if hits is None:
            withhold(record)
        elif hits:
            record["redacted"] = sorted(set(hits))
        if fwd.error is not None:
            record["error"] = self._error_as_recorded(fwd.error, masked=hits != [])
        if fwd.before:
            record["before"] = True
        return record

    def _put_texts(self, record: Json, fwd: Forward, frame: Frame | None, msg: Any) -> list[str] | None:
        """The line as it came (`raw`) and as it went (`out`), masked, into `record`: the
        pointers masked, or None when a line had to be withheld whole."""
        hits: list[str] = []
        withheld = False
        if fwd.verdict is not Verdict.EMIT:
            parsed = msg if msg is not None or frame is None else frame.batch
            raw, raw_hits = self.redactor.mask_line(fwd.raw, parsed)
            _put_text(record, "raw", raw)
            if raw_hits is None:
                withheld = True
            elif raw_hits:
                hits += raw_hits
        if fwd.data is not fwd.raw and fwd.data != fwd.raw:
            if fwd.verdict is Verdict.DROP or not fwd.data:
                record["out"] = None
            else:
                if fwd.verdict is Verdict.EMIT:  # a batch (the chain's answer to one) is read as one, too
                    out_msg = msg if msg is not None or frame is None else frame.batch
                else:
                    try:
                        out_msg = orjson.loads(fwd.data)
                    except orjson.JSONDecodeError:
                        out_msg = None
                out_hits = self._put_masked(record, "out", fwd.data, out_msg)
                if out_hits is None:
                    withheld = True
                else:
                    hits += out_hits
            record["out_size"] = len(fwd.data)
        return None if withheld else hits

    def _error_as_recorded(self, error: str, *, masked: bool) -> str:
        """A rule's exception as the record keeps it: it may quote the value it failed on, so
        on a line that held a secret only what failed is kept ("ValueError: <redacted>")."""
        if not masked:
            return error
        recorded = f"{error.partition(': ')[0]}: {REDACTED}"
        if error not in self._masked_errors:
            if len(self._masked_errors) < MAX_MASKED_ERRORS:
                self._masked_errors[error] = recorded
            else:
                self._too_many_masked_errors = True
        return recorded
