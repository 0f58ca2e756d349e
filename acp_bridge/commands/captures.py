"""What the commands that read a capture (`show`, `stats`, `export`) share: the capture
argument, the checked reading of a capture's records, and its findings.

Must never: write to a capture.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from acp_bridge.capture.files import read_lines
from acp_bridge.capture.reader import load_record
from acp_bridge.core.protocol import Json

CAPTURE = click.Path(exists=True, dir_okay=False, readable=True)


def capture_findings(capture: str) -> Iterator[tuple[int, str, str, str]]:
    """(seq, level, code, text) of the capture's protocol findings, computed afterwards as
    `acp-bridge check` does (a capture written without the watchdog gets them too), from a
    second read of the capture, started when the first item is asked for."""
    from acp_bridge.health.offline import analyse

    try:
        report = analyse(capture, CheckedCapture(capture))
    except (NotACapture, OSError) as exc:  # the page or listing goes on without them
        click.echo(f"acp-bridge: findings not marked: {exc}", err=True)
        return
    yield from sorted((f.seq, f.level.label, f.code, f.text) for f in report.findings if isinstance(f.seq, int))


class NotACapture(Exception):
    """The file read is not a capture this version reads."""


class CheckedCapture:
    """The records of a capture file, checked as they are read: the first line must be a
    header of a format this version reads; later lines that are not records (a torn last
    line, a line edited by hand) are counted and skipped."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.malformed = 0
        self.first_malformed = 0
        self.reading = False

    def __iter__(self) -> Iterator[Json]:
        from acp_bridge.capture.records import FORMAT_VERSION, known_format

        number = 0
        self.reading = True
        for number, line in enumerate(capture_lines(self.path), 1):
            record = load_record(line)
            if number == 1:
                version = record.get("format") if record is not None and record.get("type") == "header" else None
                if record is None or record.get("type") != "header":
                    raise NotACapture(f"{self.path}:1: not a capture (the first line is not a header record)")
                if not known_format(version):
                    raise NotACapture(f"{self.path}:1: capture format {version!r}; this acp-bridge reads "
                                      f"format {FORMAT_VERSION}")
            if record is None:
                if line.strip():
                    self.malformed += 1
                    self.first_malformed = self.first_malformed or number
                continue
            self.reading = False
            yield record
            self.reading = True
        self.reading = False
        if number == 0:
            raise NotACapture(f"{self.path}: empty, not a capture")


def capture_lines(capture: str) -> Iterator[bytes]:
    with open(capture, "rb") as file:
        yield from read_lines(file)
