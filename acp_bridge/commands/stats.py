"""`acp-bridge stats CAPTURE`: a capture summarised (the counting itself is capture/stats.py).

Must never: write to a capture.
"""

from __future__ import annotations

import click

from acp_bridge.capture.files import local_clock
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.commands.captures import CAPTURE, reading, say


@click.command()
@click.argument("capture", type=CAPTURE)
def stats(capture: str) -> None:
    """Summarise a capture: messages and bytes per method and direction, request latency
    (p50/p90/p99/max) per method, rules applied, malformed lines, unanswered requests."""
    aggregate = CaptureStats()
    with reading(capture) as reader:
        for record in reader:
            aggregate.add(record)
    aggregate.unreadable = reader.skipped
    for text in aggregate.report(local_clock):
        click.echo(text)
    say(reader)
