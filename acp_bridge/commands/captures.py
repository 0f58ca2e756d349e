"""What the commands that read a capture (`show`, `stats`, `export`, `check`, `replay`, `diff`,
`drive`) share: the capture argument, reading it through the one reader (a file that is no
capture, or a line in it that is no record, is one line and exit 2; a torn last line is said
once the records are read), its findings, and `--json`'s writing.

Must never: write to a capture.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import click
import orjson

from acp_bridge.capture.files import open_capture
from acp_bridge.capture.reader import CaptureReader, UnreadableCapture
from acp_bridge.core.printable import printable
from acp_bridge.core.protocol import Json

CAPTURE = click.Path(exists=True, dir_okay=False, readable=True)


def capture_report(capture: str, name: str | None = None) -> Json | None:
    """The capture's findings and migration report, as `check --json` has it for one capture
    (computed afterwards, as `check` does: a capture written without the watchdog gets them
    too), from a read of its own; None, said on stderr, when it cannot be read."""
    from acp_bridge.health.offline import findings_json

    try:
        with open_capture(capture, strict=False) as reader:
            return findings_json(name or capture, reader)
    except UnreadableCapture as exc:  # the page or listing goes on without them
        click.echo(f"acp-bridge: findings not marked: {exc}", err=True)
        return None


def finding_marks(report: Json | None) -> list[tuple[int, str, str, str]]:
    """(seq, level, code, text) of each finding of a report that names its message."""
    marks = [(o["seq"], f["level"], f["code"], o["message"]) for f in (report or {}).get("findings", ())
             for o in f["occurrences"] if isinstance(o["seq"], int)]
    return sorted(marks)


def capture_findings(capture: str) -> Iterator[tuple[int, str, str, str]]:
    """(seq, level, code, text) of the capture's protocol findings, from a second read of the
    capture, started when the first item is asked for."""
    yield from finding_marks(capture_report(capture))


@contextmanager
def reading(capture: str, *, strict: bool = True, follow: bool = False) -> Iterator[CaptureReader]:
    """The capture's records, by the one reader's policy, the same for every command: a file
    that is no capture, cannot be read, or has a line that is no record (but a torn last
    one) is one line naming file and line, and exit 2. `say` the reader's notes (a torn last
    line) once the records are read."""
    try:
        with open_capture(capture, strict=strict, follow=follow) as reader:
            yield reader
    except UnreadableCapture as exc:
        fail(str(exc))


def say(reader: CaptureReader) -> None:
    """The reader's notes (lines skipped, a torn last line), once the records are read."""
    for note in reader.notes():
        click.echo(f"acp-bridge: {printable(note, quote_backslash=False)}", err=True)


def dumps_json(data: Any) -> str:
    """`data` as indented JSON text for `--json` (an integer beyond 64 bits kept, with all its
    digits; anything orjson cannot write, as the stdlib writes it)."""
    try:
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        import json

        return json.dumps(data, indent=2)


def fail(message: str, status: int = 2) -> NoReturn:
    """One line on stderr, then exit with `status`. The message may quote a capture or a path
    from it: its control characters are escaped."""
    click.echo(f"acp-bridge: {printable(message, quote_backslash=False)}", err=True)
    raise SystemExit(status)
