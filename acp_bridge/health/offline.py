"""Findings and the migration report, computed afterwards from a capture's records.

Owns: feeding every message record of one capture (one connection) to the findings engine,
parsing each line (post hoc there is time for that, so nothing is sampled), and the
migration report: which suggestion form each side used and how often, what the bridge wrote
or took out, which system-prompt dialect carried the prompt, and the one-sentence verdict.
Must never: do IO (records are handed in), read a clock, or raise on what a capture holds.
"""

from __future__ import annotations

from collections import Counter
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
from acp_bridge.core.rewrites.suggestions import PromptSuggestions
from acp_bridge.core.rewrites.system_prompt_options import NAME as SYSTEM_PROMPT
from acp_bridge.core.session import Connection, Pending
from acp_bridge.health.engine import Engine
from acp_bridge.health.findings import CODES, Finding, Level

KEPT = 50  # occurrences kept per code and session (the rest are counted)
KEPT_PER_CODE = 1000  # ... and per code across sessions (a peer may name a new session in every line)
# Timers are checked at most once per second of capture time: each check scans the requests
# in flight, and a capture with many unanswered requests would otherwise take quadratic time.
SCAN_EVERY = 1.0
INF = float("inf")
UNWRITABLE = "(cannot be written back)"  # `failed_by_rule`'s name for a message no rule was asked about
_DIRECTIONS = {"to-agent": Direction.TO_AGENT, "to-client": Direction.TO_CLIENT}


@dataclass
class Migration:
    """What the suggestion and system-prompt rules met on one connection."""

    client_form: str = "unknown"  # new, legacy (AIR only), both, none, unknown (no initialize seen)
    # The form the client reads as the suggestions rule decides it (`core/shapes.client_form`:
    # NEW, LEGACY or None), what the verdict goes by; None too while no initialize was seen.
    reads: str | None = None
    agent_legacy: int = 0  # suggestion updates the agent sent, per form
    agent_new: int = 0
    client_legacy: int = 0  # suggestion updates the client received, per form
    client_new: int = 0
    written: int = 0  # suggestion updates the bridge wrote (conversions, withdrawals)
    withdrawals: int = 0  # of those, empty lists
    taken_out: int = 0  # agent suggestion updates not forwarded as they came
    dialects: Counter[str] = field(default_factory=Counter)  # spec, meta, first-prompt, refused
    changed: Counter[str] = field(default_factory=Counter)  # messages changed or written, per rule
    # Messages a rule failed on (verdict error), per rule ("": what the rules made of it
    # could not be written back, so they were not asked).
    failed: Counter[str] = field(default_factory=Counter)
    # Changes the pair does not need: the bridge's withdrawal on a prompt when the agent then
    # withdrew as well, and the agent's own withdrawals the bridge held back as repeats.
    redundant: int = 0
    _awaiting: dict[Any, int] = field(default_factory=dict)  # session -> bridge withdrawals not yet echoed

    def as_json(self) -> Json:
        return {
            "client_form": self.client_form,
            "agent_sent": {"legacy": self.agent_legacy, "new": self.agent_new},
            "client_received": {"legacy": self.client_legacy, "new": self.client_new},
            "bridge_wrote": self.written, "withdrawals": self.withdrawals, "taken_out": self.taken_out,
            "system_prompt": dict(self.dialects), "changed_by_rule": dict(self.changed),
            "needed_by_rule": dict(self.needed()),
            "failed_by_rule": {rule or UNWRITABLE: n for rule, n in self.failed.items()},
        }

    def needed(self) -> Counter[str]:
        """`changed` without the redundant changes."""
        needed = Counter(self.changed)
        needed[PromptSuggestions.name] -= self.redundant
        return +needed

    def verdict(self) -> str:
        """One sentence: does this pair still need the bridge, and why. Never that it can be
        removed while a rule failed: what the rule would have done is not known."""
        failed = ", ".join(f"{rule or 'a message they could not change'} {n}x"
                           for rule, n in sorted(self.failed.items(), key=lambda item: (not item[0], item[0])))
        if not self.needed():
            if failed:
                return (f"rules failed ({failed}): what they would have done is not known, so whether the "
                        "bridge can be removed is not either; fix them and check a new capture")
            return "nothing was rewritten: the bridge can be removed"
        reasons = []
        known = self.client_form != "unknown"
        if self.agent_legacy and self.reads == read.NEW:
            reasons.append(f"the agent sends suggestions in the legacy form ({self.agent_legacy}x), "
                           "converted for a client that reads the new form")
        if self.agent_new and self.reads == read.LEGACY:
            reasons.append(f"the client reads only the legacy form and the agent sends the new form "
                           f"({self.agent_new}x)")
        if known and self.reads is None and (self.agent_legacy or self.agent_new):
            reasons.append("the client reads no suggestions and the agent sends them (taken out)")
        if self.taken_out and not reasons:  # the forms match: the lifetime rules took them out
            reasons.append(f"the bridge took out suggestions the agent sent where the client must not get "
                           f"them ({self.taken_out}x: during history replay, or for a turn already over)")
        unechoed = sum(self._awaiting.values())
        if unechoed:
            reasons.append(f"the bridge withdrew suggestions on the next prompt ({unechoed}x), which the agent "
                           "did not do")
        fallback = [d for d in ("meta", "first-prompt") if self.dialects.get(d)]
        if fallback:
            reasons.append(f"the agent lacks the systemPrompt capability (the prompt went through "
                           f"{' and '.join(fallback)})")
        elif self.dialects.get("spec"):
            reasons.append("the system prompt comes from the bridge's configuration")
        if self.dialects.get("refused"):
            reasons.append("the bridge refused session setup it could not give the system prompt to")
        if not reasons:
            rules = ", ".join(f"{rule} {n}x" for rule, n in sorted(self.needed().items()))
            reasons.append(f"it changed or wrote messages ({rules})")
        if failed:
            reasons.append(f"and rules failed ({failed}), so it may need it for more")
        return "this pair still needs the bridge because " + "; ".join(reasons)


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
    report.migration.reads, report.migration.client_form = _client_form(session)
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
            _suggestions_out(migration, msg, written=True)
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
        elif record.get("method") is None:  # the relay paired it with nothing either
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
        form = _suggestion_form(msg)
        if form is not None:
            if form == "legacy":
                migration.agent_legacy += 1
            else:
                migration.agent_new += 1
            if verdict in ("drop", "rewrite"):
                migration.taken_out += 1
            if _suggestions(msg, form) == []:  # the agent's own withdrawal
                session = read.session_id_of(msg)
                if verdict == "drop":
                    migration.redundant += 1  # held back as a repeat: harmless without the bridge too
                if migration._awaiting.get(session):
                    migration._awaiting[session] -= 1
                    migration.redundant += 1  # the bridge's withdrawal came first; the agent's would have done
        if verdict == "rewrite":
            out = record_message(record, "out")
            if isinstance(out, dict):
                _suggestions_out(migration, out, written=False)
        elif verdict != "drop" and form is not None:  # it went out as it came
            _suggestions_out(migration, msg, written=False, form=form)


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


