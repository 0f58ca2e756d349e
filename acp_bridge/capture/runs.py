"""The lean path for runs of untouched lines: most records written from a template, unparsed.

Owns: recording a run (the relay's `Forward` with `untouched_lines`: lines that start like an
object, hold no id, no `\\u` escape and nothing a rule looks for) at a fraction of the cost
of the general path: a plain notification's record is a bytes format, and the lines streamed
alike but for the body of one string (agent message chunks) fit a template with no parse.
Must never: write a record the general path would not write byte for byte. The general
encoder (`records.CaptureEncoder`) turns this path off with `lean=False`, and a property
(tests/capture/test_runs.py) compares the two on runs built to find where they could differ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from acp_bridge.capture.redaction import MASKED_METHODS, Redactor
from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.literals import blank_escapes

# The one spelling of the member name "method" in a line without `\u` escapes.
_METHOD_KEY = b'"method"'

# Bytes looked for with `in` as ints: `b"x" in data` first tries b"x" as an int, which costs
# more than the search. _CONTROLS: what a JSON string cannot hold as it is, but "\n".
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_CONTROLS = bytes(code for code in range(0x20) if code != ord("\n"))
# A JSON string body with no control character and no \u escape (a line with one is never
# in a run): orjson reads it if it is UTF-8, and writes its text escaping only \ and ".
# A check of its own beside the scans' `literals.blank_escapes`, which only finds a string's
# end: a body that fits a template must also be valid (these escapes, no control character),
# and this tells both in one C-speed match per line, with no copy.
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


def _needs_full_path(redactor: Redactor, body: bytes) -> bool:
    """Could a parsed line of the run `body` need more masks than its method's (so that
    every parsed line takes the full path)?"""
    return bool(redactor.pointers) or b"mcpServers" in body or (
        _BACKSLASH in body and b"\\u" in body)  # \u can spell any key


def _plain_notification(line: bytes) -> tuple[str, Any, bytes] | None:
    """The method, session and escaped text (see `_record_format`) of a line that is a
    notification with nothing to mask (but maybe mcpServers, or what a pointer names).
    `line` is from a run of a chunk without `\\u` escapes (see `_encode_run`)."""
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
    # orjson keeps the last of two members with one name: an earlier "method" could still
    # make it one of those. Without \u escapes, the name has this one spelling.
    first = line.find(_METHOD_KEY)
    if line.find(_METHOD_KEY, first + len(_METHOD_KEY)) >= 0:
        return None
    params = msg.get("params")
    session = params.get("sessionId") if type(params) is dict else None
    if type(session) is not str and type(session) is not int:
        session = None
    return method, session, orjson.dumps(text)[1:-1]


def _last_string(line: bytes) -> tuple[int, int]:
    """Where the body of the last string of `line`, a JSON text, starts and ends."""
    view = blank_escapes(line)
    end = view.rfind(b'"')
    return view.rfind(b'"', 0, end) + 1, end


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


class FullPath(Protocol):
    """The general encoder as the lean path uses it: its record count, and one line's record
    on the full path (parsed, masked, numbered)."""

    seq: int

    def full_record(self, fwd: Forward, wall: float, mono: float) -> bytes:
        """The record line of one line (a Forward of its own), numbered `seq + 1`."""


class LeanRuns:
    """Records of runs, on the lean path; keeps the template across runs (and directions)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.template: _Template | None = None  # what the streamed notifications look like

    def __repr__(self) -> str:
        return f"<LeanRuns template={self.template is not None}>"

    def encode(self, encoder: FullPath, fwd: Forward, wall: float, mono: float, out: bytearray) -> None:
        """The records of a run, on a lean path: the relay already knows that each line
        starts like an object, has no id and concerns no rule, so nearly all are
        notifications passed on as they came. A line that fits the template is recorded
        unparsed; any other is parsed, and takes the full path unless it is a notification
        with nothing to mask. Two of those in a row that differ only in the body of their
        last string make the template (see `_Template`). `encoder` numbers the records and
        writes those of the lines on the full path."""
        redactor = self.redactor
        body = fwd.raw
        if redactor.secret and redactor.may_contain_secret_text(body):
            for piece in fwd.lines():  # the text to mask may be anywhere: the full path finds it
                out += encoder.full_record(piece, wall, mono)
            return
        # With no backslash, control character or non-ASCII byte in the run, the body of a
        # line that fits is a valid string body, and its own escaped text, unless it holds a quote.
        simple = _BACKSLASH not in body and body.isascii() and not any(c in body for c in _CONTROLS)
        clock = b',"time":%b,"mono":%b,"direction":%b' % (
            orjson.dumps(wall), orjson.dumps(mono), orjson.dumps(fwd.direction.value))
        encoder.seq = self._encode_lines(encoder, fwd, simple, clock, (wall, mono), out)

    def _encode_lines(self, encoder: FullPath, fwd: Forward, simple: bool, clock: bytes,
                      times: tuple[float, float], out: bytearray) -> int:
        """The records of the run's lines (see `encode`); the last seq given."""
        wall, mono = times
        body = fwd.raw
        template = self.template
        if template is not None:  # in locals: read for every line
            prefix, suffix, fmt = template.prefix, template.suffix, template.record_format(clock)
            start, stop = len(prefix), len(suffix)
        formats: dict[tuple[str, Any], bytes] = {}  # of parsed notifications, by method, session
        full = None  # whether every parsed line takes the full path (known at the first)
        cut = None  # the last parsed notification, cut around its last string
        # Looking for two alike costs ~0.5 us a parsed line: a run that shows none in its first
        # lines to parse is unlikely to, and one whose lines all differ must not pay it for each.
        looks = 16
        seq = encoder.seq
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
            if full is None:
                full = _needs_full_path(self.redactor, body)
            plain = None if full else _plain_notification(line)
            if plain is None:
                encoder.seq = seq
                line += b"\n"
                out += encoder.full_record(Forward(fwd.direction, line, line, Verdict.PASS), wall, mono)
                seq = encoder.seq
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
                        template = self.template = made
                        prefix, suffix, fmt = made.prefix, made.suffix, made.record_format(clock)
                        start, stop = len(prefix), len(suffix)
                cut = here
        return seq
