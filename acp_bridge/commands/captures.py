"""Commands that read a capture: `show`, `stats` and `export`.

Owns: reading capture files (whole, or followed as they grow), filters, colour, and writing
the exported page. The formatting itself is pure (`reader`); the page is `html`.
Must never: write to a capture, or import the export page code before `export` runs.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import click

from acp_bridge.capture.files import local_clock, read_lines, wait_for_file
from acp_bridge.capture.reader import (
    RecordFilter,
    Summary,
    detail_lines,
    finding_line,
    load_record,
    mark_line,
    summarize,
)
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.commands.output_file import NotAFile, refuse_special, written_whole
from acp_bridge.core.printable import printable
from acp_bridge.core.protocol import Json

_CAPTURE = click.Path(exists=True, dir_okay=False, readable=True)


_ARROW_COLOUR = {"->": "cyan", "<-": "magenta"}
_MARK_COLOUR = {"rewrite": "yellow", "drop": "red", "emit": "green", "error": "red"}


def styled(summary: Summary) -> str:
    """The summary line with ANSI colour (click.echo strips it when not on a terminal)."""
    parts = [click.style(summary.clock, dim=True),
             click.style(summary.arrow, fg=_ARROW_COLOUR.get(summary.arrow), bold=True),
             click.style(summary.label, bold=True)]
    if summary.session:
        parts.append(click.style(summary.session, fg="bright_black"))
    parts.append(click.style(summary.size, dim=True))
    for mark in summary.marks:
        colour = "blue" if mark == "[redacted]" else _MARK_COLOUR.get(summary.verdict, "white")
        parts.append(click.style(mark, fg=colour))
    return " ".join(parts)


@click.command()
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("-f", "--follow", is_flag=True,
              help="Keep reading as the capture grows, until its end record (Ctrl-C stops); "
                   "a capture not there yet is waited for.")
@click.option("--method", "methods", multiple=True, metavar="M",
              help="Only messages of method M (a response counts as its request's); repeatable.")
@click.option("--session", metavar="ID",
              help="Only messages of ACP session ID, or of the one session whose id starts with ID.")
@click.option("--update", "updates", multiple=True, metavar="KIND",
              help="Only session/update notifications of kind KIND (params.update.sessionUpdate, "
                   "e.g. prompt_suggestions_update); repeatable.")
@click.option("--direction", type=click.Choice(["to-agent", "to-client"]), help="Only one direction.")
@click.option("--detail", type=click.IntRange(0, 3), default=1, show_default=True,
              help="0 only failures, 1 one line per message, 2 plus params, 3 plus before/after of rewrites.")
@click.option("--findings", is_flag=True,
              help="Mark protocol findings (docs/health.md) under the messages they concern; with "
                   "--follow, the watchdog's finding records as they are written.")
def show(capture: str, follow: bool, methods: tuple[str, ...], session: str | None,
         updates: tuple[str, ...], direction: str | None, detail: int, findings: bool = False) -> None:
    """Print a capture, one line per message: time, arrow, method or response id,
    session, size and what the bridge did (rewrite, drop, bridge-sent, redacted). A session
    id longer than 12 characters shows as its first 8 and "…"; --session takes that prefix back
    (a prefix that fits several sessions is an error naming them).

    Colour on a terminal, plain in a pipe. With --follow it reads a capture that is still
    being written, like `tail -f`, and stops after the end record the bridge writes when it
    closes the capture; a capture that does not exist yet is waited for (start it before the
    editor). When nothing is shown (no message matched the filters, or none failed at
    --detail 0), stderr says how many records were read; exit status 0.
    """
    tally = _Tally()
    tally.keep = RecordFilter(methods, session, direction, updates)
    try:
        if follow and not os.path.exists(capture):
            click.echo(f"acp-bridge: waiting for {capture} to appear (Ctrl-C stops)", err=True)
            wait_for_file(capture)
        ctx = click.get_current_context()
        argument = next(param for param in ctx.command.params if param.name == "capture")
        _CAPTURE.convert(capture, argument, ctx)  # exists, is a file, can be read
        if findings and not follow:
            tally.marks = _findings_by_seq(capture)
        tally.findings = findings
        _show_capture(capture, follow, methods, session, updates, direction, detail, tally)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends --follow; that is the normal way out
    if not tally.shown:
        click.echo(f"acp-bridge: {capture}: {tally.read} records read, none matched"
                   f"{_in_force(tally.keep, detail)}", err=True)
    if tally.unreadable:
        raise SystemExit(1)


def _show_capture(capture: str, follow: bool, methods: tuple[str, ...], session: str | None,
                  updates: tuple[str, ...], direction: str | None, detail: int, tally: _Tally) -> None:
    if session is not None:
        session = _resolve_session(capture, session)
    keep = tally.keep = RecordFilter(methods, session, direction, updates)
    with open(capture, "rb") as file:
        for number, line in enumerate(read_lines(file, follow=follow), 1):
            if not line.strip():
                continue
            record = load_record(line)
            if record is None:
                tally.unreadable += 1
                click.echo(f"acp-bridge: {capture}:{number}: not a capture record", err=True)
                continue
            tally.read += 1
            if tally.findings and follow and record.get("type") == "finding" and keep.session in (
                    None, str(record.get("session"))):
                click.echo(click.style(finding_line(record, local_clock), fg="red"))
                continue
            shown = _show_record(record, keep, detail)
            tally.shown += shown
            marks = tally.marks.get(record.get("seq")) if shown and tally.marks else None
            for mark in marks or ():
                click.echo(click.style(mark, fg="red"))
            if follow and record.get("type") == "end":
                return  # the bridge closed the capture: nothing more will come


def _resolve_session(capture: str, given: str) -> str:
    """The session `given` names: itself when a session has that id, else the one session whose
    id starts with it (with --follow, among those already in the capture). Several: an error."""
    sessions: set[str] = set()
    with open(capture, "rb") as file:
        for line in read_lines(file):
            record = load_record(line) if line.strip() else None
            if record is not None and record.get("type") == "message" and record.get("session") is not None:
                sessions.add(str(record["session"]))
    if given in sessions:
        return given
    candidates = sorted(s for s in sessions if s.startswith(given))
    if len(candidates) > 1:
        raise click.BadParameter(f"{given!r} is the start of {len(candidates)} sessions: "
                                 f"{', '.join(map(printable, candidates))}", param_hint="'--session'")
    return candidates[0] if candidates else given


class _Tally:
    """Records read and messages shown, for the note when nothing was shown."""

    def __init__(self) -> None:
        self.read = 0
        self.shown = 0
        self.unreadable = 0
        self.keep = RecordFilter()
        self.findings = False  # --findings
        self.marks: dict[object, list[str]] = {}  # seq -> lines marking its findings


def _findings_by_seq(capture: str) -> dict[object, list[str]]:
    """The lines marking the capture's findings (`_findings`), by the seq of the message each
    concerns."""
    marks: dict[object, list[str]] = {}
    for seq, level, code, text in _findings(capture):
        marks.setdefault(seq, []).append(mark_line(level, code, text))
    return marks


def _findings(capture: str) -> Iterator[tuple[int, str, str, str]]:
    """(seq, level, code, text) of the capture's protocol findings, computed afterwards as
    `acp-bridge check` does (a capture written without the watchdog gets them too), from a
    second read of the capture, started when the first item is asked for."""
    from acp_bridge.health.offline import analyse

    try:
        report = analyse(capture, _CheckedCapture(capture))
    except (NotACapture, OSError) as exc:  # the page or listing goes on without them
        click.echo(f"acp-bridge: findings not marked: {exc}", err=True)
        return
    yield from sorted((f.seq, f.level.label, f.code, f.text) for f in report.findings if isinstance(f.seq, int))


def _in_force(keep: RecordFilter, detail: int) -> str:
    """The filters that were in force, as the options that set them (empty when none)."""
    options = [f"--method {m}" for m in keep.methods]
    if keep.session is not None:
        options.append(f"--session {keep.session}")
    options += [f"--update {u}" for u in keep.updates]
    if keep.direction is not None:
        options.append(f"--direction {keep.direction}")
    if detail == 0:
        options.append("--detail 0 (only failures)")
    return f" ({', '.join(options)})" if options else " (no messages in it)"


def _show_record(record: Json, keep: RecordFilter, detail: int) -> bool:
    """Print one record if it passes the filters; whether it was printed."""
    if record.get("type") != "message" or not keep(record):
        return False
    if detail == 0 and record.get("verdict") != "error":
        return False
    click.echo(styled(summarize(record, local_clock, short=True)))
    for line in detail_lines(record, detail):
        click.echo(line)
    return True


@click.command()
@click.argument("capture", type=_CAPTURE)
def stats(capture: str) -> None:
    """Summarise a capture: messages and bytes per method and direction, request latency
    (p50/p90/p99/max) per method, rules applied, malformed lines, unanswered requests."""
    aggregate = CaptureStats()
    with open(capture, "rb") as file:
        for line in read_lines(file):
            aggregate.add_line(line)
    for text in aggregate.report(local_clock):
        click.echo(text)


@click.command()
@click.argument("capture", type=_CAPTURE)
@click.option("--html", "out", type=click.Path(),
              metavar="OUT.html", help="Write the page to OUT.html (replaced whole once written).")
@click.option("--otlp", is_flag=True, help="Send the capture to an OpenTelemetry collector as the spans a live "
              "bridge sends, with their recorded times (the OTEL_* variables say where; no content is "
              "sent; needs the otel extra; docs/telemetry.md).")
def export(capture: str, out: str | None, otlp: bool) -> None:
    """Write a capture as one self-contained HTML page (no network needed): a sequence
    view of client, bridge and agent, grouped by turn, with a one-line preview of each
    message, rewrites as before/after with the changes marked, links between a request and
    its answer (with the latency) and from a dropped message to what the bridge sent in its
    place, a timing view per turn, the protocol findings `check` reports marked on their
    messages, and a filter box. Runs of message chunks are folded into
    one row with their text joined. The page draws only the rows on screen, so it stays
    quick with hundreds of thousands of messages; the export itself reads the capture once,
    in bounded memory. The capture's redaction is applied again.

    In the page's address, `#q=TEXT` presets the filter and `#m=SEQ` opens message SEQ.

    With --otlp, send the capture as OpenTelemetry spans instead (or as well)."""
    if out is None and not otlp:
        raise click.UsageError("say what to export to: --html OUT.html or --otlp")
    if out is not None:
        try:
            refuse_special(out)  # before the capture is read
        except NotAFile as exc:
            _fail(f"--html: {exc}")
    if not os.path.isfile(capture):
        _fail(f"{capture}: not a regular file, so not a capture")
    if out is not None:
        _export_html(capture, out)
    if otlp:
        from acp_bridge.telemetry.offline import send_capture

        try:
            status, said = send_capture(_CheckedCapture(capture), capture)
        except NotACapture as exc:
            _fail(str(exc))
        click.echo(f"acp-bridge: {said}", err=True)
        if status:
            raise SystemExit(status)


def _export_html(capture: str, out: str) -> None:
    from acp_bridge.capture.html import write_page

    reader = _CheckedCapture(capture)
    tty = sys.stderr.isatty()

    def progress(messages: int) -> None:
        if tty and messages % 20_000 < 2_000:
            click.echo(f"\racp-bridge: export: {messages} messages…", err=True, nl=False)

    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so that `finally` runs
    try:
        # Readable by the user only, as the capture it comes from (umask may narrow it).
        with written_whole(out, 0o600) as file:
            written = write_page(reader, file, title=Path(capture).name, progress=progress,
                                 findings=_findings(capture))
    except NotACapture as exc:
        _fail(str(exc))
    except NotAFile as exc:
        _fail(f"--html: {exc}")
    except OSError as exc:
        what = f"read {capture}" if reader.reading else f"write {out}"
        _fail(f"export: cannot {what}: {exc.strerror or exc}", status=1)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if tty:
        click.echo("\r", err=True, nl=False)
    if reader.malformed:
        click.echo(f"acp-bridge: {capture}: {reader.malformed} line(s) that are not capture records were "
                   f"skipped (the first at line {reader.first_malformed})", err=True)
    click.echo(f"acp-bridge: wrote {out} ({written.messages} messages in {written.rows} rows, "
               f"{written.turns} turns)", err=True)


class NotACapture(Exception):
    """The file read is not a capture this version reads."""


class _CheckedCapture:
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
        for number, line in enumerate(_lines(self.path), 1):
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


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _fail(message: str, status: int = 2) -> NoReturn:
    click.echo(f"acp-bridge: {message}", err=True)
    raise SystemExit(status)


def _lines(capture: str) -> Iterator[bytes]:
    with open(capture, "rb") as file:
        yield from read_lines(file)


COMMANDS: list[click.Command] = [show, stats, export]
