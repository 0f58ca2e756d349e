"""`acp-bridge export CAPTURE --html OUT.html | --otlp`: a capture as one page, or as spans.

Owns: the options, writing the page whole (the page itself is capture/html.py) with its
progress, and what is said when the capture cannot be read or the page cannot be written.
Must never: write to a capture, or import the page's code or telemetry before they are asked for.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from acp_bridge.commands.captures import CAPTURE, capture_report, fail, finding_marks, reading, say
from acp_bridge.commands.output_file import NotAFile, refuse_special, written_whole


@click.command(short_help="Write a capture as one self-contained HTML page.")
@click.argument("capture", type=CAPTURE)
@click.option("--html", "out", type=click.Path(),
              metavar="OUT.html", help="Write the page to OUT.html (replaced whole once written).")
@click.option("--otlp", is_flag=True, help="Send the capture to an OpenTelemetry collector as the spans a live "
              "bridge sends, with their recorded times (the OTEL_* variables say where; no content is "
              "sent; needs the otel extra; docs/telemetry.md).")
def export(capture: str, out: str | None, otlp: bool) -> None:
    """Write a capture as one self-contained HTML page, to read and to share.

    The page needs no network. It has a sequence view of client, bridge and agent, grouped
    by turn, with a one-line preview of each message, rewrites as before/after with the
    changes marked, links between a request and its answer (with the latency) and from a
    dropped message to what the bridge sent in its place, a timing view per turn, the
    protocol findings `check` reports marked on their messages, and a filter box. Runs of
    message chunks are folded into one row with their text joined. The page draws only the
    rows on screen, so it stays quick with hundreds of thousands of messages; the export
    itself reads the capture once, in bounded memory. The capture's redaction is applied
    again.

    In the page's address, `#q=TEXT` presets the filter and `#m=SEQ` opens message SEQ.

    With --otlp, send the capture as OpenTelemetry spans instead (or as well)."""
    if out is None and not otlp:
        raise click.UsageError("say what to export to: --html OUT.html or --otlp")
    if out is not None:
        try:
            refuse_special(out)  # before the capture is read
        except NotAFile as exc:
            fail(f"--html: {exc}")
    if out is not None:
        _export_html(capture, out)
    if otlp:
        from acp_bridge.telemetry.offline import send_capture

        with reading(capture) as reader:
            status, said = send_capture(reader, capture)
        say(reader)
        click.echo(f"acp-bridge: {said}", err=True)
        if status:
            raise SystemExit(status)


def _export_html(capture: str, out: str) -> None:
    from acp_bridge.capture.html import write_page

    tty = sys.stderr.isatty()

    def progress(messages: int) -> None:
        if tty and messages % 20_000 < 2_000:
            click.echo(f"\racp-bridge: export: {messages} messages…", err=True, nl=False)

    try:
        # A file that is no capture is refused before the page is begun; the page is
        # readable by the user only, as the capture it comes from (umask may narrow it).
        with reading(capture) as reader, written_whole(out, 0o600) as file:
            report = capture_report(capture, Path(capture).name)  # a second read, of its own
            written = write_page(reader, file, title=Path(capture).name, progress=progress,
                                 findings=finding_marks(report), report=report)
    except NotAFile as exc:
        fail(f"--html: {exc}")
    except OSError as exc:  # the capture's read errors are the reader's
        fail(f"export: cannot write {out}: {exc.strerror or exc}", status=1)
    if tty:
        click.echo("\r", err=True, nl=False)
    say(reader)
    click.echo(f"acp-bridge: wrote {out} ({written.messages} messages in {written.rows} rows, "
               f"{written.turns} turns)", err=True)
