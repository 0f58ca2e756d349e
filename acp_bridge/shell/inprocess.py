"""An agent behind the bridge's relay, with its client in this process (`acp-bridge drive`).

Owns: `with_agent`: the agent started as `run` starts it (its own process group, stderr
passed through, the stop ladder), behind a relay with no rules, recorded by the bridge's
own capture, and a client task on the other end of an in-memory connection; and how the
run ends: the client done (the agent's input closed, its grace to exit, then the ladder) or
asking for it to be stopped (SIGTERM, grace, SIGKILL at once). Must never: interpret
messages (the client task does), or leave the agent running.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import trio
import trio.testing

from acp_bridge.config import Config
from acp_bridge.core import MIB, Relay
from acp_bridge.shell.capture_file import open_capture_for_writing
from acp_bridge.shell.run import serve


@dataclass
class AgentRun:
    """How the agent's run went."""

    status: int | None = None  # its exit status (None: stopped by the client's request)
    cannot_start: str | None = None  # why it could not be started
    capture: str | None = None  # the capture written (a fresh name when the path was taken)


Client = Callable[[trio.abc.HalfCloseableStream], Awaitable[bool]]


async def with_agent(config: Config, client: Client, *, argv: Sequence[str] | None = None) -> AgentRun:
    """Run `client` against the agent of `config`, through a relay with no rules, recorded
    to `config.capture.path`. `client` returns True to have the agent stopped at once.

    Raises:
        CaptureError: the capture cannot be created or written (it is required here).
    """
    run = AgentRun()
    relay = Relay((), max_line=config.relay.parse_limit_mib * MIB)
    ours, theirs = trio.testing.lockstep_stream_pair()
    with open_capture_for_writing(config, argv=list(sys.argv if argv is None else argv)) as capture:
        run.capture = capture.path if capture is not None else None
        drain = trio.CancelScope()  # ends with the agent's run
        async with trio.open_nursery() as nursery:
            def cannot_start(reason: str) -> None:
                run.cannot_start = reason

            async def agent() -> None:
                run.status = await serve(config, relay, theirs, capture, unavailable=cannot_start)
                drain.cancel()
                if run.cannot_start is not None:
                    nursery.cancel_scope.cancel()

            nursery.start_soon(agent)
            if await client(ours):
                nursery.cancel_scope.cancel()  # run_process's deliver_cancel: SIGTERM, grace, SIGKILL
            else:
                await ours.send_eof()
                with drain:  # the connection holds nothing: unread, the agent's output would stall the relay
                    await _read_and_drop(ours)
    return run


async def _read_and_drop(stream: trio.abc.ReceiveStream) -> None:
    """What the agent writes once its client is done (recorded in the capture all the same)."""
    try:
        while await stream.receive_some(1 << 16):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
