"""`acp-bridge stats` on a small fixed capture: exact output lines."""

from __future__ import annotations

from pathlib import Path

from tests.commands.sample_capture import invoke


def test_stats(capture: Path, utc: None) -> None:
    assert invoke("stats", str(capture)) == [
        "capture: format 1, bridge 0.1.0, started 2023-11-14T22:13:20Z, config abc",
        "messages: 5 (286 bytes), malformed lines: 1, over the parse limit: 0, redacted: 0",
        "",
        "method                               direction   count      bytes",
        "(not JSON-RPC)                       to-client       1          4",
        "session/cancel                       to-agent        1         10",
        "session/prompt                       to-agent        1         91",
        "session/prompt                       to-client       1         60",
        "session/update                       to-client       1        121",
        "",
        "latency                                count       p50       p90       p99       max",
        "session/prompt                             1     1.25s     1.25s     1.25s     1.25s",
        "",
        "rule                                 verdict     count",
        "system-prompt                        rewrite         1",
        "",
        "unanswered requests: 1",
        "  22:13:22.000 -> session/cancel #2 (s2)",
    ]
