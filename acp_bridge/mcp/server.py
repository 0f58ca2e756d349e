"""The MCP server of `acp-bridge mcp`: the tools of `tools` offered over stdio through the
official MCP Python SDK (the optional `mcp` extra), run on trio through anyio.

Owns: each tool's name, description and typed arguments (the SDK derives the input schema
from the signature, and refuses arguments of the wrong type or range with a tool error),
running each call in one worker thread (file reads block, and the catalog takes one call
at a time), and turning a `BadArgument` into a tool error that says what was wrong. The
SDK owns the protocol, through its stdio transport: stdout carries only its messages (while
it serves, fd 1 points at stderr for everyone else), its log goes to stderr, and the end of
stdin ends the server. In front of that transport, `Requests` answers each line the SDK
would drop unanswered (no JSON, a batch, params that are no object, an id it refuses) with
the JSON-RPC error it is owed, and `Output` stops the server at once when stdout is closed.
Must never: be imported but by the `mcp` command, write to a file, or let a tool's failure
end the server (the SDK answers any exception as a tool error).
"""

from __future__ import annotations

import collections
import inspect
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Annotated, Literal, Protocol, TypeVar, cast

import anyio
import anyio.to_thread
import mcp_types
import orjson
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import Field

from acp_bridge import __version__
from acp_bridge.capture.catalog import Catalog
from acp_bridge.core.lines import MIB
from acp_bridge.mcp.tools import BadArgument, Tools

T = TypeVar("T")
ToolFunction = TypeVar("ToolFunction", bound=Callable[..., Awaitable[str]])


class _AddTool(Protocol):
    """A decorator adding a tool to the server (the function itself is given back)."""

    def __call__(self, function: ToolFunction, /) -> ToolFunction: ...


INSTRUCTIONS = """\
Read-only access to acp-bridge captures: recordings of Agent Client Protocol (ACP) sessions
between an editor (the client) and an AI agent, one JSON-RPC message per record, with what
the bridge rewrote, the protocol findings of `acp-bridge check` and its migration verdict.
Start with list_captures; name a capture as it names them. Messages are numbered by seq.
Every answer is bounded; when one stops early its last line says which offset to ask for.
Values the capture redacted read "<redacted>": they are not recoverable here."""

# The argument types, at module level: the SDK reads the signatures with their names resolved.
CaptureName = Annotated[str, Field(description="A capture's name, as list_captures gives it.")]
Limit = Annotated[int, Field(ge=1, le=1000, description="At most this many entries in the answer.")]
Offset = Annotated[int, Field(ge=0, description="Skip this many entries (the note of an earlier answer "
                                                "says where the next one starts).")]
Seq = Annotated[int, Field(ge=1, description="The message's seq (as show_messages, find_problems and "
                                             "search give it).")]
Text = Annotated[str, Field(min_length=1, description="A case-insensitive substring of the message "
                                                      "as it went over the wire (JSON text).")]
Detail = Annotated[int, Field(ge=0, le=3, description="0 only messages a rule failed on; 1 one line per "
                                                      "message; 2 plus its params, result or error; 3 plus "
                                                      "before and after of what the bridge changed.")]
Names = Annotated[list[str] | None, Field(description="Only these (any of them).")]

READ_SIZE = 1 << 16  # bytes of stdin read at a time
MAX_REQUEST = 16 * MIB  # the longest request line read (a tool call's arguments are small)
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)


def build_server(tools: Tools, limiter: anyio.CapacityLimiter) -> MCPServer:
    """The server with the seven tools over `tools`, each call in a worker thread, as many
    at a time as `limiter` lets (one: the catalog is not thread-safe)."""
    server: MCPServer = MCPServer("acp-bridge", version=__version__, instructions=INSTRUCTIONS,
                                  log_level="WARNING")

    async def call(function: Callable[..., T], *args: object, **kwargs: object) -> T:
        try:
            return await anyio.to_thread.run_sync(partial(function, *args, **kwargs), limiter=limiter)
        except BadArgument as exc:
            raise ToolError(str(exc)) from None

    def tool(function: ToolFunction) -> ToolFunction:
        server.add_tool(function, description=inspect.cleandoc(function.__doc__ or ""), annotations=READ_ONLY,
                        structured_output=False)  # text: an agent reads it as it is
        return function

    _summary_tools(tool, call, tools)
    _message_tools(tool, call, tools)
    return server


