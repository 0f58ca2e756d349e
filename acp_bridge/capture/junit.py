"""The one JUnit XML writer, for `check --junit` (a suite per capture, a case per finding
code) and `drive --junit` (a case per prompt turn).

Owns: the file's shape (`testsuites` > `testsuite` > `testcase` > `failure` or
`system-out`, with the `tests` and `failures` counts) and its escaping. Every attribute is
made `printable` and every text node `printable_lines` (a text keeps its line feeds): XML
1.0 has no way to write most C0 controls, U+FFFE, U+FFFF or a lone surrogate, even as a
character reference, and ElementTree writes them as they are, into a file no parser reads.
ElementTree escapes `&`, `<` and `>` (so a `]]>` in a text is written `]]&gt;`).
Must never: read or write files; the commands write what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from acp_bridge.core.printable import printable, printable_lines


@dataclass(frozen=True)
class Failure:
    message: str
    type: str
    text: str


@dataclass(frozen=True)
class Case:
    classname: str
    name: str
    failure: Failure | None = None
    system_out: str | None = None  # written when there is no failure


@dataclass(frozen=True)
class Suite:
    name: str
    cases: list[Case]
    system_out: str | None = None  # written after the cases


def _attr(text: str) -> str:
    return printable(text, quote_backslash=False)


def junit_xml(name: str, suites: list[Suite]) -> str:
    """The XML document (with its declaration and a final line feed) of `suites` under a
    `testsuites` named `name`; each suite and the whole count their cases and failures."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name=_attr(name))
    total = failures = 0
    for suite in suites:
        element = ET.SubElement(root, "testsuite", name=_attr(suite.name))
        for case in suite.cases:
            child = ET.SubElement(element, "testcase", classname=_attr(case.classname), name=_attr(case.name))
            if case.failure is not None:
                failure = ET.SubElement(child, "failure", message=_attr(case.failure.message),
                                        type=_attr(case.failure.type))
                failure.text = printable_lines(case.failure.text)
            elif case.system_out is not None:
                ET.SubElement(child, "system-out").text = printable_lines(case.system_out)
        failed = sum(case.failure is not None for case in suite.cases)
        element.set("tests", str(len(suite.cases)))
        element.set("failures", str(failed))
        if suite.system_out is not None:
            ET.SubElement(element, "system-out").text = printable_lines(suite.system_out)
        total += len(suite.cases)
        failures += failed
    root.set("tests", str(total))
    root.set("failures", str(failures))
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
