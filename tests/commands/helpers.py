"""Shared by the tests of `run` in front of the scripted agent: its messages and script, and an
interactive client on a bridge process's stdio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio


def agent_line(msg: dict[str, Any]) -> bytes:
    """A message as the scripted agent writes it."""
    return json.dumps(msg).encode() + b"\n"


class Client:
    """An interactive client on the bridge's stdio: send a line, wait for lines."""

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin, self.stdout = proc, proc.stdin, proc.stdout
        self.buffer = b""

    async def send(self, msg: dict[str, Any]) -> None:
        await self.stdin.send_all(agent_line(msg))

    async def lines(self, n: int) -> list[bytes]:
        while self.buffer.count(b"\n") < n:
            chunk = await self.stdout.receive_some(65536)
            assert chunk, f"EOF after {self.buffer!r}"
            self.buffer += chunk
        out = self.buffer.splitlines(keepends=True)
        self.buffer = b"".join(out[n:])
        return out[:n]

    async def close(self) -> bytes:
        """Close stdin; return what is left on stdout."""
        await self.stdin.aclose()
        rest = self.buffer
        while chunk := await self.stdout.receive_some(65536):
            rest += chunk
        return rest


SID = "s"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
PROMPT = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": SID, "prompt": []}}
ANSWERS = [{"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}},
           {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}]


def line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode() + b"\n"  # as the scripted agent writes it


def script(tmp_path: Path, on_prompt: list[dict[str, Any]]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"on": {"initialize": [{"respond": ANSWERS[0]["result"]}],
                                       "session/prompt": on_prompt}}))
    return path