def _suggestions_out(migration: Migration, msg: Json, *, written: bool, form: str | None = None) -> None:
    """A suggestion update that reached the client (`form`: its form, when known)."""
    form = form or _suggestion_form(msg)
    if form is None:
        return
    if form == "legacy":
        migration.client_legacy += 1
    else:
        migration.client_new += 1
    if written:
        migration.written += 1
        if _suggestions(msg, form) == []:
            migration.withdrawals += 1
            session = read.session_id_of(msg)
            migration._awaiting[session] = migration._awaiting.get(session, 0) + 1


def _suggestion_form(msg: Any) -> str | None:
    """The form of suggestions a `session/update` carries (`core/shapes.suggestion_form`)."""
    if type(msg) is not dict or msg.get("method") != p.SESSION_UPDATE:
        return None
    return read.suggestion_form(read.update_of(msg))


def _suggestions(msg: Any, form: str) -> Any:
    return read.suggestion_items(read.update_of(msg), form)


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
        if not isinstance(element, dict) or "id" not in element:
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


# `Migration.client_form` for each form the rule reads (`core/shapes.client_form`).
FORM_NAMES = {read.NEW: "new", read.LEGACY: "legacy (AIR only)", None: "none"}


def _client_form(session: Connection) -> tuple[str | None, str]:
    """What the client reads, as the suggestions rule decides it (`core/shapes.client_form`),
    and its name in the report: "both" names a client that reads the new form and carries
    the AIR marker too; "unknown", a capture with no initialize."""
    if not session.client_ready:
        return None, "unknown"
    caps = session.client_caps  # what the rule reads: the client's initialize as the session kept it
    form = read.client_form(caps)
    if form == read.NEW and read.air_marker(caps):
        return form, "both"
    return form, FORM_NAMES[form]
