"""A large, real-shaped capture: many turns of a coding session, recorded through the real
rules and capture encoder (for the export bench row and the browser test of a big page).

    python -m bench.big_capture OUT.jsonl [MESSAGES]

A turn is a prompt, runs of agent message and thought chunks, a tool call with its updates,
a permission request and its answer, a plan, the prompt's answer and legacy suggestions the
bridge converts (and withdraws at the next prompt): 81 messages, 17 rows of the page once
chunk runs are folded.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from acp_bridge.capture.records import CaptureEncoder, dumps, header_record
from acp_bridge.capture.redaction import Redactor
from acp_bridge.config import Config
from acp_bridge.core import Direction, Relay
from acp_bridge.core.rewrites import build_rewrites

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
SESSION = "sess_0f3c9a7e2b1d4c58"
WALL = 1_750_000_000.0


def _line(msg: dict[str, Any]) -> bytes:
    return orjson.dumps(msg) + b"\n"


def _update(update: dict[str, Any]) -> bytes:
    return _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": update}})


def _chunks(kind: str, turn: int, count: int, start: int) -> Iterator[bytes]:
    for i in range(count):
        yield _update({"sessionUpdate": kind, "content": {"type": "text", "text": f"word{start + i}-{turn} "}})


def setup() -> Iterator[tuple[Direction, bytes]]:
    yield A, _line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {"session": {"promptSuggestions": {}}}}})
    yield C, _line({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {},
                                                          "agentInfo": {"name": "big-agent", "version": "1.0"}}})
    yield A, _line({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/src", "mcpServers": []}})
    yield C, _line({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SESSION}})


def turn(n: int) -> Iterator[tuple[Direction, bytes]]:
    """One turn of about 80 messages (ids from 2 up, two per turn)."""
    prompt_id, permission_id = 2 * n + 2, f"perm-{n}"
    tool = f"call_{n}"
    yield A, _line({"jsonrpc": "2.0", "id": prompt_id, "method": "session/prompt", "params": {
        "sessionId": SESSION, "prompt": [{"type": "text", "text": f"Step {n}: fix the failing test"}]}})
    yield from ((C, x) for x in _chunks("agent_thought_chunk", n, 10, 0))
    yield from ((C, x) for x in _chunks("agent_message_chunk", n, 20, 0))
    yield C, _update({"sessionUpdate": "tool_call", "toolCallId": tool, "title": f"Edit tests/test_{n}.py",
                      "kind": "edit", "status": "pending"})
    yield C, _line({"jsonrpc": "2.0", "id": permission_id, "method": "session/request_permission", "params": {
        "sessionId": SESSION, "toolCall": {"toolCallId": tool, "title": f"Edit tests/test_{n}.py"},
        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]}})
    yield A, _line({"jsonrpc": "2.0", "id": permission_id, "result": {
        "outcome": {"outcome": "selected", "optionId": "allow"}}})
    for status in ("in_progress", "in_progress", "completed"):
        yield C, _update({"sessionUpdate": "tool_call_update", "toolCallId": tool, "status": status})
    yield from ((C, x) for x in _chunks("agent_message_chunk", n, 20, 20))
    yield C, _update({"sessionUpdate": "plan", "entries": [
        {"content": "run the tests", "priority": "high", "status": "completed"}]})
    yield from ((C, x) for x in _chunks("agent_message_chunk", n, 19, 40))
    yield C, _line({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})
    yield C, _update({"sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": {"suggestions": [
        {"text": f"Run the suite after step {n}"}, {"text": "Commit the fix"}]}}})


def _reads(lines: Iterator[tuple[Direction, bytes]]) -> Iterator[tuple[Direction, bytes]]:
    """The lines as a bridge reads them from busy pipes: each run of lines in one direction
    arrives in one read (so its records share a time, as in a real capture)."""
    run: list[bytes] = []
    current: Direction | None = None
    for direction, data in lines:
        if direction is not current and run:
            assert current is not None
            yield current, b"".join(run)
            run = []
        current = direction
        run.append(data)
    if run:
        assert current is not None
        yield current, b"".join(run)


def write_capture(path: Path, messages: int) -> int:
    """Write a capture of at least `messages` message records (whole turns); return how many."""
    relay = Relay(build_rewrites(Config()))
    encoder = CaptureEncoder(Redactor(()))
    written, mono, n = 0, 0.0, 0
    with path.open("wb") as file:
        file.write(dumps(header_record(wall=WALL, mono=0.0, argv=["acp-bridge", "run", "--", "big-agent"],
                                       config_digest=Config().digest(), pid=1)))
        out = bytearray()
        lines = setup()
        while written < messages:
            for direction, data in _reads(lines):
                mono += 0.004
                records = encoder.encode_batch(WALL + mono, mono, relay.feed(direction, data, mono))
                out += records
                written += records.count(b"\n")  # a record a line (and the bridge's own messages)
            if len(out) > 1 << 20:
                file.write(out)
                out.clear()
            lines = turn(n)
            n += 1
        file.write(out)
        file.write(encoder.trailer(WALL + mono + 1, mono + 1))
    return written


if __name__ == "__main__":
    count = write_capture(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 200_000)
    print(f"{count} messages", file=sys.stderr)
