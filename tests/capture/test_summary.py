"""Records read back for people (capture/summary.py): one-line summaries, detail levels,
filters; and show, stats and export never trip on what a capture file holds: any JSON object
with a string `type` is a record, whatever its fields hold (a capture edited by hand, written
by another tool, or by a future format)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.files import local_clock
from acp_bridge.capture.html import render
from acp_bridge.capture.reader import load_record
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.capture.summary import RecordFilter, detail_lines, summarize
from acp_bridge.commands import main
from tests.capture.samples import FIXED


def test_summary_lines() -> None:
    assert [summarize(r).plain() for r in FIXED] == [
        "22:13:20.250 -> session/prompt id 7 (s1) 91B",
        "22:13:20.350 <- session/update agent_message_chunk (s1) 121B",
        "22:13:20.450 -> tag id \"t\" 55B->68B [rewrite: tagger]",
        "22:13:20.550 <- drop (s2) 62B->0B [drop: tagger]",
        "22:13:20.550 <- pong 34B [bridge: tagger]",
        "22:13:21.750 <- session/prompt id 7 ok 1.50s (s1) 60B",
        "22:13:21.850 <- (not JSON-RPC) 6B",
        "22:13:21.950 -> authenticate id 9 60B [redacted]",
        "22:13:22.050 <- (line over the parse limit) 99B",
    ]


def test_detail_lines() -> None:
    assert detail_lines(FIXED[0], 1) == []
    assert detail_lines(FIXED[0], 2) == ["    {", '      "sessionId": "s1",', '      "prompt": []', "    }"]
    assert detail_lines(FIXED[2], 3) == [
        "  before:", "    {", '      "jsonrpc": "2.0",', '      "id": "t",', '      "method": "tag",',
        '      "params": {}', "    }",
        "  after:", "    {", '      "jsonrpc": "2.0",', '      "id": "t",', '      "method": "tag",',
        '      "params": {', '        "tagged": true', "      }", "    }",
    ]
    assert detail_lines(FIXED[3], 3)[-1] == "    (dropped)"
    assert detail_lines(FIXED[4], 3) == ["  sent:", "    {", '      "jsonrpc": "2.0",', '      "method": "pong"', "    }"]


def test_filter() -> None:
    assert [r["seq"] for r in FIXED if RecordFilter(methods=("session/prompt",))(r)] == [1, 6]
    assert [r["seq"] for r in FIXED if RecordFilter(session="s1", direction="to-client")(r)] == [2, 6]
    assert [r["seq"] for r in FIXED if RecordFilter(seqs=(6, 1, 99))(r)] == [1, 6]
    # A seq only as the bridge writes it, an integer: not true (== 1), not 1.0, not "1".
    assert [RecordFilter(seqs=(1,))({"seq": seq}) for seq in (True, 1.0, "1", None, 1)] == [
        False, False, False, False, True]


# -- any record -------------------------------------------------------------------------------

_SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5))
_JSON = st.recursive(_SCALARS, lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(st.text(max_size=4), kids, max_size=3), max_leaves=6)
_FIELDS = st.sampled_from([
    "seq", "time", "mono", "direction", "kind", "verdict", "method", "id", "session", "rules", "size",
    "raw", "raw_b64", "out", "out_b64", "out_size", "latency", "redacted", "error", "truncated",
    "unfinished", "redact", "bridge", "started", "records"])
_RECORDS = st.tuples(st.dictionaries(_FIELDS, _JSON, max_size=12),
                     st.sampled_from(["message", "message", "header", "end"])).map(
    lambda pair: {**pair[0], "type": pair[1]})


@given(st.lists(_RECORDS, max_size=4))
def test_readers_take_any_record(records: list[dict[str, Any]]) -> None:
    loaded = [load_record(orjson.dumps(record)) for record in records]
    assert all(record is not None for record in loaded)
    stats = CaptureStats()
    for record in loaded:
        assert record is not None
        summarize(record, local_clock).plain()
        for detail in range(4):
            detail_lines(record, detail)
        stats.add(record)
    stats.report()
    assert render([r for r in loaded if r is not None]).startswith("<!DOCTYPE html>")


def test_show_stats_and_export_of_an_odd_capture(tmp_path: Path) -> None:
    capture = tmp_path / "odd.jsonl"
    capture.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [
        {"type": "header", "format": 1, "redact": True},
        {"type": "message", "seq": None, "time": 1e300, "direction": "to-agent", "kind": "request",
         "method": ["x"], "raw_b64": "!!not base64", "size": "big", "rules": [1], "redacted": 3},
        {"type": "end", "records": "many"},
    ]))
    runner = CliRunner()
    shown = runner.invoke(main, ["show", str(capture), "--detail", "3"])
    assert (shown.stdout.splitlines(), shown.stderr) == (["t=1e+300 -> None id null ?B", "    (nothing)"], (
        f"acp-bridge: {capture}: 2 record(s) hold values of the wrong type or out of range, read as unknown "
        "(method, records, redacted, rules, seq, size; the first at line 2)\n"))
    assert runner.invoke(main, ["stats", str(capture)]).exit_code == 0
    assert runner.invoke(main, ["export", str(capture), "--html", str(tmp_path / "o.html")]).exit_code == 0
