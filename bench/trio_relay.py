"""The least a trio process in the middle can do: copy bytes both ways, nothing else.

No framing, no parsing, no rules, no capture; it reads before it waits and writes straight to
the pipe, as the bridge does. It is the floor for the bridge's added latency and start-up:
what any relay written on trio costs on this machine before it looks at a single message.

    python -m bench.trio_relay AGENT [ARGS...]
"""

from __future__ import annotations

import os
import subprocess
import sys

import trio
from trio.lowlevel import FdStream


async def copy(source: int, sink: int) -> None:
    while True:
        try:
            data = os.read(source, 1 << 20)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(source)
            continue
        if not data:
            return
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(sink, view):]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sink)


async def main(command: list[str]) -> int:
    agent = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert isinstance(agent.stdin, FdStream) and isinstance(agent.stdout, FdStream)
    stdin = agent.stdin
    to_agent, from_agent = stdin.fileno(), agent.stdout.fileno()
    os.set_blocking(0, False)
    os.set_blocking(1, False)

    async def client_to_agent() -> None:
        try:
            await copy(0, to_agent)
        except BrokenPipeError:
            pass  # the agent exited without reading it all: the rest has no one to go to
        await stdin.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(client_to_agent)
        await copy(from_agent, 1)
        nursery.cancel_scope.cancel()
    return await agent.wait()


if __name__ == "__main__":
    sys.exit(trio.run(main, sys.argv[1:]))
