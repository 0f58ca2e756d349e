"""Commands that read a capture: show, stats, export. Placeholder for issue 5."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
