"""`acp-bridge stats` on a small fixed capture: exact output lines."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.commands.sample_capture import WALL, invoke


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
        "  22:13:22.000 -> session/cancel id 2 (s2)",
    ]


def test_stats_json_holds_the_same_figures(capture: Path) -> None:
    """`stats --json`: what the text prints, as JSON (the inspector and the MCP server serve
    this object), latencies in seconds, values as recorded."""
    result = CliRunner().invoke(main, ["stats", str(capture), "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout) == {
        "header": {"format": 1, "bridge": "0.1.0", "started": "2023-11-14T22:13:20Z", "config": "abc"},
        "messages": 5, "bytes": 286, "malformed": 1, "opaque": 0, "redacted": 0, "ended": True, "unreadable": 0,
        "by_method": [
            {"method": "(not JSON-RPC)", "direction": "to-client", "count": 1, "bytes": 4},
            {"method": "session/cancel", "direction": "to-agent", "count": 1, "bytes": 10},
            {"method": "session/prompt", "direction": "to-agent", "count": 1, "bytes": 91},
            {"method": "session/prompt", "direction": "to-client", "count": 1, "bytes": 60},
            {"method": "session/update", "direction": "to-client", "count": 1, "bytes": 121},
        ],
        "latency": [{"method": "session/prompt", "count": 1, "p50": 1.25, "p90": 1.25, "p99": 1.25, "max": 1.25}],
        "rules": [{"rule": "system-prompt", "verdict": "rewrite", "count": 1}],
        "unanswered": [{"seq": 5, "time": WALL + 2.0, "direction": "to-agent", "method": "session/cancel",
                        "id": 2, "session": "s2"}],
    }
