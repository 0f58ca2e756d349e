"""The rules re-run offline: a capture's incoming lines fed through today's rules and options,
and what would go out now compared with what the capture recorded going out.

Owns: feeding the recorded incoming lines of both directions, in recorded order, to a fresh
`Relay` built from the rules' settings (a `Config`, settled by the CLI); recording what it
sends as capture records, masked the way the capture was (its header's pointers and its
system-prompt choice, with the configured pointers on top), so that like is compared with
like; the differences, one per message; and the re-run written as a capture (`--write`).
Must never: do IO, read a clock (the recorded times are used), import trio or click, or
count as a difference what only redaction or the clock changed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.capture.reader import CaptureReader, sent_bytes
from acp_bridge.capture.records import CaptureEncoder, dumps, header_record, safe_dumps
from acp_bridge.capture.redaction import WHOLE, Redactor, valid_pointers
from acp_bridge.core.chain import RuleError
from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.lines import MIB
from acp_bridge.core.messages import Direction
from acp_bridge.core.printable import printable
from acp_bridge.core.protocol import Json
from acp_bridge.core.relay import Relay
from acp_bridge.core.rewrites import Rule, RuleSettings, build_rewrites
from acp_bridge.replay.diff import compact_diff, showable
from acp_bridge.replay.script import messages

# What a difference is: the line itself changed, was dropped or is forwarded now; a message
# the bridge writes itself is written now and was not, or no longer.
CHANGED, DROPPED_NOW, FORWARDED_NOW = "changed", "dropped now", "forwarded now"
EMITTED_NOW, NO_LONGER_EMITTED = "emitted now", "no longer emitted"
SHELL_RULE = "bridge"  # answers the shell wrote for a gone agent: no rule's output


class RuleFailed(Exception):
    """A rule raised on a recorded line and the configuration is strict."""

    def __init__(self, seq: Any, exc: Exception) -> None:
        if isinstance(exc, RuleError):
            what = f"rule {exc.rule!r} failed on the line recorded as seq {seq}: {exc.detail}"
        else:
            what = f"a rule failed on the line recorded as seq {seq}: {type(exc).__name__}: {exc}"
        super().__init__(printable(what, quote_backslash=False))
        self.seq = seq


@dataclass(frozen=True)
class Difference:
    seq: Any  # the recorded record's seq (for a message the bridge writes now only, its trigger's)
    direction: str
    method: str | None
    change: str
    diff: Json

    def text(self) -> str:
        arrow = "->" if self.direction == "to-agent" else "<-"
        body = printable(orjson.dumps(self.diff, option=orjson.OPT_NON_STR_KEYS).decode(), quote_backslash=False)
        method = printable(self.method) if self.method else "(no method)"
        return f"seq {printable(str(self.seq))} {arrow} {method}: {self.change} {body}"

    def as_json(self) -> Json:
        return {"seq": self.seq, "direction": self.direction, "method": self.method,
                "change": self.change, "diff": self.diff}


@dataclass
class Failure:
    """A rule that failed (open) on re-run lines: how often, and the first time."""

    rule: str  # "": what the rules made of a line could not be written back (they were not asked)
    seq: Any  # the first line's recorded seq
    error: str
    count: int = 1

    def text(self) -> str:
        who = f"rule {self.rule!r} failed" if self.rule else "the rules could not change a message"
        times = f"{self.count} message{'s' if self.count != 1 else ''}"
        return printable(f"{who} on {times}, first on seq {self.seq}: {self.error}", quote_backslash=False)

    def as_json(self) -> Json:
        return {"rule": self.rule or None, "count": self.count, "seq": self.seq, "error": self.error}


@dataclass
class Rerun:
    differences: list[Difference] = field(default_factory=list)
    compared: int = 0  # messages compared (recorded lines re-run, and messages the bridge wrote)
    not_rerun: int = 0  # lines recorded only in part or withheld whole: kept as they were
    capture: bytearray | None = None  # the re-run as a capture, when asked for
    failures: dict[str, Failure] = field(default_factory=dict)  # rules that failed, by name

    def failed(self, forwards: Sequence[Forward], seq: Any) -> None:
        """Note the rules that failed on one re-run line (verdict error: it went on as it came)."""
        for fwd in forwards:
            if fwd.verdict is Verdict.ERROR:
                rule = ", ".join(fwd.rules)
                if rule in self.failures:
                    self.failures[rule].count += 1
                else:
                    self.failures[rule] = Failure(rule, seq, fwd.error or "?")

    def summary(self) -> str:
        differ = len(self.differences)
        text = (f"{differ} message{'s' if differ != 1 else ''} differ{'s' if differ == 1 else ''} "
                f"of {self.compared} compared")
        if self.not_rerun:
            text += (f"; {self.not_rerun} line{'s' if self.not_rerun != 1 else ''} not re-run "
                     f"(recorded only in part, or withheld whole by redaction)")
        return text

    def as_json(self) -> Json:
        return {"differences": [d.as_json() for d in self.differences],
                "summary": {"differ": len(self.differences), "compared": self.compared,
                            "not_rerun": self.not_rerun},
                "failures": [f.as_json() for f in self.failures.values()]}


def _parse(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "backslashreplace")


def _compare(old: Json | None, new: Json | None, seq: Any, out: list[Difference]) -> None:
    """One recorded message against its re-run (either may be missing)."""
    base = new if new is not None else old
    assert base is not None
    if old is not None and old.get("seq") is not None:
        seq = old["seq"]  # a message the bridge wrote in the recording: its own record
    direction, method = str(base.get("direction")), base.get("method")
    if old is None or new is None:
        emitted = (new if new is not None else old or {}).get("verdict") == "emit"
        present = new if new is not None else old
        assert present is not None
        change = (EMITTED_NOW if new is not None else NO_LONGER_EMITTED) if emitted else CHANGED
        side = "now" if new is not None else "was"
        out.append(Difference(seq, direction, method, change, showable({"": {side: _parse(sent_bytes(present))}})))
        return
    was, now = sent_bytes(old), sent_bytes(new)
    if was == now:
        return
    if was is None or now is None:
        change = DROPPED_NOW if now is None else FORWARDED_NOW
        side, data = ("was", was) if now is None else ("now", now)
        out.append(Difference(seq, direction, method, change, showable({"": {side: _parse(data)}})))
        return
    diff = compact_diff(_parse(was), _parse(now))
    if not diff:  # the same JSON, spelled differently
        diff = {"": {"was": was.decode("utf-8", "backslashreplace"), "now": now.decode("utf-8", "backslashreplace")}}
    out.append(Difference(seq, direction, method, CHANGED, showable(diff)))


def _with_emits(records: Iterator[Json]) -> Iterator[tuple[Json, list[Json]]]:
    """Each record with the records of the messages the bridge wrote for it: right after
    it, and right before it for those marked `before` (written ahead of their line)."""
    held: Json | None = None
    emits: list[Json] = []
    ahead: list[Json] = []
    for record in records:
        if record.get("verdict") == "emit" and (record.get("before") is True or held is not None):
            (ahead if record.get("before") is True else emits).append(record)
            continue
        if held is not None:
            yield held, emits
        held, emits, ahead = record, ahead, []
    if held is not None:
        yield held, emits


def _renumbered(record: Json, encoder: CaptureEncoder) -> bytes:
    encoder.seq += 1
    return safe_dumps({**record, "seq": encoder.seq})


def rerun(capture: CaptureReader, rules: RuleSettings, rewrites: Sequence[Rule] | None = None, *,
          strict: bool = False, max_line: int = 16 * MIB,
          redact: Sequence[str] = (), write: bool = False, argv: Sequence[str] = (), pid: int = 0,
          config_digest: str = "", divert_stray: bool = False) -> Rerun:
    """Re-run the capture's incoming lines through the rules `rules` configures (a `Config`),
    or through `rewrites` when given (the user's rules too: `config/rules.py` loads them).

    Args:
        redact: pointers masked on top of those the capture was written with.
        write: also make the re-run as a capture (`Rerun.capture`), with this `argv`, `pid`
            and `config_digest` in its header.
        divert_stray: `[relay] stray_output = "stderr"`: stray agent output is diverted.

    Raises:
        RuleFailed: a rule raised and `strict` is set.
    """
    header = capture.header
    redact = tuple(dict.fromkeys([*valid_pointers(header.get("redact")), *redact]))
    include = header.get("include_system_prompt") is True
    encoder = CaptureEncoder(Redactor(redact, None if include else rules.system_prompt.text), lean=False)
    relay = Relay(build_rewrites(rules) if rewrites is None else rewrites, strict=strict, max_line=max_line,
                  divert_stray=divert_stray)
    result = Rerun()
    out = _rerun_header(header, argv, config_digest, pid, redact, include) if write else None
    wall = mono = 0.0
    for record, emits in _with_emits(messages(capture)):
        time_, mono_ = record.get("time"), record.get("mono")
        wall = float(time_) if isinstance(time_, (int, float)) else wall
        mono = float(mono_) if isinstance(mono_, (int, float)) else mono
        raw = sent_bytes({k: v for k, v in record.items() if k in ("raw", "raw_b64")})
        if (record.get("verdict") == "emit" or raw is None or record.get("truncated")
                or record.get("unfinished") or record.get("redacted") == WHOLE):
            if record.get("verdict") != "emit":
                result.not_rerun += 1
            if out is not None:
                for kept in (record, *emits):
                    out += _renumbered(kept, encoder)
            continue
        encoded = _rerun_line(relay, encoder, record, raw, emits, (wall, mono), result)
        if out is not None:
            out += encoded
            for kept in emits:
                if kept.get("rules") == [SHELL_RULE]:
                    out += _renumbered(kept, encoder)
    if out is not None:
        out += encoder.trailer(wall, mono)
        result.capture = out
    return result


def _rerun_header(header: Json, argv: Sequence[str], config_digest: str, pid: int, redact: tuple[str, ...],
                  include: bool) -> bytearray:
    """The re-run capture's header: the recorded times, this re-run's argv, pid and config."""
    wall, mono = header.get("time"), header.get("mono")
    return bytearray(dumps(header_record(
        wall=float(wall) if isinstance(wall, (int, float)) else 0.0,
        mono=float(mono) if isinstance(mono, (int, float)) else 0.0,
        argv=list(argv), config_digest=config_digest, pid=pid, redact=redact,
        include_system_prompt=include)))


def _rerun_line(relay: Relay, encoder: CaptureEncoder, record: Json, raw: bytes, emits: list[Json],
                times: tuple[float, float], result: Rerun) -> bytes:
    """One recorded line fed to the relay: what it makes now compared with the record and
    the messages the rules emitted then (into `result`), and the new records, encoded."""
    wall, mono = times
    direction = Direction(record["direction"])
    try:
        forwards = relay.feed(direction, raw, mono)
        if not raw.endswith(b"\n"):  # the stream's torn last line
            forwards += relay.feed_eof(direction, mono)
    except Exception as exc:  # only with strict: the relay fails open otherwise
        raise RuleFailed(record.get("seq"), exc) from exc
    result.failed(forwards, record.get("seq"))
    encoded = encoder.encode_batch(wall, mono, forwards)
    new = [orjson.loads(line) for line in encoded.split(b"\n") if line]
    own = [n for n in new if n.get("verdict") != "emit"]
    made = [n for n in new if n.get("verdict") == "emit"]
    ruled = [e for e in emits if e.get("rules") != [SHELL_RULE]]
    result.compared += 1 + max(len(ruled), len(made))
    _compare(record, own[0] if own else None, record.get("seq"), result.differences)
    for index in range(max(len(ruled), len(made))):
        _compare(ruled[index] if index < len(ruled) else None,
                 made[index] if index < len(made) else None, record.get("seq"), result.differences)
    return encoded