def _summary_tools(tool: _AddTool, call: Callable[..., Awaitable[str]], tools: Tools) -> None:
    """The tools that answer of captures whole: the list, a summary, the findings."""

    @tool
    async def list_captures(limit: Limit = 200, offset: Offset = 0) -> str:
        """The captures, newest first: one JSON object per line with name, started (UTC), client
        and agent (name and version), messages, findings (those the bridge's watchdog wrote
        while it ran; find_problems computes them all), skipped (lines too long to read, over
        64 MiB, passed over) and live (its bridge is still running)."""
        return await call(tools.list_captures, limit, offset)

    @tool
    async def capture_summary(capture: CaptureName, offset: Annotated[int, Field(
            ge=0, description="Start at this character of the answer (for one too long for one answer).")] = 0,
            ) -> str:
        """What `acp-bridge stats` and `acp-bridge check` say of one capture: messages and bytes
        per method, request latency percentiles, rules applied, loose ends, the protocol
        findings, and the migration verdict (does this client and agent pair still need the
        bridge, and why). JSON."""
        return await call(tools.capture_summary, capture, offset)

    @tool
    async def find_problems(capture: CaptureName | None = None, limit: Limit = 100,
                            offset: Offset = 0) -> str:
        """Protocol findings (docs/health.md: unanswered requests, stalls, errors, legacy
        forms...) of one capture, or of every capture when none is named; worst first, one JSON
        object per line with its capture, level, code, seq, session, message and an excerpt of
        the message it concerns; then what each code means and what to do about it."""
        return await call(tools.find_problems, capture, limit, offset)


def _message_tools(tool: _AddTool, call: Callable[..., Awaitable[str]], tools: Tools) -> None:
    """The tools that answer with messages: shown, one whole, found by text, two captures compared."""

    @tool
    async def show_messages(capture: CaptureName, method: Names = None,
                            direction: Literal["to-agent", "to-client"] | None = None,
                            session: Annotated[str | None, Field(description=(
                                "Only this ACP session (an id, or the start of one id)."))] = None,
                            update: Annotated[list[str] | None, Field(description=(
                                "Only session/update notifications of these kinds "
                                "(params.update.sessionUpdate, e.g. tool_call)."))] = None,
                            text: Text | None = None, detail: Detail = 1, limit: Limit = 100,
                            offset: Offset = 0) -> str:
        """A capture's messages as `acp-bridge show` prints them, one per entry: seq, time
        (UTC), direction (-> toward the agent, <- toward the client), method or response id,
        session, size, and what the bridge did (rewrite, drop, bridge-sent, redacted). The
        filters of `show` combine: method (a response counts as its request's), direction,
        session, update kind, and text."""
        return await call(tools.show_messages, capture, methods=method or (), direction=direction,
                          session=session, updates=update or (), text=text, detail=detail, limit=limit,
                          offset=offset)

    @tool
    async def get_message(capture: CaptureName, seq: Seq, offset: Annotated[int, Field(
            ge=0, description="Start at this character of the record (for one too long for one answer).")] = 0,
            ) -> str:
        """One message record exactly as the capture stores it (JSON): `raw` is the line as it
        came (masked where redacted), `out` what the bridge sent instead when it changed it,
        and seq, time, direction, kind, method, id, session, verdict, rules, size."""
        return await call(tools.get_message, capture, seq, offset)

    @tool
    async def search(text: Text, capture: CaptureName | None = None, limit: Limit = 50,
                     offset: Offset = 0) -> str:
        """Messages holding `text` (case-insensitive) as they came or as they were sent, in
        every capture (newest first) or in one: one JSON object per line with the capture,
        seq, the message's one-line summary and an excerpt around the match."""
        return await call(tools.search, text, capture, limit, offset)

    @tool
    async def diff_captures(a: CaptureName, b: CaptureName, ignore: Annotated[list[str] | None, Field(
            description="More JSON pointers into each message to leave out of the comparison.")] = None,
            strict_ids: bool = False, limit: Limit = 200, offset: Offset = 0) -> str:
        """What `acp-bridge diff` says of two captures: a summary, then one line per difference.
        Sessions (in the order they were created) and turns are aligned, then their messages:
        each message missing from b or extra in b, and for aligned messages the JSON pointers
        whose values differ (ids, times and session ids ignored unless strict_ids)."""
        return await call(tools.diff_captures, a, b, ignore or (), strict_ids, limit, offset)


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


def serve(roots: Sequence[str], alive: Callable[[int], bool]) -> None:
    """Serve the captures of `roots` on stdio until stdin ends, on trio: the SDK's stdio
    transport over `Requests` and `Output`.

    Raises:
        StdoutGone: stdout was closed under it (it stops at once, stdin open or not).
    """
    tools = Tools(Catalog(roots, alive=alive))
    server = build_server(tools, anyio.CapacityLimiter(1))  # the limiter: in the loop
    lowlevel = server._lowlevel_server  # what run_stdio_async runs, over our streams

    with claimed_stdio() as (stdin_fd, stdout_fd):
        output = Output(stdout_fd)

        async def main() -> None:
            stdin = cast("anyio.AsyncFile[str]", Requests(stdin_fd, output))
            async with stdio_server(stdin, cast("anyio.AsyncFile[str]", output)) as (read_stream, write_stream):
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

        try:
            anyio.run(main, backend="trio")
        except BaseException:  # the SDK's task groups wrap it: what ended the server is `gone`
            if not output.gone:
                raise
    if output.gone:
        raise StdoutGone
