"""`acp-bridge rules [RUN OPTIONS]`: the rules a configuration would run, in order, and where
each comes from (built-in, a `[[rewrite]]` table, an entry point, a rule file).

Owns: the command and its listing. The run options are `run`'s own declarations, copied,
and settled by `run`'s config layering, so `run` in a command line can be swapped for
`rules` (an agent command after `--` is accepted and not started). Loading the rules runs
the rule files, as `run` would, and bad input is the same one line, exit 2. Must never:
start the agent.
"""

from __future__ import annotations

import copy
from typing import Any

import click

from acp_bridge.commands import EXIT_USAGE, prints_to_stderr
from acp_bridge.commands.run import resolve_config
from acp_bridge.commands.run import run as run_command
from acp_bridge.core.printable import printable
from acp_bridge.errors import ConfigError

_NO_AGENT = ("acp-bridge-rules",)  # `resolve_config` wants an agent command; none is started


@click.command("rules", short_help="List the rules `run` would apply, in their order.")
@click.argument("agent", nargs=-1, type=click.UNPROCESSED, metavar="[-- AGENT [ARG...]]")
@click.pass_context
def rules(ctx: click.Context, /, config_file: str | None, agent: tuple[str, ...], **options: Any) -> None:
    """List the rules that `acp-bridge run` with the same options would run, in order.

    The order is the one in which they see each message, and each rule comes with where it
    comes from. Rule files are loaded (they are
    code) and checked as `run` checks them: exit status 2 and one line if one is bad.
    """
    from acp_bridge.config.rules import BUILT_IN, load_rules
    from acp_bridge.core.rewrites import built_ins

    try:
        config = resolve_config(ctx, config_file, agent or _NO_AGENT, options)
        with prints_to_stderr():  # a rule file's own prints: stdout is the listing
            loaded = load_rules(config)
    except ConfigError as exc:
        click.echo(f"acp-bridge: {exc}", err=True)
        ctx.exit(EXIT_USAGE)
    # The relay's own repairs (stray output) are no rule objects: they take a line out of the
    # stream before any rule would see it, so they come first.
    rows = [(built_in.name, BUILT_IN) for built_in in built_ins() if built_in.rule is None and built_in.is_on(config)]
    rows += [(one.rule.name, one.origin) for one in loaded]
    if not rows:
        click.echo("no rules: every line goes through as it came")
        return
    width = max(len(name) for name, _ in rows)
    for index, (name, origin) in enumerate(rows, 1):
        click.echo(printable(f"{index:>2}. {name:<{width}}  {origin}", quote_backslash=False))


# The run options, as `run` declares them (copies: click keeps state on a parameter).
rules.params[:0] = [copy.copy(param) for param in run_command.params if isinstance(param, click.Option)]
