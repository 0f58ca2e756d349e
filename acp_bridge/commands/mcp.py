"""`acp-bridge mcp [DIR|CAPTURE]...`: a read-only MCP server over captures, on stdio
(docs/mcp.md).

Owns: the command, its folders, and saying in one line how to install the `mcp` extra
when it is missing (exit 2) before anything is imported of it. The server itself is
`acp_bridge.mcp`. Must never: write to stdout (it carries only the MCP protocol) or to a
capture.
"""

from __future__ import annotations

import click

from acp_bridge.commands.captures import fail
from acp_bridge.commands.paths import UserPath


@click.command(short_help="Serve captures to an MCP client on stdin/stdout.")
@click.argument("roots", nargs=-1, type=UserPath(exists=True), metavar="[DIR|CAPTURE]...")
def mcp(roots: tuple[str, ...]) -> None:
    """Serve captures to your coding agent, as a read-only MCP server on stdin/stdout.

    It serves the captures in DIR (each `*.jsonl` capture directly in it) and the CAPTURE
    files given, default the current folder: an agent lists
    them, reads their messages, findings, stats and the migration verdict, searches and
    compares them. Read-only: nothing outside the given folders is read (a link leading out
    is not followed), nothing is written. It ends when stdin closes (exit 0), or at once when
    stdout is closed (exit 1). Needs the `mcp`
    extra: pip install 'acp-bridge-proxy[mcp]' (in a clone: pip install '.[mcp]').
    """
    from acp_bridge.mcp import missing_sdk

    problem = missing_sdk()
    if problem is not None:
        fail(problem)
    from acp_bridge.mcp.server import serve
    from acp_bridge.mcp.stdio import StdoutGone
    from acp_bridge.shell.posix import process_exists

    try:
        serve(roots or (".",), alive=process_exists)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except StdoutGone:  # the client stopped reading: nothing more can reach it
        click.echo("acp-bridge: mcp: stdout was closed; stopping", err=True)
        raise SystemExit(1) from None
