"""`acp-bridge mcp` as any MCP client meets it, with no SDK on this side: one JSON-RPC
conversation over the real process's stdio (initialize, notifications/initialized,
tools/list, tools/call), stdout holding nothing but its answers, and the end of stdin
ending the server with exit 0. And without the `mcp` extra (asked in this process): one
line saying how to install it, exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from tests.capture.hostile import PEAK_OF_SERVER, one_huge_line
from tests.cli_helpers import without_package
from tests.conftest import TESTS, BridgeProcess, invoke, open_bridge
from tests.mcp.conftest import TOOLS

AIR = "v1-legacy-air-meta.jsonl"


async def ask(bridge: BridgeProcess, message: dict[str, Any] | bytes) -> dict[str, Any]:
    """Send one request (or a line as it is); its answer, the next line of stdout (each
    answer is read whole before the next request is sent, so `received` ends with the
    previous one)."""
    await bridge.send((message if isinstance(message, bytes) else orjson.dumps(message)) + b"\n")
    start = len(bridge.received)
    assert bridge.proc.stdout is not None
    while b"\n" not in bridge.received[start:]:
        chunk = await bridge.proc.stdout.receive_some(1 << 16)
        assert chunk, f"EOF before the answer to {message!r}"
        bridge.received += chunk
    first, rest = bytes(bridge.received[start:]).split(b"\n", 1)
    assert rest == b"", rest  # nothing but the answer
    answer: dict[str, Any] = orjson.loads(first)
    return answer


async def test_a_raw_json_rpc_conversation_then_end_of_stdin_ends_the_server_with_0(tmp_path: Path) -> None:
    shutil.copy(TESTS / "golden" / AIR, tmp_path / AIR)
    with trio.fail_after(60):
        async with open_bridge(["mcp", str(tmp_path)]) as bridge:
            init = await ask(bridge, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw-client", "version": "1"}}})
            assert init["id"] == 1
            assert init["result"]["protocolVersion"] == "2025-06-18"
            assert init["result"]["serverInfo"]["name"] == "acp-bridge"
            assert "tools" in init["result"]["capabilities"]
            await bridge.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

            listed = await ask(bridge, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            assert [tool["name"] for tool in listed["result"]["tools"]] == TOOLS
            assert all(tool["annotations"]["readOnlyHint"] for tool in listed["result"]["tools"])

            called = await ask(bridge, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "get_message", "arguments": {"capture": AIR, "seq": 1}}})
            stored = (tmp_path / AIR).read_text().splitlines()[1]
            assert called == {"jsonrpc": "2.0", "id": 3, "result": {
                "content": [{"type": "text", "text": stored}], "isError": False}}

            refused = await ask(bridge, {"jsonrpc": "2.0", "id": "four", "method": "tools/call", "params": {
                "name": "get_message", "arguments": {"capture": "../" + AIR, "seq": 1}}})
            assert refused["id"] == "four"
            assert refused["result"]["isError"] is True
            assert refused["result"]["content"][0]["text"] == (
                f'Error executing tool get_message: no capture named "../{AIR}": list_captures gives their names')

            await bridge.close_stdin()
            everything = await bridge.read_all()
            assert await bridge.proc.wait() == 0
    lines = everything.splitlines()
    assert len(lines) == 4  # its four answers, and nothing else on stdout
    assert all(orjson.loads(line)["jsonrpc"] == "2.0" for line in lines)


def test_without_the_extra_one_line_says_how_to_install_it_and_the_exit_status_is_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process: the command says so before it serves anything."""
    without_package("mcp", monkeypatch)
    done = invoke(["mcp", str(tmp_path)])
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr == (b"acp-bridge: mcp needs the MCP Python SDK, which is not installed (mcp.server not "
                           b"found): pip install 'acp-bridge-proxy[mcp]' (in a clone: pip install '.[mcp]')\n")


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw-client", "version": "1"}}}


