"""`acp-bridge stats`: the report of a fixed capture, percentiles and pairing."""

from __future__ import annotations

from acp_bridge.capture.records import header_record
from acp_bridge.capture.stats import CaptureStats
from tests.capture.samples import FIXED, WALL, base


def test_stats_report() -> None:
    stats = CaptureStats()
    stats.add(header_record(wall=WALL, mono=0.0, argv=[], config_digest="d1", pid=1))
    for record in FIXED:
        stats.add(record)
    stats.unreadable = 1  # the reader skipped and counted a line that is not a record
    report = stats.report()
    assert report[1:] == [
        "messages: 9 (588 bytes), malformed lines: 1, over the parse limit: 1, redacted: 1, "
        "capture not closed cleanly, unreadable capture lines: 1",
        "",
        "method                               direction   count      bytes",
        "(not JSON-RPC)                       to-client       1          6",
        "(opaque)                             to-client       1         99",
        "authenticate                         to-agent        1         60",
        "drop                                 to-client       1         62",
        "pong                                 to-client       1         34",
        "session/prompt                       to-agent        1         91",
        "session/prompt                       to-client       1         60",
        "session/update                       to-client       1        121",
        "tag                                  to-agent        1         55",
        "",
        "latency                                count       p50       p90       p99       max",
        "session/prompt                             1     1.50s     1.50s     1.50s     1.50s",
        "",
        "rule                                 verdict     count",
        "tagger                               drop            1",
        "tagger                               emit            1",
        "tagger                               rewrite         1",
        "",
        "unanswered requests: 2",
        '  22:13:20.450 -> tag id "t"',
        "  22:13:21.950 -> authenticate id 9",
    ]
    assert report[0].startswith("capture: format 1, bridge ")


def test_stats_percentiles_and_pairing_without_latency_field() -> None:
    """Nearest-rank percentiles; an emitted answer pairs by id and mono time."""
    stats = CaptureStats()
    for i in range(100):
        stats.add(base(2 * i, "to-agent", "request", "pass", float(i), method="m", id=i))
        stats.add(base(2 * i + 1, "to-client", "response", "emit", float(i) + (i + 1) / 1000, id=i))
    values = sorted(stats.latency["m"])
    assert len(values) == 100 and stats.unanswered == []
    line = stats.report()[-6]
    assert line.split() == ["m", "100", "50.0ms", "90.0ms", "99.0ms", "100.0ms"]


def test_a_latency_computed_from_clocks_edited_by_hand_is_left_out() -> None:
    """A response with no latency takes it from the records' `mono`: clocks that go back, or
    jump by 1e299 seconds, measured nothing."""
    stats = CaptureStats()
    for seq, (kind, mono) in enumerate([("request", 5.0), ("response", 1.0), ("request", 0.0), ("response", 1e299),
                                        ("request", 0.0), ("response", 0.25)]):
        stats.add({"type": "message", "seq": seq, "mono": mono, "direction": "to-agent" if kind == "request" else
                   "to-client", "kind": kind, "method": "m", "id": seq // 2})
    assert stats.as_json()["latency"] == [{"method": "m", "count": 1, "p50": 0.25, "p90": 0.25, "p99": 0.25,
                                           "max": 0.25}]
