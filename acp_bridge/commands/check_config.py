"""`acp-bridge check-config FILE`: a config file validated, its effective settings printed.

Owns: printing the settings as JSON with secrets masked, and exit 2 with the error (which
names the key) for an invalid file. Must never: print a secret.
"""

from __future__ import annotations

import json

import click

from acp_bridge.commands import EXIT_USAGE, prints_to_stderr
from acp_bridge.config.layers import load_config
from acp_bridge.errors import ConfigError


@click.command("check-config", short_help="Validate a config FILE and print the effective settings.")
@click.argument("file", type=click.Path(dir_okay=False))
def check_config(file: str) -> None:
    """Validate a config FILE and print the effective settings as JSON.

    Exits 0 for a valid file and 2 for an invalid one (the error names the key). The rule
    files it names are loaded (they are code), as `run` loads them. The values
    are the effective ones ([bridge] strict shows as system_prompt.strict too); secrets are
    masked: agent.env values print as "<redacted>" and the system prompt text as its length.
    """
    try:
        config = load_config(file)
        if config.rules.files or config.rules.enable:  # checked as `run` checks them: loaded
            from acp_bridge.config.rules import load_rules

            with prints_to_stderr():  # stdout is the settings' JSON
                load_rules(config)
    except ConfigError as exc:
        click.echo(f"acp-bridge: {exc}", err=True)
        raise SystemExit(EXIT_USAGE) from None
    click.echo(json.dumps(config.printable(), indent=2))
