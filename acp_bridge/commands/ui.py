"""`acp-bridge ui [DIR|CAPTURE]...`: the live inspector in a browser (the `ui` extra).

Owns: the options, the one-line refusal without the extra, binding before anything is
printed, the address on stdout (its first and only line, flushed), the warning when bound
beyond loopback, `--open`, and exit 0 on Ctrl-C. The server is acp_bridge/inspector.
Must never: import the inspector (Starlette, Hypercorn) before `ui` runs, or print anything
else on stdout.
"""

from __future__ import annotations

import secrets
import sys
from functools import partial

import click

from acp_bridge.commands.captures import fail
from acp_bridge.extras import install

INSTALL = f"acp-bridge: the inspector needs the ui extra: {install('ui')}"


@click.command(short_help="Serve a live inspector of captures in the browser.")
@click.argument("paths", nargs=-1, type=click.Path(exists=True), metavar="[DIR|CAPTURE]...")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, metavar="N",
              help="The port to listen on (0: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, metavar="H",
              help="The address to listen on. Anything but loopback lets others on the network try the door.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
def ui(paths: tuple[str, ...], port: int, host: str, open_browser: bool) -> None:
    """Serve a live inspector of captures in the browser.

    It shows the captures in DIR (default: the current folder) and each CAPTURE given:
    the captures newest first, live ones marked, each one's messages as
    they are written, with the filters of `show`, the latency table of `stats` and the
    findings and verdict of `check`. Prints its address, a random token included, as the
    one line of stdout; only GET requests that carry the token, name the bound address as
    Host and come from no other site are answered (docs/inspector.md). Ctrl-C stops it."""
    try:
        import hypercorn  # noqa: F401
        import starlette  # noqa: F401
    except ImportError:
        click.echo(INSTALL, err=True)
        raise SystemExit(2) from None
    import trio

    from acp_bridge.capture.files import local_clock
    from acp_bridge.inspector.server import bind, is_every_address, is_loopback, serve, url
    from acp_bridge.shell.posix import process_exists, stdout_hidden, until_interrupted

    try:
        sock = bind(host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    token = secrets.token_urlsafe(32)
    address = url(sock, token)
    click.echo(address)
    sys.stdout.flush()
    if not is_loopback(host):
        click.echo(f"acp-bridge: warning: listening on {host}, beyond this machine: anyone who can reach it "
                   "and learns the token reads your captures", err=True)
        if is_every_address(host):
            click.echo(f"acp-bridge: from another machine, open the address with this machine's IP address in "
                       f"place of {host}", err=True)
    if open_browser:
        import webbrowser

        with stdout_hidden():  # a browser's chatter must not land on our stdout
            webbrowser.open(address)
    try:
        trio.run(partial(serve, sock, list(paths) or ["."], token, alive=process_exists, clock=local_clock,
                         stop=until_interrupted))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()  # the server took it over (detached) unless it never ran
