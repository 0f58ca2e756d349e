"""The aggregation behind `acp-bridge stats`: counts, bytes, latency percentiles, rules and
loose ends of a capture, record by record.

Must never: do IO (the CLI hands it the reader's records), read the clock or the time zone (a clock is
passed in for the times it prints), or raise on what a capture holds.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

from acp_bridge.capture.in_flight import InFlight
from acp_bridge.capture.reader import plausible_latency
from acp_bridge.capture.summary import fmt_id, fmt_seconds, utc_clock
from acp_bridge.core.printable import printable
from acp_bridge.core.protocol import Json

UNANSWERED_SHOWN = 100  # requests left unanswered listed in the text, the first by seq (--json: all)


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
        self.unreadable = 0  # capture lines that are not records (the reader skips and counts them)
        self.messages: Counter[tuple[str, str]] = Counter()
        self.bytes: Counter[tuple[str, str]] = Counter()
        self.latency: defaultdict[str, list[float]] = defaultdict(list)
        self.rules: Counter[tuple[str, str]] = Counter()
        self.malformed: Counter[str] = Counter()
        self.opaque = 0
        self.redacted = 0
        self._open = InFlight()

    def __repr__(self) -> str:
        return f"<CaptureStats records={self.records} open={len(self._open)}>"

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
        if record.get("kind") == "request":
            self._open.request(direction, record)
        elif record.get("kind") == "response":
            request = self._open.response(direction, record.get("id"))
            latency = record.get("latency")
            if not isinstance(latency, (int, float)) and request is not None:
                latency = float(record.get("mono", 0.0)) - float(request.get("mono", 0.0))
            method = record.get("method") or (request or {}).get("method")
            # the reader drops a recorded latency out of range; one computed from clocks
            # edited by hand is left out the same way
            if isinstance(latency, (int, float)) and plausible_latency(latency) and method:
                self.latency[str(method)].append(float(latency))

    @property
    def unanswered(self) -> list[Json]:
        """The requests left unanswered, by seq (a dict each, made now)."""
        return list(self._open.each())

    @property
    def unanswered_count(self) -> int:
        return len(self._open)

    def unanswered_json(self, count: int | None = None) -> Iterator[Json]:
        """The first `count` requests left unanswered (None: all) as `as_json` lists them, by
        seq, each made as it is asked for (`stats --json` writes a million one at a time)."""
        for r in self._open.each(count):
            yield {"seq": r.get("seq"), "time": r.get("time"), "direction": r.get("direction"),
                   "method": r.get("method"), "id": r.get("id"), "session": r.get("session")}

    def as_json(self, unanswered: int | None = None) -> Json:
        """What `report` prints, as JSON (`stats --json`, the inspector, the MCP server): the
        same numbers, latencies in seconds, values from the capture as they were recorded
        (`unanswered`: how many of the requests left unanswered to list; None: all)."""
        header = None
        if self.header is not None:
            header = {key: self.header.get(key) for key in ("format", "bridge", "started", "config")}
        latency = []
        for method, values in sorted(self.latency.items()):
            values = sorted(values)
            latency.append({"method": method, "count": len(values), "p50": percentile(values, 50),
                            "p90": percentile(values, 90), "p99": percentile(values, 99), "max": values[-1]})
        return {
            "header": header,
            "messages": self.records,
            "bytes": sum(self.bytes.values()),
            "malformed": sum(self.malformed.values()),
            "opaque": self.opaque,
            "redacted": self.redacted,
            "ended": self.ended,
            "unreadable": self.unreadable,
            "by_method": [{"method": label, "direction": direction, "count": count,
                           "bytes": self.bytes[(label, direction)]}
                          for (label, direction), count in sorted(self.messages.items())],
            "latency": latency,
            "rules": [{"rule": rule, "verdict": verdict, "count": count}
                      for (rule, verdict), count in sorted(self.rules.items())],
            "unanswered": list(self.unanswered_json(unanswered)),
        }

    def report(self, clock: Callable[[float], str] = utc_clock) -> list[str]:
        """The text `acp-bridge stats` prints: what the capture holds is made `printable` (a
        method or session id is whatever the agent or client sent)."""
        out: list[str] = []
        if self.header is not None:
            h = self.header
            out.append(printable(f"capture: format {h.get('format')}, bridge {h.get('bridge')}, "
                                 f"started {h.get('started')}, config {h.get('config')}", quote_backslash=False))
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
            out.append(f"{printable(label):<36} {printable(direction):<9} {count:>7} "
                       f"{self.bytes[(label, direction)]:>10}")
        out.append("")
        out.append(f"{'latency':<36} {'count':>7} {'p50':>9} {'p90':>9} {'p99':>9} {'max':>9}")
        if not self.latency:
            out.append("(no answered requests)")
        for method, values in sorted(self.latency.items()):
            values = sorted(values)
            cells = " ".join(f"{fmt_seconds(percentile(values, q)):>9}" for q in (50, 90, 99))
            out.append(f"{printable(method):<36} {len(values):>7} {cells} {fmt_seconds(values[-1]):>9}")
        out.append("")
        out.append(f"{'rule':<36} {'verdict':<9} {'count':>7}")
        if not self.rules:
            out.append("(no rule changed anything)")
        for (rule, verdict), count in sorted(self.rules.items()):
            out.append(f"{printable(str(rule)):<36} {printable(verdict):<9} {count:>7}")
        out.append("")
        unanswered = self.unanswered_count
        out.append(f"unanswered requests: {unanswered}")
        for record in self._open.each(UNANSWERED_SHOWN):
            arrow = "->" if record.get("direction") == "to-agent" else "<-"
            session = record.get("session")
            where = f" ({printable(str(session))})" if session is not None else ""
            out.append(f"  {clock(float(record.get('time', 0.0)))} {arrow} "
                       f"{printable(str(record.get('method')))} id {fmt_id(record.get('id'))}{where}")
        if unanswered > UNANSWERED_SHOWN:
            out.append(f"  … and {unanswered - UNANSWERED_SHOWN} more (stats --json lists them all)")
        return out


def stats_json(records: Iterable[Json], unreadable: int = 0) -> Json:
    """The JSON of `acp-bridge stats --json` for a capture's records, in file order
    (`unreadable`: lines the reader skipped, which it counts)."""
    aggregate = CaptureStats()
    for record in records:
        aggregate.add(record)
    aggregate.unreadable = unreadable
    return aggregate.as_json()
