"""Capture records: Forwards in, JSONL bytes out (docs/capture-format.md).

Owns: the header record, one record per forwarded line, the trailer, and the lean path for
runs of untouched lines. Redaction lives in `redaction`, reading in `capture_read`.
Must never: do IO, read a clock (times are passed in), import trio or click, or touch the
bytes the relay forwards: redaction changes the record only. A line nothing needs to mask is
stored as it came (decoded, never parsed and re-encoded), so `raw` round-trips to its bytes.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from acp_bridge import __version__
from acp_bridge.core import protocol as p
from acp_bridge.core.frames import Frame, Kind, classify
from acp_bridge.core.protocol import Json
from acp_bridge.core.redaction import (
    MASKED_METHODS,
    PROMPT_REDACTED,
    REDACTED,
    Redactor,
    mask_argv,
)
from acp_bridge.core.relay import Forward, Verdict

__all__ = ["FORMAT_VERSION", "PROMPT_REDACTED", "REDACTED", "CaptureEncoder", "Redactor",
           "dumps", "header_record", "mask_argv"]

FORMAT_VERSION = 1

# -- writing ----------------------------------------------------------------------------------


def _put_text(record: Json, key: str, data: bytes) -> None:
    try:
        record[key] = data.decode("utf-8")
    except UnicodeDecodeError:
        record[f"{key}_b64"] = base64.b64encode(data).decode("ascii")


def _session_of(msg: Any, kind: Kind, request: Any) -> Any:
    session = p.get_path(msg, "params", "sessionId")
    if session is None and kind is Kind.RESPONSE:
        session = p.get_path(msg, "result", "sessionId")
        if session is None and request is not None:
            session = request.session_id
    return session if isinstance(session, (str, int)) and not isinstance(session, bool) else None


def header_record(*, wall: float, mono: float, argv: Sequence[str], config_digest: str,
                  pid: int, redact: Sequence[str] = (), include_system_prompt: bool = False) -> Json:
    """The first record of every capture."""
    return {
        "type": "header",
        "format": FORMAT_VERSION,
        "bridge": __version__,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall)),
        "time": wall,
        "mono": mono,
        "pid": pid,
        "argv": mask_argv(argv),
        "config": config_digest,
        "redact": list(redact),
        "include_system_prompt": include_system_prompt,
    }


def dumps(record: Json) -> bytes:
    """One record as one JSONL line."""
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


# -- the lean path for runs -------------------------------------------------------------------

# Bytes looked for with `in` as ints: `b"x" in data` first tries b"x" as an int, which costs
# more than the search. _CONTROLS: what a JSON string cannot hold as it is, but "\n".
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_CONTROLS = bytes(code for code in range(0x20) if code != ord("\n"))
# A JSON string body with no control character and no \u escape (a line with one is never
# in a run): orjson reads it if it is UTF-8, and writes its text escaping only \ and ".
_STRING_BODY = re.compile(rb'[^"\\\x00-\x1f]*(?:\\["\\/bfnrt][^"\\\x00-\x1f]*)*')


def _record_format(clock: bytes, method: str, session: Any, prefix: bytes = b"",
                   suffix: bytes = b"") -> bytes:
    """What `dumps(record(...))` writes for a notification of a run, passed on as it came,
    as a bytes format of its seq, its size and the escaped text of the line (without its
    terminator) between `prefix` and `suffix`. `clock`: the time, mono and direction fields."""
    parts = (clock, orjson.dumps(method), orjson.dumps(session), prefix, suffix)
    return (b'{"type":"message","seq":%%d%b,"kind":"notification","verdict":"pass","method":%b,'
            b'"id":null,"session":%b,"rules":[],"size":%%d,"raw":"%b%%b%b\\n"}\n'
            % tuple(part.replace(b"%", b"%%") for part in parts))


def _plain_notification(line: bytes) -> tuple[str, Any, bytes] | None:
    """The method, session and escaped text (see `_record_format`) of a line that is a
    notification with nothing to mask (but maybe mcpServers, or what a pointer names)."""
    try:
        msg = orjson.loads(line)
        text = line.decode("utf-8")
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return None
    if type(msg) is not dict or "id" in msg:
        return None
    method = msg.get("method")
    if type(method) is not str or method in MASKED_METHODS:
        return None
    params = msg.get("params")
    session = params.get("sessionId") if type(params) is dict else None
    if type(session) is not str and type(session) is not int:
        session = None
    return method, session, orjson.dumps(text)[1:-1]


def _last_string(line: bytes) -> tuple[int, int]:
    """Where the body of the last string of `line`, a JSON text, starts and ends: a quote in
    a string is escaped, and no backslash comes before the quote that opens one."""
    end = line.rfind(b'"')
    start = line.rfind(b'"', 0, end)
    while start > 0 and line[start - 1] == _BACKSLASH:
        start = line.rfind(b'"', 0, start)
    return start + 1, end


def _escaped(body: bytes) -> bytes | None:
    """The text of a JSON string body escaped as in `raw`, or None if it is not a body
    `_STRING_BODY` allows."""
    if _STRING_BODY.fullmatch(body) is None:
        return None
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return body.replace(b"\\", b"\\\\").replace(b'"', b'\\"')


@dataclass(frozen=True, slots=True)
class _Template:
    """Lines that differ only in the body of one string (the text of streamed chunks): a
    line that fits is recorded with no parse, which is most of the cost of a record."""

    prefix: bytes  # up to the body of the string
    suffix: bytes  # from its closing quote on, without the terminator
    method: str
    session: Any

    @classmethod
    def make(cls, prefix: bytes, suffix: bytes) -> _Template | None:
        """The template of the lines cut like a plain notification around the body of its
        last string (`_last_string`); None if the string is a key, the method or the session.

        The notification is from a run where only its method could call for masks (see
        `_encode_run`). `#` is valid JSON inside a string only: so if the line is a plain
        notification with `#` and with `##` as that body, it is with any body `_STRING_BODY`
        allows (and orjson checks the UTF-8 and the nesting of the rest just the same).
        """
        if suffix[1:].lstrip(b" \t\r\n").startswith(b":"):
            return None  # a key: another key would make another message
        first, second = (_plain_notification(prefix + body + suffix) for body in (b"#", b"##"))
        if first is None or second is None or first[:2] != second[:2]:
            return None
        return cls(prefix, suffix, *first[:2])

    def record_format(self, clock: bytes) -> bytes:
        """`_record_format` for the lines that fit, of the escaped body of their string."""
        return _record_format(clock, self.method, self.session,
                              orjson.dumps(self.prefix.decode())[1:-1],
                              orjson.dumps(self.suffix.decode())[1:-1])


class CaptureEncoder:
    """Turns Forward batches into record lines, numbering them. No IO: the shell writes."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self.redactor = redactor or Redactor()
        self.seq = 0
        self._template: _Template | None = None  # what the streamed notifications look like

    def __repr__(self) -> str:
        return f"<CaptureEncoder seq={self.seq} {self.redactor!r}>"

    def encode_batch(self, wall: float, mono: float, forwards: Iterable[Forward]) -> bytes:
        """Every forward of one read as record lines, ready for a single write."""
        # One growing buffer rather than a list of small bytes objects: each record's bytes
        # are freed at once and their memory reused, which measured ~0.6 us a line faster.
        out = bytearray()
        for fwd in forwards:
            if fwd.run:  # a run of untouched lines: one record a line
                self._encode_run(fwd, wall, mono, out)
            else:
                out += dumps(self.record(fwd, wall, mono))
        return bytes(out)

    def _encode_run(self, fwd: Forward, wall: float, mono: float, out: bytearray) -> None:
        """The records of a run, on a lean path: the relay already knows that each line
        starts like an object, has no id and concerns no rule, so nearly all are
        notifications passed on as they came. A line that fits the template is recorded
        unparsed; any other is parsed, and takes the full path unless it is a notification
        with nothing to mask. Two of those in a row that differ only in the body of their
        last string make the template (see `_Template`)."""
        redactor = self.redactor
        body = fwd.raw
        if redactor.secret and redactor.may_hold_secret(body):
            for piece in fwd.lines():  # the text to mask may be anywhere: the full path finds it
                out += dumps(self.record(piece, wall, mono))
            return
        # With no backslash, control character or non-ASCII byte in the run, the body of a
        # line that fits is a valid string body, and its own escaped text, unless it holds a quote.
        simple = _BACKSLASH not in body and body.isascii() and not any(c in body for c in _CONTROLS)
        clock = b',"time":%b,"mono":%b,"direction":%b' % (
            orjson.dumps(wall), orjson.dumps(mono), orjson.dumps(fwd.direction.value))
        template = self._template
        if template is not None:  # in locals: read for every line
            prefix, suffix, fmt = template.prefix, template.suffix, template.record_format(clock)
            start, stop = len(prefix), len(suffix)
        formats: dict[tuple[str, Any], bytes] = {}  # of parsed notifications, by method, session
        full = None  # whether every parsed line takes the full path (known at the first)
        cut = None  # the last parsed notification, cut around its last string
        # Looking for two alike costs ~0.5 us a parsed line: a run that shows none in its first
        # lines to parse is unlikely to, and one whose lines all differ must not pay it for each.
        looks = 16
        seq = self.seq
        lines = body.split(b"\n")
        lines.pop()  # a run ends with its last line's terminator
        for line in lines:
            # endswith from `start`: the prefix and the suffix must not overlap.
            if template is not None and line.startswith(prefix) and line.endswith(suffix, start):
                text = line[start:len(line) - stop]
                raw = _escaped(text) if not simple or _QUOTE in text else text
                if raw is not None:
                    seq += 1
                    out += fmt % (seq, len(line) + 1, raw)
                    continue
            if full is None:  # could a parsed line need more masks than its method's?
                full = bool(redactor.pointers) or b"mcpServers" in body or (
                    _BACKSLASH in body and b"\\u" in body)  # \u can spell any key
            plain = None if full else _plain_notification(line)
            if plain is None:
                self.seq = seq
                line += b"\n"
                out += dumps(self.record(Forward(fwd.direction, line, line, Verdict.PASS), wall, mono))
                seq = self.seq
                continue
            method, session, raw = plain
            seq += 1
            plain_fmt = formats.get((method, session))
            if plain_fmt is None:
                plain_fmt = formats[method, session] = _record_format(clock, method, session)
            out += plain_fmt % (seq, len(line) + 1, raw)
            if looks:
                looks -= 1
                body_start, body_end = _last_string(line)
                here = (line[:body_start], line[body_end:])
                if here == cut:  # two parsed alike: more are likely to come
                    made = _Template.make(*here)
                    if made is None:  # nor would the lines like them make one: stop looking
                        looks = 0
                    else:
                        template = self._template = made
                        prefix, suffix, fmt = made.prefix, made.suffix, made.record_format(clock)
                        start, stop = len(prefix), len(suffix)
                cut = here
        self.seq = seq

    def trailer(self, wall: float, mono: float, **facts: Any) -> bytes:
        return dumps({"type": "end", "time": wall, "mono": mono, "records": self.seq, **facts})

    def record(self, fwd: Forward, wall: float, mono: float) -> Json:
        """The record of one forwarded piece (never raises: a bad record is still a record)."""
        self.seq += 1
        try:
            return self._record(fwd, wall, mono)
        except Exception as exc:  # a capture bug must not lose the line or stop the relay
            record = self._base(fwd, wall, mono, Kind.OTHER)
            _put_text(record, "raw", fwd.raw)
            record["error"] = f"capture: {type(exc).__name__}: {exc}"
            return record

    def _base(self, fwd: Forward, wall: float, mono: float, kind: Kind) -> Json:
        return {
            "type": "message", "seq": self.seq, "time": wall, "mono": mono,
            "direction": fwd.direction.value, "kind": kind.value, "verdict": fwd.verdict.value,
            "method": None, "id": None, "session": None, "rules": list(fwd.rules),
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
            record["id"] = msg.get("id")
        record["session"] = _session_of(msg, kind, request)

        hits: list[str] = []
        if fwd.verdict is not Verdict.EMIT:
            raw, raw_hits = self.redactor.mask_line(fwd.raw, msg)
            hits += raw_hits
            _put_text(record, "raw", raw)
        if fwd.data is not fwd.raw and fwd.data != fwd.raw:
            if fwd.verdict is Verdict.DROP or not fwd.data:
                record["out"] = None
            else:
                try:
                    out_msg = orjson.loads(fwd.data)
                except orjson.JSONDecodeError:
                    out_msg = None
                out, out_hits = self.redactor.mask_line(fwd.data, out_msg)
                hits += out_hits
                _put_text(record, "out", out)
            record["out_size"] = len(fwd.data)
        if hits:
            record["redacted"] = sorted(set(hits))
        if fwd.error is not None:
            record["error"] = fwd.error
        return record
