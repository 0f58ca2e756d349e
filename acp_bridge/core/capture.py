"""Capture records: Forwards in, JSONL bytes out; and back again, for a person to read.

Owns: the capture format (docs/capture-format.md): the header, one record per forwarded
piece, the trailer; redaction (default secrets, configured RFC 6901 pointers, the configured
system prompt); one-line summaries for `show`; the aggregation behind `stats`.
Must never: do IO, read a clock (times are passed in), import trio or click, or touch the
bytes the relay forwards: redaction changes the record only. A line nothing needs to mask is
stored as it came (decoded, never parsed and re-encoded), so `raw` round-trips to its bytes.
"""

from __future__ import annotations

import base64
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge import __version__
from acp_bridge.core import protocol as p
from acp_bridge.core.frames import Direction, Frame, Kind, classify, id_key
from acp_bridge.core.protocol import Json
from acp_bridge.core.relay import Forward, Verdict

FORMAT_VERSION = 1
REDACTED = "<redacted>"
PROMPT_REDACTED = "<redacted: system prompt>"

# -- redaction ------------------------------------------------------------------------------

_ANY = object()  # a path step that matches every item of an array (internal patterns only)
Path = tuple[Any, ...]

# Secrets ACP carries in known places (schema: McpServer env/headers, terminal/create env).
_ALWAYS: tuple[Path, ...] = (
    ("params", "mcpServers", _ANY, "env", _ANY, "value"),
    ("params", "mcpServers", _ANY, "headers", _ANY, "value"),
)
_BY_METHOD: dict[str, tuple[Path, ...]] = {
    p.TERMINAL_CREATE: (("params", "env", _ANY, "value"),),
}
_WHOLE_PARAMS = frozenset({p.AUTHENTICATE, p.AUTH_LOGIN})  # every member of params is masked

_SECRET_OPTIONS = ("--system-prompt",)
_SECRET_WORDS = ("token", "secret", "password", "passwd", "auth", "key", "credential")


def parse_pointer(pointer: str) -> Path:
    """RFC 6901: "" is the whole document; "/a~1b/0" is ("a/b", "0")."""
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON pointer (RFC 6901: starts with /)")
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


def _escape(token: Any) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _array_index(token: str, size: int) -> int | None:
    # RFC 6901 section 4: decimal, no leading zeros; "-" (past the end) never exists.
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        return None
    index = int(token)
    return index if index < size else None


def _mask_path(obj: Any, path: Path, at: int, here: str, hits: list[str], mask: Any) -> Any:
    """`obj` with the value at `path` masked, copied only along the way; hits get pointers."""
    if at == len(path):
        hits.append(here)
        return mask
    step = path[at]
    if step is _ANY:
        if not isinstance(obj, list):
            return obj
        new: list[Any] | None = None
        for index, item in enumerate(obj):
            before = len(hits)
            masked = _mask_path(item, path, at + 1, f"{here}/{index}", hits, mask)
            if len(hits) != before:
                new = new if new is not None else list(obj)
                new[index] = masked
        return obj if new is None else new
    if isinstance(obj, dict):
        if step not in obj:
            return obj
        before = len(hits)
        masked = _mask_path(obj[step], path, at + 1, f"{here}/{_escape(step)}", hits, mask)
        return obj if len(hits) == before else {**obj, step: masked}
    if isinstance(obj, list):
        position = _array_index(step, len(obj))
        if position is None:
            return obj
        before = len(hits)
        masked = _mask_path(obj[position], path, at + 1, f"{here}/{position}", hits, mask)
        if len(hits) == before:
            return obj
        copy = list(obj)
        copy[position] = masked
        return copy
    return obj


