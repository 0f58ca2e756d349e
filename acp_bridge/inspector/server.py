"""Serving the inspector: a socket bound before anything is printed, Hypercorn's trio worker
on it, the watcher beside it, and a clean stop when told (on SIGINT or SIGTERM).

Must never: print anything (the command prints the address), or bind before it is asked to.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from acp_bridge.inspector.app import Inspector, build_app
from acp_bridge.inspector.guard import host_header


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_every_address(host: str) -> bool:
    """Does binding `host` listen on every address of the machine (`0.0.0.0`, `::`)?"""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: one the system picks).

    Raises:
        OSError: the address cannot be bound (in use, not this machine's).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def address(sock: socket.socket) -> tuple[str, int]:
    host, port = sock.getsockname()[:2]
    return str(host), int(port)


def url(sock: socket.socket, token: str) -> str:
    host, port = address(sock)
    return f"http://{host_header(host, port)}/?token={token}"


async def serve(sock: socket.socket, roots: list[str], token: str, *, alive: Callable[[int], bool],
                clock: Callable[[float], str], stop: Callable[[], Awaitable[None]],
                task_status: trio.TaskStatus[Inspector] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the inspector on `sock` (which it takes over) until `stop` returns (the command
    gives `shell.posix.until_interrupted`: Ctrl-C or SIGTERM)."""
    host, port = address(sock)
    inspector = Inspector(roots, alive=alive, clock=clock)
    app = build_app(inspector, token=token, host=host, port=port, loopback=is_loopback(host),
                    every_address=is_every_address(host))
    config = HypercornConfig()
    config.bind = [f"fd://{sock.detach()}"]
    config.graceful_timeout = 1.0
    config.accesslog = None
    config.errorlog = logging.getLogger("acp_bridge.inspector")  # to stderr, through logging
    async with trio.open_nursery() as nursery:

        async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
            await hypercorn_serve(app, config, shutdown_trigger=stop, task_status=task_status)  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()  # the watcher with it

        nursery.start_soon(inspector.watch)
        await nursery.start(run_server)
        task_status.started(inspector)
