"""`acp-bridge show CAPTURE`: a capture printed one line per message, whole or followed as it grows.

Owns: the filters, colour, and the note when nothing was shown. The formatting itself is
pure (capture/summary.py). Must never: write to a capture.
"""

from __future__ import annotations

import dataclasses
import os

import click

from acp_bridge.capture.files import local_clock, open_capture, wait_for_file
from acp_bridge.capture.summary import (
    AmbiguousSession,
    RecordFilter,
    Summary,
    detail_lines,
    finding_line,
    mark_line,
    resolve_session,
    summarize,
)
from acp_bridge.commands.captures import CAPTURE, capture_findings, reading, say
from acp_bridge.core.protocol import Json

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


@click.command(short_help="Print a capture, one line per message.")
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
@click.option("--seq", "seqs", multiple=True, type=click.IntRange(min=0), metavar="N",
              help="Only message seq N, as check, stats, the page and the MCP server number them "
                   "(with --detail 2, what it said); repeatable.")
@click.option("--detail", type=click.IntRange(0, 3), default=1, show_default=True, metavar="0-3",
              help="0 only failures, 1 one line per message, 2 plus params, 3 plus before/after of rewrites.")
@click.option("--findings", is_flag=True,
              help="Mark protocol findings (docs/health.md) under the messages they concern; with "
                   "--follow, the watchdog's finding records as they are written.")
def show(capture: str, follow: bool, methods: tuple[str, ...], session: str | None,
         updates: tuple[str, ...], direction: str | None, seqs: tuple[int, ...], detail: int,
         findings: bool = False) -> None:
    """Print a capture, one line per message.

    Each line has the time, the arrow, the method or response id, the session, the size and
    what the bridge did (rewrite, drop, bridge-sent, redacted). A session
    id longer than 12 characters shows as its first 8 and "…"; --session takes that prefix back
    (a prefix that fits several sessions is an error naming them).

    Colour on a terminal, plain in a pipe. With --follow it reads a capture that is still
    being written, like `tail -f`, and stops after the end record the bridge writes when it
    closes the capture; a capture that does not exist yet is waited for (start it before the
    editor). When nothing is shown (no message matched the filters, or none failed at
    --detail 0), stderr says how many records were read; exit status 0.
    """
    tally = _Tally()
    tally.keep = RecordFilter(methods, session, direction, updates, seqs)
    try:
        if follow and not os.path.exists(capture):
            click.echo(f"acp-bridge: waiting for {capture} to appear (Ctrl-C stops)", err=True)
            wait_for_file(capture)
        ctx = click.get_current_context()
        argument = next(param for param in ctx.command.params if param.name == "capture")
        CAPTURE.convert(capture, argument, ctx)  # exists, is a file, can be read
        tally.findings = findings
        _show_capture(capture, follow, detail, tally)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends --follow; that is the normal way out
    if not tally.shown:
        click.echo(f"acp-bridge: {capture}: {tally.read} records read, none matched"
                   f"{_in_force(tally.keep, detail)}", err=True)


def _show_capture(capture: str, follow: bool, detail: int, tally: _Tally) -> None:
    with reading(capture, follow=follow) as reader:
        if tally.keep.session is not None:
            tally.keep = dataclasses.replace(tally.keep, session=_resolve_session(capture, tally.keep.session))
        if tally.findings and not follow:
            tally.marks = _findings_by_seq(capture)
        keep = tally.keep
        for record in reader:
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
                break  # the bridge closed the capture: nothing more will come
    say(reader)


def _resolve_session(capture: str, given: str) -> str:
    """The session `given` names (`resolve_session`), among those of the capture (with
    --follow, those already in it). A prefix of several: an error naming them."""
    sessions: set[str] = set()
    with open_capture(capture) as reader:
        for record in reader:
            if record.get("type") == "message" and record.get("session") is not None:
                sessions.add(str(record["session"]))
    try:
        return resolve_session(given, sessions)
    except AmbiguousSession as exc:
        raise click.BadParameter(str(exc), param_hint="'--session'") from None


class _Tally:
    """Records read and messages shown, for the note when nothing was shown."""

    def __init__(self) -> None:
        self.read = 0
        self.shown = 0
        self.keep = RecordFilter()
        self.findings = False  # --findings
        self.marks: dict[object, list[str]] = {}  # seq -> lines marking its findings


def _findings_by_seq(capture: str) -> dict[object, list[str]]:
    """The lines marking the capture's findings (`_findings`), by the seq of the message each
    concerns."""
    marks: dict[object, list[str]] = {}
    for seq, level, code, text in capture_findings(capture):
        marks.setdefault(seq, []).append(mark_line(level, code, text))
    return marks


def _in_force(keep: RecordFilter, detail: int) -> str:
    """The filters that were in force, as the options that set them (empty when none)."""
    options = [f"--method {m}" for m in keep.methods]
    if keep.session is not None:
        options.append(f"--session {keep.session}")
    options += [f"--update {u}" for u in keep.updates]
    if keep.direction is not None:
        options.append(f"--direction {keep.direction}")
    options += [f"--seq {seq}" for seq in keep.seqs]
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
