"""A capture's rows as the inspector keeps them: packed in blocks, sliced by index, and the
row still folding equal to the row the export writes once the run ends."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.html_rows import RowBuilder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.capture.summary import utc_clock
from acp_bridge.inspector import timeline
from acp_bridge.inspector.timeline import Rows


@pytest.mark.parametrize(("count", "start", "limit"), [
    (0, 0, 10), (5, 0, 10), (5, 3, 10), (5, 5, 10), (5, 9, 10),  # within the last block
    (7, 0, 7), (7, 2, 3), (7, 3, 1),  # across the packed ones: BLOCK is 3 here
    (9, 2, 6), (9, 0, 100), (9, 8, 1), (10, 6, 4),
])
def test_rows_are_sliced_by_index_across_packed_blocks(monkeypatch: pytest.MonkeyPatch, count: int, start: int,
                                                        limit: int) -> None:
    monkeypatch.setattr(timeline, "BLOCK", 3)
    rows = Rows()
    for n in range(count):
        rows.append({"s": n, "l": f"row {n}"})
    assert len(rows) == count
    assert rows.slice(start, limit) == [{"s": n, "l": f"row {n}"} for n in range(start, min(count, start + limit))]


def chunk_record(seq: int, text: str) -> dict[str, object]:
    raw = orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}).decode() + "\n"
    return {"type": "message", "seq": seq, "mono": seq / 10, "time": 1.0 + seq, "direction": "to-client",
            "kind": "notification", "verdict": "pass", "method": "session/update", "session": "s", "rules": [],
            "size": len(raw), "raw": raw}


@given(st.lists(st.text(max_size=30), min_size=1, max_size=12))
def test_the_row_still_folding_is_the_row_written_when_the_run_ends(texts: list[str]) -> None:
    """What the live page shows of a run of chunks is what the export writes for it."""
    builder = RowBuilder(Redactor(()), utc_clock)
    handed = [row for n, text in enumerate(texts, 1) for row in builder.add(chunk_record(n, text))]
    pending = builder.pending()
    assert pending is not None and builder.pending() == pending  # looking does not end the run
    assert list(builder.finish()) == [pending]
    assert builder.pending() is None and [r.get("h") for r in handed] == ["outside"]
    assert pending.get("n", 1) == len(texts)
