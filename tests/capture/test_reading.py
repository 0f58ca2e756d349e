"""Reading records back: one-line summaries, detail levels, filters, what is a record."""

from __future__ import annotations

from acp_bridge.capture.reader import load_record
from acp_bridge.capture.summary import RecordFilter, detail_lines, summarize
from tests.capture.samples import FIXED


def test_summary_lines() -> None:
    assert [summarize(r).plain() for r in FIXED] == [
        "22:13:20.250 -> session/prompt #7 (s1) 91B",
        "22:13:20.350 <- session/update agent_message_chunk (s1) 121B",
        "22:13:20.450 -> tag #\"t\" 55B->68B [rewrite: tagger]",
        "22:13:20.550 <- drop (s2) 62B->0B [drop: tagger]",
        "22:13:20.550 <- pong 34B [bridge: tagger]",
        "22:13:21.750 <- #7 session/prompt ok 1.50s (s1) 60B",
        "22:13:21.850 <- (not JSON-RPC) 6B",
        "22:13:21.950 -> authenticate #9 60B [redacted]",
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


def test_load_record_rejects_non_records() -> None:
    assert load_record(b"[1]") is None and load_record(b"{oops") is None and load_record(b'{"a":1}') is None
    assert load_record(b'{"type":"end"}') == {"type": "end"}
