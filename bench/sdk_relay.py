"""A relay written with the official Python SDK's stdio plumbing, as a user might write one.

It uses the SDK's `stdio_streams` and `spawn_stdio_transport` (asyncio streams with the
SDK's 50 MB line limit), and, like the SDK's connection does for every message, decodes each
line as JSON and encodes it again before forwarding. No rules: this is the floor such a
relay starts from.
"""

from __future__ import annotations

import asyncio
import json
import sys

from acp.stdio import stdio_streams
from acp.transports import spawn_stdio_transport

LIMIT = 50 * 1024 * 1024


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        try:
            line = json.dumps(json.loads(line)).encode() + b"\n"
        except ValueError:
            pass
        writer.write(line)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def main(command: list[str]) -> None:
    in_reader, out_writer = await stdio_streams(limit=LIMIT)
    async with spawn_stdio_transport(command[0], *command[1:], limit=LIMIT, stderr=None) as (reader, writer, process):
        await asyncio.gather(pipe(in_reader, writer), pipe(reader, out_writer))
        await process.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
