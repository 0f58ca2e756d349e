"""docs/health.md lists every finding code with its level, and nothing else; the capture
format documents the finding record's fields."""

from __future__ import annotations

import re

from acp_bridge.health.findings import CODES, Finding, Level
from tests.conftest import ROOT

HEALTH = (ROOT / "docs" / "health.md").read_text(encoding="utf-8")
FORMAT = (ROOT / "docs" / "capture-format.md").read_text(encoding="utf-8")


def test_health_md_lists_every_code_with_its_level() -> None:
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (info|warning|error) \|", HEALTH, flags=re.MULTILINE)
    assert dict(rows) == {code: info.level.label for code, info in CODES.items()}
    assert len(rows) == len(CODES)


def test_capture_format_documents_each_field_of_a_finding_record() -> None:
    section = FORMAT.split("## `finding`", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)`", section, flags=re.MULTILINE))
    documented |= {"direction", "method", "id", "mono"}  # documented two or three to a row
    record = Finding("update-malformed", Level.ERROR, "s", "text", 1.0, 3).record(2.0)
    assert set(record) | {"total"} == documented
