"""Findings and the migration report, computed afterwards from a capture's records.

Owns: feeding every message record of one capture (one connection) to the findings engine,
parsing each line (post hoc there is time for that, so nothing is sampled), counting what
the migration report needs (the report and its verdict: `health/migration.py`), and `check`'s
report of one capture.
Must never: do IO (records are handed in), read a clock, or raise on what a capture holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from acp_bridge.capture.reader import record_bytes, record_message
from acp_bridge.config import HealthConfig
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.answers import BRIDGE
from acp_bridge.core.literals import integer_id
from acp_bridge.core.messages import Direction, Frame, Kind, classify
from acp_bridge.core.protocol import Json
from acp_bridge.core.rewrites.stray_output import is_stray
from acp_bridge.core.rewrites.system_prompt_options import NAME as SYSTEM_PROMPT
from acp_bridge.core.session import Pending
from acp_bridge.health.engine import Engine, answers_unreadable
from acp_bridge.health.findings import CODES, Finding, Level
from acp_bridge.health.migration import Migration, client_form, suggestion_form, suggestions, suggestions_out

KEPT = 50  # occurrences kept per code and session (the rest are counted)
KEPT_PER_CODE = 1000  # ... and per code across sessions (a peer may name a new session in every line)
# Timers are checked at most once per second of capture time: each check scans the requests
# in flight, and a capture with many unanswered requests would otherwise take quadratic time.
SCAN_EVERY = 1.0
INF = float("inf")
_DIRECTIONS = {"to-agent": Direction.TO_AGENT, "to-client": Direction.TO_CLIENT}


@dataclass
class Report:
    """What `check` says about one capture."""

    path: str
    messages: int = 0
    version: int | None = None
    agent: str | None = None
    client: str | None = None
    findings: list[Finding] = field(default_factory=list)  # the first KEPT per code and session, KEPT_PER_CODE per code
    counts: dict[str, int] = field(default_factory=dict)  # occurrences per code
    migration: Migration = field(default_factory=Migration)
    ended: bool = False  # the capture has its end record

    def worst(self) -> Level | None:
        return max((CODES[code].level for code in self.counts), default=None)

    def grouped(self) -> list[tuple[str, list[Finding]]]:
        """Codes found, worst level first, with their kept occurrences."""
        by_code: dict[str, list[Finding]] = {code: [] for code in self.counts}
        for finding in self.findings:
            by_code.setdefault(finding.code, []).append(finding)
        return sorted(by_code.items(), key=lambda item: (-CODES[item[0]].level, item[0]))

    def as_json(self) -> Json:
        """One capture's entry in `check --json` (the inspector and the MCP server serve it)."""
        return {
            "path": self.path, "messages": self.messages, "protocol_version": self.version,
            "client": self.client, "agent": self.agent, "ended": self.ended,
            "findings": [
                {"code": code, "level": CODES[code].level.label, "count": self.counts[code],
                 "meaning": CODES[code].meaning, "advice": CODES[code].advice,
                 "occurrences": [{"seq": f.seq, "session": f.session, "message": f.text,
                                  "direction": f.direction, "method": f.method, "id": f.id} for f in findings]}
                for code, findings in self.grouped()
            ],
            "migration": self.migration.as_json(),
            "verdict": self.migration.verdict(),
        }


def analyse(path: str, records: Iterable[Json], config: HealthConfig | None = None,
            extra: Iterable[Finding] = ()) -> Report:
    """The findings and migration report of one capture's records, in file order."""
    report = Report(path)
    engine = Engine(config, notify=KEPT, max_tracked=10_000_000, max_sessions=10_000_000,
                    max_counted=100_000, max_closed=10_000_000)  # its own session pairs as the relay did
    kept: dict[str, int] = {}

    def keep(finding: Finding) -> None:  # at most KEPT_PER_CODE of a code, whatever the sessions
        n = kept.get(finding.code, 0)
        if n < KEPT_PER_CODE:
            kept[finding.code] = n + 1
            report.findings.append(finding)

    engine.listeners.append(keep)
    now = 0.0
    scanned = -INF
    for record in records:
        kind = record.get("type")
        mono = record.get("mono")
        if isinstance(mono, (int, float)):
            now = max(now, float(mono))
        if kind == "end":
            report.ended = True
        if kind != "message":
            continue
        report.messages += 1
        if now >= engine.soonest and now >= scanned + SCAN_EVERY:
            engine.advance(now)
            scanned = now
        _feed(engine, report.migration, record, now)
    engine.finish(now)
    for finding in extra:  # e.g. schema validation
        engine.flag(finding.code, finding.session, finding.at, finding.seq, finding.text,
                     method=finding.method, id_=finding.id)
    report.counts = engine.summary()
    session = engine.session
    report.version = session.agent_version
    report.agent = _name(session.agent_init, "agentInfo", "info")
    report.client = _name(session.client_init, "clientInfo", "info")
    report.migration.reads, report.migration.client_form = client_form(session)
    report.findings.sort(key=lambda f: (-f.level, f.code, f.seq if f.seq is not None else -1))
    return report