def refused(ident: object, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


# (the line sent, the one answer it gets)
MALFORMED: list[tuple[bytes, dict[str, Any]]] = [
    (b'{"jsonrpc":"2.0","id":2,"method":"nope/unknown"}',
     {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found", "data": "nope/unknown"}}),
    (b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":"a string"}',
     refused(3, -32602, "Invalid params: params must be an object")),
    (b'{"jsonrpc":"2.0","id":"4","method":"tools/call","params":["get_message"]}',
     refused("4", -32602, "Invalid params: params must be an object")),
    (b'{"jsonrpc":"2.0","id":5,"method":5}', refused(5, -32600, "Invalid Request: method must be a string")),
    (b'{"jsonrpc":"1.0","id":6,"method":"ping"}', refused(6, -32600, 'Invalid Request: jsonrpc must be "2.0"')),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
     refused(None, -32600, "Invalid Request: id must be a string or an integer")),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
     refused(None, -32600, "Invalid Request: id must be a string or an integer")),
    (b'[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":8,"method":"ping"}]',
     refused(None, -32600, "Invalid Request: a batch (JSON array); MCP takes one message per line")),
    (b'[]', refused(None, -32600, "Invalid Request: a batch (JSON array); MCP takes one message per line")),
    (b'"ping"', refused(None, -32600, "Invalid Request")),
    (b'{"jsonrpc":"2.0","id":9,"method":"ping"', refused(None, -32700, "Parse error")),
    (b'{"jsonrpc":"2.0","id":10,"method":"ping","params":{"p":"' + b"x" * (16 << 20) + b'"}}',
     refused(None, -32600, "Invalid Request: a line longer than 16 MiB")),
]


async def test_every_malformed_request_is_answered_and_notifications_are_not(tmp_path: Path) -> None:
    """A request with an unknown method, params that are no object, a batch, an id that is
    no id: each gets the one JSON-RPC error it is owed (the SDK's transport dropped all but
    the first unanswered). A malformed notification or response gets nothing: the next
    answer is the ping's."""
    with trio.fail_after(60):
        async with open_bridge(["mcp", str(tmp_path)]) as bridge:
            assert (await ask(bridge, INITIALIZE))["id"] == 1
            await bridge.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            for line, answer in MALFORMED:
                assert await ask(bridge, line) == answer, line
            for line in (b'{"jsonrpc":"2.0","method":"notifications/x","params":"s"}', b'{"jsonrpc":"2.0","id":3}'):
                await bridge.send(line + b"\n")
            assert await ask(bridge, {"jsonrpc": "2.0", "id": 10, "method": "ping"}) == {
                "jsonrpc": "2.0", "id": 10, "result": {}}
            await bridge.close_stdin()
            assert await bridge.proc.wait() == 0


def test_with_its_stdout_closed_it_stops_at_once_with_one_line(tmp_path: Path) -> None:
    """Nobody reads its answers any more: it ran on until stdin closed, then exited 1 with a
    6 KB traceback. Now the first answer that cannot be written ends it, stdin still open."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    with subprocess.Popen([sys.executable, "-m", "acp_bridge", "mcp", str(tmp_path)], stdin=subprocess.PIPE,
                          stdout=write_end, stderr=subprocess.PIPE) as proc:
        os.close(write_end)
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(orjson.dumps(INITIALIZE) + b"\n")
        proc.stdin.flush()
        try:
            status = proc.wait(timeout=30)  # stdin stays open: only its own stop ends it
        finally:
            proc.kill()
        assert (status, proc.stderr.read()) == (1, b"acp-bridge: mcp: stdout was closed; stopping\n")


async def test_one_huge_line_is_passed_over_and_the_server_stays_small(tmp_path: Path) -> None:
    """A capture with one 100 MB line, through every tool of the real server: the line is
    over the servers' limit (64 MiB), so it is passed over unread and counted; the process
    stays far below the line's size (it grew to about 700 MiB before)."""
    folder = tmp_path / "captures"
    folder.mkdir()
    one_huge_line(folder / "huge.jsonl", 100 * 1000 * 1000)
    peak = tmp_path / "peak"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_captures", {}), ("show_messages", {"capture": "huge.jsonl", "detail": 3}),
        ("get_message", {"capture": "huge.jsonl", "seq": 2}), ("search", {"text": "xxxx"}),
        ("capture_summary", {"capture": "huge.jsonl"}), ("find_problems", {}),
        ("diff_captures", {"a": "huge.jsonl", "b": "huge.jsonl"})]
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", PEAK_OF_SERVER, str(peak), sys.executable, "-m", "acp_bridge", "mcp", str(folder)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        with trio.fail_after(60):
            bridge = BridgeProcess(proc)
            assert (await ask(bridge, INITIALIZE))["id"] == 1
            await bridge.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            texts = []
            for n, (tool, arguments) in enumerate(calls):
                answer = await ask(bridge, {"jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
                                            "params": {"name": tool, "arguments": arguments}})
                assert answer["result"]["isError"] is False, answer
                texts.append(answer["result"]["content"][0]["text"])
            await bridge.close_stdin()
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert orjson.loads(texts[0])["skipped"] == 1
    assert texts[3].startswith("(no message in 1 captures holds")
    assert int(peak.read_text()) / 1024 < 150, int(peak.read_text()) / 1024


@pytest.mark.parametrize(("closed", "expected"), [
    (">&-", (1, b"acp-bridge: mcp: stdout was closed; stopping\n")),
    ("<&-", (0, b"")),
])
def test_started_with_stdout_or_stdin_closed_it_says_so_or_ends_at_once(tmp_path: Path, closed: str,
                                                                        expected: tuple[int, bytes]) -> None:
    """Both ended in a traceback: no stdout is the one line above and exit 1; no stdin is
    an empty one, so the server ends at once with 0."""
    done = subprocess.run(["sh", "-c", f'exec "$@" {closed}', "sh", sys.executable, "-m", "acp_bridge", "mcp",
                           str(tmp_path)], check=False, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (*expected, b"")


def test_a_root_under_a_tilde_is_in_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An MCP client's settings start the server with no shell: `~/caps` is found (then,
    without the extra, the one line about it), not refused as a path that does not exist."""
    (tmp_path / "caps").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    without_package("mcp", monkeypatch)
    done = invoke(["mcp", "~/caps"])
    assert (done.returncode, done.stderr.startswith(b"acp-bridge: mcp needs the MCP Python SDK")) == (2, True)
