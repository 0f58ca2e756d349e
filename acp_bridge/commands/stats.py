"""`acp-bridge stats CAPTURE`: a capture summarised (the counting itself is capture/stats.py).

Must never: write to a capture.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from acp_bridge.capture.files import local_clock
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.commands.captures import CAPTURE, dumps_json, reading, say

ROWS_PER_WRITE = 1000  # unanswered requests written at a time by --json


@click.command(short_help="Summarise a capture: messages, bytes, latency, rules.")
@click.argument("capture", type=CAPTURE)
@click.option("--json", "as_json", is_flag=True, help="Print the same figures as JSON (latencies in seconds).")
def stats(capture: str, as_json: bool) -> None:
    """Summarise a capture: messages, bytes, latency and rules.

    Messages and bytes per method and direction, request latency (p50/p90/p99/max) per
    method, rules applied, malformed lines, unanswered requests."""
    aggregate = CaptureStats()
    with reading(capture) as reader:
        for record in reader:
            aggregate.add(record)
    if as_json:
        for text in json_text(aggregate):
            click.echo(text, nl=False)
        click.echo()
    else:
        for text in aggregate.report(local_clock):
            click.echo(text)
    say(reader)


def json_text(aggregate: CaptureStats) -> Iterator[str]:
    """`dumps_json(aggregate.as_json())` in pieces: the unanswered requests a thousand at a
    time, each the text `dumps_json` makes of it indented two levels deeper (a million as
    dicts, and the text of them all, took a gigabyte more)."""
    head = dumps_json(aggregate.as_json(unanswered=0))
    rows = aggregate.unanswered_json()
    first = next(rows, None)
    if first is None:
        yield head
        return
    yield head.removesuffix("[]\n}") + "["
    batch = ["\n    " + dumps_json(first).replace("\n", "\n    ")]
    for row in rows:
        if len(batch) == ROWS_PER_WRITE:
            yield "".join(batch)
            batch.clear()
        batch.append(",\n    " + dumps_json(row).replace("\n", "\n    "))
    yield "".join(batch) + "\n  ]\n}"