def findings_json(path: str, records: Iterable[Json], config: HealthConfig | None = None) -> Json:
    """The JSON `check --json` prints for one capture (its entry of "captures"), from its
    records in file order; `path` is only named in it."""
    return analyse(path, records, config).as_json()


def _feed(engine: Engine, migration: Migration, record: Json, now: float) -> None:
    direction = _DIRECTIONS.get(str(record.get("direction")))
    if direction is None:
        return
    seq = record.get("seq")
    verdict = record.get("verdict")
    rules = record.get("rules") or []
    if verdict in ("rewrite", "drop", "emit", "diverted"):
        for rule in rules:
            if rule != BRIDGE:  # answers for an agent that is gone: no migration matter
                migration.changed[rule] += 1
    elif verdict == "error":  # went on as it came: still a message of its kind below
        failed = ", ".join(str(rule) for rule in rules)  # the rule that raised, or those that made it unwritable
        migration.failed[failed] += 1
        engine.rule_failed(failed or None, record.get("error"), record.get("session"), now, seq,
                           direction=direction, method=record.get("method"), id_=record.get("id"))
    if direction is Direction.TO_CLIENT and record.get("kind") == "other" and verdict in ("other", "diverted"):
        _stray(engine, record, verdict == "diverted", now)
    if verdict == "emit":
        msg = _exact_message(record, "out")
        if isinstance(msg, dict):
            if "id" in msg and ("result" in msg or "error" in msg):
                pending = _answer(engine, direction, msg)  # the bridge answered it
                if pending is not None:
                    engine.late(pending, now)
                    engine.answered(pending, msg, now, seq)
                if SYSTEM_PROMPT in rules:
                    migration.dialects["refused"] += 1
            suggestions_out(migration, msg, written=True)
        return
    try:
        _message(engine, migration, record, direction, now)
    finally:
        if direction is Direction.TO_CLIENT:
            engine.last_out = now  # after: an answer is not the output that keeps its own prompt alive


def _stray(engine: Engine, record: Json, diverted: bool, now: float) -> None:
    """A line from the agent that is no message: stray output, unless blank (harmless) or
    JSON after all (a batch, an object orjson refuses for a detail: `is_stray`)."""
    raw = record_bytes(record, "raw")
    if raw is None or not raw.strip() or not is_stray(classify(Direction.TO_CLIENT, raw)):
        return
    where = "the bridge's stderr instead of the client" if diverted else "the client"
    sample = raw.strip()[:40].decode("utf-8", "replace")
    engine.flag("stray-output", None, now, record.get("seq"),
                f"the agent wrote {{}} to stdout, which is not a JSON-RPC message; it went to {where}",
                repr(sample), direction=Direction.TO_CLIENT)


