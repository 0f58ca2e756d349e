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


def test_the_text_lists_the_first_unanswered_requests_and_counts_the_rest(tmp_path: Path) -> None:
    """A capture of many requests never answered listed every one, a line each; --json
    keeps them all."""
    from acp_bridge.capture.records import dumps
    from acp_bridge.capture.stats import UNANSWERED_SHOWN
    from tests.commands.sample_capture import HEADER, rec

    count = UNANSWERED_SHOWN + 3
    capture = tmp_path / "many.jsonl"
    capture.write_bytes(b"".join([HEADER, *(
        dumps(rec(n, n / 10, "to-agent", "request", "pass", method="session/prompt", id=n, session="s", size=2,
                  raw="{}\n")) for n in range(1, count + 1))]))
    lines = invoke("stats", str(capture))
    at = lines.index(f"unanswered requests: {count}")
    assert [line.split()[-3:] for line in lines[at + 1:at + 3]] == [["id", "1", "(s)"], ["id", "2", "(s)"]]
    assert lines[at + 1 + UNANSWERED_SHOWN:] == ["  … and 3 more (stats --json lists them all)"]
    listed = orjson.loads(CliRunner().invoke(main, ["stats", str(capture), "--json"]).stdout)["unanswered"]
    assert [r["seq"] for r in listed] == list(range(1, count + 1))
