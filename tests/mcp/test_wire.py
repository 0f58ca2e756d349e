"""`acp-bridge mcp` as any MCP client meets it, with no SDK on this side: one JSON-RPC
conversation over the real process's stdio (initialize, notifications/initialized,
tools/list, tools/call), stdout holding nothing but its answers, and the end of stdin
ending the server with exit 0. And without the `mcp` extra (asked in this process): one
line saying how to install it, exit 2."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from tests.cli_helpers import without_package
from tests.conftest import TESTS, BridgeProcess, invoke, open_bridge
from tests.mcp.conftest import TOOLS

AIR = "v1-legacy-air-meta.jsonl"


async def ask(bridge: BridgeProcess, message: dict[str, Any]) -> dict[str, Any]:
    """Send one request; its answer, the next line of stdout (each answer is read whole
    before the next request is sent, so `received` ends with the previous one)."""
    await bridge.send(orjson.dumps(message) + b"\n")
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
                           b"found): pip install 'acp-bridge-proxy[mcp]'\n")