def _message(engine: Engine, migration: Migration, record: Json, direction: Direction, now: float) -> None:
    seq, verdict, rules = record.get("seq"), record.get("verdict"), record.get("rules") or []
    msg = _exact_message(record, "raw")
    if not isinstance(msg, dict):
        msg = _from_fields(record)
        if msg is None:
            if isinstance(record_message(record, "raw"), list):
                _batch(engine, direction, record_message(record, "raw"), now, seq)
            return
    kind = record.get("kind")
    if kind == "request":
        _request(engine, direction, msg, now, seq)
    elif kind == "response":
        pending = _answer(engine, direction, msg)
        if pending is not None:
            engine.late(pending, now)
            engine.answered(pending, msg, now, seq)
        elif record.get("method") is None and not answers_unreadable(msg):  # the relay paired it with nothing either
            engine.unpaired(direction, msg.get("id"), now, seq)
        if "error" in msg and "result" in msg:
            engine.result_and_error(direction, msg.get("id"), now, seq)
    elif kind == "notification":
        engine.notification(direction, msg, now, seq)
    if verdict == "rewrite" and SYSTEM_PROMPT in rules:
        out = record_message(record, "out")
        dialect = read.system_prompt_dialect(record.get("method"), out)
        if dialect is not None:
            migration.dialects[dialect] += 1
        engine.system_prompt_sent(record.get("method"), msg, out, now, seq)
    if direction is Direction.TO_CLIENT and kind == "notification":
        form = suggestion_form(msg)
        if form is not None:
            if form == "legacy":
                migration.agent_legacy += 1
            else:
                migration.agent_new += 1
            if verdict in ("drop", "rewrite"):
                migration.taken_out += 1
            if suggestions(msg, form) == []:  # the agent's own withdrawal
                session = read.session_id_of(msg)
                if verdict == "drop":
                    migration.redundant += 1  # held back as a repeat: harmless without the bridge too
                if migration._awaiting.get(session):
                    migration._awaiting[session] -= 1
                    migration.redundant += 1  # the bridge's withdrawal came first; the agent's would have done
        if verdict == "rewrite":
            out = record_message(record, "out")
            if isinstance(out, dict):
                suggestions_out(migration, out, written=False)
        elif verdict != "drop" and form is not None:  # it went out as it came
            suggestions_out(migration, msg, written=False, form=form)


def _exact_message(record: Json, key: str) -> Any:
    """`record_message`, with an id past 64 bits as written (orjson reads it as a float): a
    finding names it as the peer wrote it, and the capture's `id` field is read so too. The
    text is parsed as it is; its bytes are made only for such an id (a 16 MiB record would
    otherwise be held twice)."""
    msg = record_message(record, key)
    if type(msg) is dict and type(msg.get("id")) is float:
        data = record_bytes(record, key)
        if data is not None:
            msg["id"] = integer_id(data, msg["id"])
    return msg


def _from_fields(record: Json) -> Json | None:
    """A message withheld from the capture (redacted whole), as far as its record tells."""
    kind = record.get("kind")
    if kind not in ("request", "response", "notification"):
        return None
    msg: Json = {"jsonrpc": "2.0"}
    if kind != "notification":
        msg["id"] = record.get("id")
    if kind == "response":
        msg["result"] = None
    else:
        msg["method"] = record.get("method")
        msg["params"] = {"sessionId": record.get("session")}
    return msg


def _request(engine: Engine, direction: Direction, msg: Json, now: float, seq: Any) -> None:
    """A request: tracked in the engine's session, as the relay tracked it (which keeps
    the client's `initialize` params)."""
    if not isinstance(msg.get("method"), str):
        return
    pending = engine.session.on_request(Frame(direction, b"", Kind.REQUEST, msg), now)
    engine.request(pending, seq, msg)
    if engine.session.reused():
        engine.reused(now)


def _batch(engine: Engine, direction: Direction, batch: Any, now: float, seq: Any) -> None:
    for element in batch:
        if not isinstance(element, dict):
            continue
        if "id" not in element:
            if isinstance(element.get("method"), str):
                engine.notification(direction, element, now, seq)
            continue
        if isinstance(element.get("method"), str):
            _request(engine, direction, element, now, seq)
        elif "result" in element or "error" in element:
            pending = _answer(engine, direction, element)
            if pending is not None:
                engine.answered(pending, element, now, seq)


def _answer(engine: Engine, direction: Direction, msg: Json) -> Pending | None:
    """A response, paired by the engine's session as the relay paired it (which keeps the
    agent's `initialize` answer)."""
    return engine.session.on_response(Frame(direction, b"", Kind.RESPONSE, msg))


def _name(init: Json | None, *keys: str) -> str | None:
    for key in keys:
        name = p.get_path(init, key, "name")
        if isinstance(name, str):
            version = p.get_path(init, key, "version")
            return f"{name} {version}" if isinstance(version, str) else name
    return None


