"""The JUnit file `check --junit` writes parses, whatever the texts in it hold: XML 1.0 has
no spelling for most C0 controls, U+FFFE, U+FFFF or a lone surrogate."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.commands.check import junit_xml
from acp_bridge.core.printable import printable_lines
from acp_bridge.health.findings import CODES, Finding, Level
from acp_bridge.health.offline import Report

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


@given(path=ANY_TEXT, session=ANY_TEXT, text=ANY_TEXT, level=st.sampled_from([Level.WARNING, Level.ERROR]))
def test_junit_parses_and_says_each_text_printably(path: str, session: str, text: str, level: Level) -> None:
    """One capture with one finding whose path, session and text are anything at all: the
    file parses, as UTF-8, and tells the finding's text, made printable."""
    code = "update-unknown-session"  # a warning: a failure or a system-out by the threshold
    report = Report(path or "c.jsonl", findings=[Finding(code, CODES[code].level, session, text, 0.0, seq=3)],
                    counts={code: 1})
    data = junit_xml([report], level, with_schema=False).encode("utf-8")
    case = next(c for c in ET.fromstring(data).iter("testcase") if c.get("name") == code)
    told = case.find("failure" if level is Level.WARNING else "system-out")
    assert told is not None and told.text is not None
    assert f"seq 3: {printable_lines(text)}" in told.text
