"""The one JUnit XML writer: its shape, counts and escaping, byte for byte."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from acp_bridge.capture.junit import Case, Failure, Suite, junit_xml

HEAD = "<?xml version='1.0' encoding='utf-8'?>\n"

CASES = [
    pytest.param("empty", [], HEAD + '<testsuites name="empty" tests="0" failures="0" />\n', id="no-suite"),
    pytest.param("n", [Suite("s", [])],
                 HEAD + '<testsuites name="n" tests="0" failures="0"><testsuite name="s" tests="0" failures="0" />'
                 "</testsuites>\n", id="empty-suite"),
    pytest.param("n", [Suite("s", [], system_out="verdict: ok")],
                 HEAD + '<testsuites name="n" tests="0" failures="0"><testsuite name="s" tests="0" failures="0">'
                 "<system-out>verdict: ok</system-out></testsuite></testsuites>\n", id="empty-suite-with-out"),
    pytest.param("n", [Suite("s", [Case("c", "pass"), Case("c", "fail", failure=Failure("m", "error", "t")),
                                   Case("c", "noted", system_out="o")]),
                       Suite("t", [Case("c", "fail", failure=Failure("m", "warning", "x\ny"))])],
                 HEAD + '<testsuites name="n" tests="4" failures="2">'
                 '<testsuite name="s" tests="3" failures="1"><testcase classname="c" name="pass" />'
                 '<testcase classname="c" name="fail"><failure message="m" type="error">t</failure></testcase>'
                 '<testcase classname="c" name="noted"><system-out>o</system-out></testcase></testsuite>'
                 '<testsuite name="t" tests="1" failures="1"><testcase classname="c" name="fail">'
                 '<failure message="m" type="warning">x\ny</failure></testcase></testsuite></testsuites>\n',
                 id="counts-and-attribute-order"),
    pytest.param("a\x1bb", [Suite("tab\there\nline", [Case("c\x00", "n\u202e",
                                                             failure=Failure('say "<x>" & \x07', "t\r", "]]>\x1b[31m\ny\ufffe"))])],
                 HEAD + '<testsuites name="a\\u001bb" tests="1" failures="1">'
                 '<testsuite name="tab\\there\\nline" tests="1" failures="1">'
                 '<testcase classname="c\\u0000" name="n\\u202e">'
                 '<failure message="say &quot;&lt;x&gt;&quot; &amp; \\u0007" type="t\\r">'
                 "]]&gt;\\u001b[31m\ny\\ufffe</failure></testcase></testsuite></testsuites>\n",
                 id="escaping"),
    pytest.param("n", [Suite("s", [Case("c", "n", system_out="a\\u001b \ud800 ]]>")])],
                 HEAD + '<testsuites name="n" tests="1" failures="0"><testsuite name="s" tests="1" failures="0">'
                 '<testcase classname="c" name="n"><system-out>a\\u001b \\ud800 ]]&gt;</system-out></testcase>'
                 "</testsuite></testsuites>\n", id="backslashes-kept-surrogate-escaped"),
]


@pytest.mark.parametrize(("name", "suites", "expected"), CASES)
def test_the_writer_writes_exactly(name: str, suites: list[Suite], expected: str) -> None:
    text = junit_xml(name, suites)
    assert text == expected
    ET.fromstring(text.encode("utf-8"))  # and any XML parser reads it


def test_a_case_with_a_failure_writes_no_system_out() -> None:
    text = junit_xml("n", [Suite("s", [Case("c", "n", failure=Failure("m", "t", "f"), system_out="o")])])
    assert "<system-out>" not in text