def _mask_text(obj: Any, text: str, here: str, hits: list[str]) -> Any:
    """`obj` with every string equal to or containing `text` replaced by PROMPT_REDACTED."""
    if isinstance(obj, str):
        if text in obj:
            hits.append(here)
            return PROMPT_REDACTED
        return obj
    if isinstance(obj, dict):
        new: Any = None
        for key, value in obj.items():
            before = len(hits)
            masked = _mask_text(value, text, f"{here}/{_escape(key)}", hits)
            if len(hits) != before:
                new = new if new is not None else dict(obj)
                new[key] = masked
        return obj if new is None else new
    if isinstance(obj, list):
        new = None
        for index, item in enumerate(obj):
            before = len(hits)
            masked = _mask_text(item, text, f"{here}/{index}", hits)
            if len(hits) != before:
                new = new if new is not None else list(obj)
                new[index] = masked
        return obj if new is None else new
    return obj


@dataclass(frozen=True)
class Redactor:
    """What the capture masks: the defaults, configured pointers, and maybe a private text.

    Args:
        pointers: RFC 6901 pointers matched against each whole message.
        secret: text (the configured system prompt) that must not appear in clear; None if
            it may.
    """

    pointers: tuple[str, ...] = ()
    secret: str | None = None
    _paths: tuple[Path, ...] = field(init=False, repr=False)
    _needles: tuple[bytes, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_paths", tuple(parse_pointer(ptr) for ptr in self.pointers))
        needles: tuple[bytes, ...] = ()
        if self.secret:
            # Without `\u` or `\/` escapes a JSON string has exactly one spelling, so these
            # two substrings (plain and JSON-escaped) find the text wherever it can be.
            plain = self.secret.encode("utf-8")
            needles = (plain, orjson.dumps(self.secret)[1:-1], b"\\u", b"\\/")
        object.__setattr__(self, "_needles", needles)

    def mask(self, msg: Any, *, text: bool = True) -> tuple[Any, list[str]]:
        """The message with secrets masked (the original is never changed), and where.

        `text=False` skips the search for the private text (the caller knows it is absent).
        """
        hits: list[str] = []
        if isinstance(msg, dict):
            for path in _ALWAYS:
                msg = _mask_path(msg, path, 0, "", hits, REDACTED)
            method = msg.get("method")
            if isinstance(method, str):
                for path in _BY_METHOD.get(method, ()):
                    msg = _mask_path(msg, path, 0, "", hits, REDACTED)
                params = msg.get("params")
                if method in _WHOLE_PARAMS and params is not None:
                    masked: Any = REDACTED
                    if isinstance(params, dict):
                        masked = {key: REDACTED for key in params}
                        hits.extend(f"/params/{_escape(key)}" for key in params)
                    else:
                        hits.append("/params")
                    msg = {**msg, "params": masked}
        for path in self._paths:
            msg = _mask_path(msg, path, 0, "", hits, REDACTED)
        if self.secret and text:
            msg = _mask_text(msg, self.secret, "", hits)
        return msg, hits

    def may_hold_secret(self, line: bytes) -> bool:
        """Cheap test: could this line contain the secret text? False is certain."""
        return any(needle in line for needle in self._needles)

    def mask_line(self, line: bytes, msg: Any) -> tuple[bytes, list[str]]:
        """The line with secrets masked; the very same bytes object if nothing was."""
        if msg is None:
            # Not JSON: only the private text can be found, as bytes.
            if not self.secret or not self.may_hold_secret(line):
                return line, []
            out = line
            for needle in self._needles[:2]:
                out = out.replace(needle, PROMPT_REDACTED.encode())
            return (line, []) if out == line else (out, [""])
        masked, hits = self.mask(msg, text=self.may_hold_secret(line))
        if not hits:
            return line, []
        return orjson.dumps(masked) + _terminator(line), hits


def _terminator(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if line.endswith(b"\n") else b""


def _secret_name(name: str) -> bool:
    if name in _SECRET_OPTIONS:
        return True
    looks_named = name.startswith("-") or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None
    return looks_named and any(word in name.lower() for word in _SECRET_WORDS)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """The command line with secret-looking values masked: `--system-prompt X`,
    `--api-key X`, `--token=X`, `API_KEY=X` (the bridge's options and the agent's alike)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if _secret_name(name):
            if eq:
                out.append(f"{name}={REDACTED}")
                continue
            hide_next = name.startswith("-")
        out.append(arg)
    return out


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


class CaptureEncoder:
    """Turns Forward batches into record lines, numbering them. No IO: the shell writes."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self.redactor = redactor or Redactor()
        self.seq = 0

    def __repr__(self) -> str:
        return f"<CaptureEncoder seq={self.seq} {self.redactor!r}>"

    def encode_batch(self, wall: float, mono: float, forwards: Iterable[Forward]) -> bytes:
        """Every forward of one read as record lines, ready for a single write."""
        # One growing buffer rather than a list of small bytes objects: each record's bytes
        # are freed at once and their memory reused, which measured ~0.6 us a line faster.
        out = bytearray()
        for fwd in forwards:
            if fwd.count > 1:  # a run of untouched lines: one record a line
                self._encode_run(fwd, wall, mono, out)
            else:
                out += dumps(self.record(fwd, wall, mono))
        return bytes(out)

    def _encode_run(self, fwd: Forward, wall: float, mono: float, out: bytearray) -> None:
        """The records of a run, on a lean path: the relay already knows that each line
        starts like an object, has no id and concerns no rule, so each is a notification
        (or not JSON at all) that was passed on as it came."""
        redactor = self.redactor
        direction = fwd.direction.value
        body = fwd.raw
        if redactor.pointers or b"mcpServers" in body or (redactor.secret and redactor.may_hold_secret(body)):
            # Masking may apply somewhere in the run: take the full path for every line.
            for piece in fwd.lines():
                out += dumps(self.record(piece, wall, mono))
            return
        seq = self.seq
        loads = orjson.loads
        lines = body.split(b"\n")
        lines.pop()  # a run ends with its last line's terminator
        for line in lines:
            line += b"\n"
            try:
                msg = loads(line)
                text = line.decode("utf-8")
                method = msg["method"]
                params = msg.get("params")
            except (orjson.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
                method = None
            if type(method) is not str:  # not a plain notification: the full path decides
                self.seq = seq
                out += dumps(self.record(Forward(fwd.direction, line, line, Verdict.PASS), wall, mono))
                seq = self.seq
                continue
            seq += 1
            session = params.get("sessionId") if type(params) is dict else None
            if session is not None and (type(session) is not str and type(session) is not int):
                session = None
            out += dumps({
                "type": "message", "seq": seq, "time": wall, "mono": mono,
                "direction": direction, "kind": "notification", "verdict": "pass",
                "method": method, "id": None, "session": session, "rules": [],
                "size": len(line), "raw": text,
            })
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


# -- reading ----------------------------------------------------------------------------------


def load_record(line: bytes) -> Json | None:
    """One capture line back as a record, or None if it is not one."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("type"), str) else None


def record_bytes(record: Json, key: str) -> bytes | None:
    """`raw` or `out` of a record as bytes (None: absent; for `out`, null means dropped)."""
    if key in record:
        text = record[key]
        return text.encode("utf-8") if isinstance(text, str) else None
    encoded = record.get(f"{key}_b64")
    return base64.b64decode(encoded) if isinstance(encoded, str) else None


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
    return time.strftime("%H:%M:%S", time.gmtime(wall)) + f".{int(wall * 1000) % 1000:03d}"


def local_clock(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall)) + f".{int(wall * 1000) % 1000:03d}"


def _fmt_id(id_: Any) -> str:
    return orjson.dumps(id_).decode() if not isinstance(id_, int) or isinstance(id_, bool) else str(id_)


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
        label = "(part of a line over the parse limit)"
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
    if record.get("redacted"):
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
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def _body(record: Json, key: str) -> str:
    """The interesting part of a message: params, result or error; else the whole line."""
    msg = record_message(record, key)
    if isinstance(msg, dict):
        for part in ("params", "result", "error"):
            if part in msg:
                return pretty(msg[part])
        return pretty(msg)
    data = record_bytes(record, key)
    return repr(data) if data is not None else "(nothing)"


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
    msg = record_message(record, key)
    if msg is not None:
        return pretty(msg)
    data = record_bytes(record, key)
    return repr(data) if data is not None else "(nothing)"


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
        except TypeError:
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
