"""`acp-bridge stats CAPTURE`: a capture summarised (the counting itself is capture/stats.py).

Must never: write to a capture.
"""

from __future__ import annotations

import click
import orjson

from acp_bridge.capture.files import local_clock
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.commands.captures import CAPTURE, reading, say


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
        click.echo(orjson.dumps(aggregate.as_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        for text in aggregate.report(local_clock):
            click.echo(text)
    say(reader)
