"""A message's content nested as deep as a capture can hold still makes a row.

The page's preview reads the text of content blocks with `core/shapes.content_text`, which
walks lists within lists and wrapped content without recursion: a prompt nested 900 deep
(orjson reads 1,024 levels) once raised RecursionError and ended `export --html`.
"""

from __future__ import annotations

from acp_bridge.capture.html_rows import RowBuilder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.capture.summary import utc_clock


def test_a_prompt_nested_900_deep_is_a_row_with_its_text() -> None:
    depth = 900
    raw = ('{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":'
           + "[" * depth + '{"type":"text","text":"deep"}' + "]" * depth + "}}\n")
    record = {"type": "message", "seq": 1, "time": 1e9, "mono": 1.0, "direction": "to-agent", "kind": "request",
              "verdict": "pass", "method": "session/prompt", "id": 1, "session": "s1", "rules": [],
              "size": len(raw), "raw": raw}
    builder = RowBuilder(Redactor(()), utc_clock)
    rows = [*builder.add(record), *builder.finish()]
    assert [(row.get("h"), row.get("p")) for row in rows] == [("turn", None), (None, "deep")]
