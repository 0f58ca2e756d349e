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

import inspect
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Annotated, Literal, Protocol, TypeVar, cast

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import Field

from acp_bridge import __version__
from acp_bridge.capture.catalog import Catalog
from acp_bridge.mcp.stdio import Output, Requests, StdoutGone, claimed_stdio
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
