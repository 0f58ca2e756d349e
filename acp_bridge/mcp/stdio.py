"""The wire in front of the MCP SDK's stdio transport, for `acp-bridge mcp` (`server`).

Owns: the protocol's own copies of stdin and stdout (while the server runs, fd 0 reads
/dev/null and fd 1 points at stderr for everyone else, so stdout carries only protocol
lines), `Requests`, which answers each line the SDK would drop unanswered (no JSON, a
batch, params that are no object, an id it refuses, a line over MAX_REQUEST) with the
JSON-RPC error it is owed, and `Output`, which writes each answer whole and stops the server
at once when stdout is closed (`StdoutGone`).
Must never: be imported but by `server`, hold a line longer than MAX_REQUEST, write anything
but whole JSON-RPC lines to the protocol's stdout, or let a blocked read hold the exit up.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import anyio.to_thread
import mcp_types
import orjson

from acp_bridge.core.lines import MIB

READ_SIZE = 1 << 16  # bytes of stdin read at a time
MAX_REQUEST = 16 * MIB  # the longest request line read (a tool call's arguments are small)


class StdoutGone(Exception):
    """stdout was closed under the server: nothing it answers can reach the client."""


class Output:
    """The protocol's stdout: each write is one whole line (the SDK's answers and the
    refusals of `Requests`), one at a time, straight to the descriptor (no buffer)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.gone = False
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return f"<Output fd={self.fd} gone={self.gone}>"

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    async def write(self, text: str) -> None:
        async with self._lock:
            if self.gone:
                raise StdoutGone
            try:
                await anyio.to_thread.run_sync(self._write_all, text.encode("utf-8", "surrogatepass"))
            except OSError:  # EPIPE, EBADF: the reader is gone
                self.gone = True
                raise StdoutGone from None

    async def flush(self) -> None:
        """Nothing is buffered."""


def _error(ident: object, code: int, message: str) -> str:
    return orjson.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}).decode() + "\n"


def refusal(line: str) -> str | None:
    """The error answer to a line the SDK's transport would pass over in silence (it drops
    what its message types refuse), or None when the SDK takes it (or when nothing is owed:
    a notification or a response, however malformed, gets no answer). JSON-RPC 2.0, section
    5.1: -32700 for what is no JSON, -32600 for what is no request (a batch too: MCP took
    JSON-RPC batching out in 2025-06-18, and the SDK reads none in any version), -32602 for
    params that are no object (MCP's are always one)."""
    try:
        taken = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:  # pydantic's ValidationError
        taken = None
    # the SDK's notification type ignores members it does not know: a request whose id it
    # refuses (null, true, an object) would pass as a notification, owed no answer
    if taken is not None and not isinstance(taken, mcp_types.JSONRPCNotification):
        return None
    if not line.strip():
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return _error(None, mcp_types.PARSE_ERROR, "Parse error")
    if isinstance(message, list):
        return _error(None, mcp_types.INVALID_REQUEST,
                      "Invalid Request: a batch (JSON array); MCP takes one message per line")
    if not isinstance(message, dict):
        return _error(None, mcp_types.INVALID_REQUEST, "Invalid Request")
    if "method" not in message or "id" not in message:  # a notification or a response: no answer
        return None
    ident = message["id"]
    if type(ident) not in (int, str):
        return _error(None, mcp_types.INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    if not isinstance(message["method"], str):
        return _error(ident, mcp_types.INVALID_REQUEST, "Invalid Request: method must be a string")
    if message.get("jsonrpc") != "2.0":
        return _error(ident, mcp_types.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"')
    if "params" in message and not isinstance(message["params"], dict):
        return _error(ident, mcp_types.INVALID_PARAMS, "Invalid params: params must be an object")
    return _error(ident, mcp_types.INVALID_REQUEST, "Invalid Request")


class Requests:
    """The protocol's stdin, line by line, for the SDK's stdio transport: a line it would
    pass over unanswered is answered here (`refusal`) and not handed on, and a line longer
    than `MAX_REQUEST` is answered -32600 without being held (the SDK's transport held any
    line whole). Read in a worker thread that is abandoned, not waited for, when the server
    stops (stdout gone): a read that blocks never holds the exit up."""

    def __init__(self, fd: int, output: Output) -> None:
        self.fd = fd
        self.output = output
        self._held = bytearray()  # the start of a line not ended yet
        self._over = False  # that line is longer than MAX_REQUEST: the rest of it is dropped
        self._lines: collections.deque[bytes | None] = collections.deque()  # None: a line too long
        self._ended = False

    def __repr__(self) -> str:
        return f"<Requests fd={self.fd} held={len(self._held)} over={self._over}>"

    def __aiter__(self) -> Requests:
        return self

    def _take(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start) + 1) > 0:
            if self._over or len(self._held) + end - start > MAX_REQUEST:
                self._lines.append(None)
            else:
                self._lines.append(bytes(self._held) + chunk[start:end])
            self._held.clear()
            self._over = False
            start = end
        if not self._over:
            self._held += chunk[start:]
            if len(self._held) > MAX_REQUEST:
                self._held.clear()
                self._over = True

    async def _line(self) -> bytes | None:
        """The next line, None when it was too long; raises StopAsyncIteration at the end."""
        while not self._lines:
            if self._ended:
                raise StopAsyncIteration
            chunk = await anyio.to_thread.run_sync(os.read, self.fd, READ_SIZE, abandon_on_cancel=True)
            if chunk:
                self._take(chunk)
                continue
            self._ended = True
            if self._over or self._held:
                self._lines.append(None if self._over else bytes(self._held))
        return self._lines.popleft()

    async def __anext__(self) -> str:
        while True:
            data = await self._line()
            if data is None:
                await self.output.write(_error(None, mcp_types.INVALID_REQUEST,
                                               f"Invalid Request: a line longer than {MAX_REQUEST // MIB} MiB"))
                continue
            line = data.decode("utf-8", "replace")  # as the SDK reads stdin
            answer = refusal(line)
            if answer is None:
                return line
            await self.output.write(answer)


def _above_std(fd: int) -> int:
    """A private copy of `fd` (above 2, not inherited).

    Raises:
        OSError: `fd` is closed.
    """
    held: list[int] = []  # copies that landed on a closed standard descriptor
    try:
        copy = os.dup(fd)
        while copy <= 2:
            held.append(copy)
            copy = os.dup(fd)
    finally:
        for extra in held:
            os.close(extra)
    return copy


@contextmanager
def claimed_stdio() -> Iterator[tuple[int, int]]:
    """Private copies of fds 0 and 1 for the protocol, fd 0 pointed at /dev/null and fd 1 at
    stderr meanwhile (as the SDK's own transport does), so that nothing else reads the
    requests or writes between the answers; put back after. A stdin closed before the start
    reads as empty.

    Raises:
        StdoutGone: stdout was closed before the start.
    """
    if sys.stdout is not None:  # None when fd 1 was closed at the start
        sys.stdout.flush()
    try:
        output = _above_std(1)
    except OSError:
        raise StdoutGone from None
    null = os.open(os.devnull, os.O_RDONLY)  # fd 0 itself when stdin was closed: read as empty
    requests = _above_std(0)
    if null != 0:
        os.dup2(null, 0)
        os.close(null)
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr either: what others write goes nowhere
        os.dup2(0, 1)
    try:
        yield requests, output
    finally:
        for fd, copy in ((0, requests), (1, output)):
            os.dup2(copy, fd)
            os.close(copy)
