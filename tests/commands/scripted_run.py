"""`run` in front of the scripted agent, in this process or as a process, with the editor's end
of it (`bridge`, `Client`), and the examples the system prompt tests send it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio

from tests.cli_helpers import bridge_in_process
from tests.conftest import SCRIPTED_AGENT, example, line

TEXT = "Follow the team style guide."
V1_INIT = example("v1-initialize-request-client-plain")
V1_NEW = example("v1-session-new-request-plain")
AGENT_WITH_CAP = example("v1-initialize-response-agent-with-system-prompt")["result"]


class Client:
    """The editor's end of a running bridge: one JSON-RPC message per line."""

    def __init__(self, stdin: trio.abc.SendStream, stdout: trio.abc.ReceiveStream) -> None:
        self.stdin, self.stdout = stdin, stdout
        self._buffer = b""
        self.stderr = bytearray()
        self.rest = b""  # what stdout carried after the last message read
        self.returncode: int | None = None

    async def send(self, msg: dict[str, Any]) -> None:
        await self.stdin.send_all(line(msg))

    async def receive(self) -> Any:
        while b"\n" not in self._buffer:
            chunk = await self.stdout.receive_some(65536)
            if not chunk:
                raise EOFError(f"bridge closed stdout; stderr: {bytes(self.stderr)!r}")
            self._buffer += chunk
        first, _, self._buffer = self._buffer.partition(b"\n")
        return orjson.loads(first)

    async def call(self, msg: dict[str, Any]) -> Any:
        await self.send(msg)
        return await self.receive()


@asynccontextmanager
async def bridge(args: list[str], script: dict[str, Any], tmp_path: Path, env: dict[str, str] | None = None,
                 timeout: float = 20, process: bool = False,
                 preexec_fn: Callable[[], None] | None = None) -> AsyncIterator[Client]:
    """Run `run ARGS -- scripted_agent SCRIPT`, with `env` as the only ACP_BRIDGE_* variables:
    in this process, or with `process` as `python -m acp_bridge` (`preexec_fn` in the
    bridge's process). On leaving, stdin is closed, stdout read to its end and the exit
    status kept."""
    assert process or preexec_fn is None
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps(script), encoding="utf-8")
    run_args = ["run", *args, "--", sys.executable, "-u", str(SCRIPTED_AGENT), str(script_file)]
    with trio.fail_after(timeout):
        if not process:
            async with bridge_in_process(run_args, env=env, timeout=timeout) as in_process:
                client = Client(in_process.proc.stdin, in_process.proc.stdout)
                client.stderr = in_process.stderr
                yield client
            client.rest, client.returncode = bytes(in_process.received), in_process.proc.returncode
            return
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_BRIDGE_")}
        full_env.update(env or {})
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "acp_bridge", *run_args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=full_env, preexec_fn=preexec_fn)
        assert proc.stdin is not None and proc.stdout is not None
        client = Client(proc.stdin, proc.stdout)
        async with trio.open_nursery() as nursery:
            async def drain_stderr() -> None:
                assert proc.stderr is not None
                while chunk := await proc.stderr.receive_some(65536):
                    client.stderr += chunk

            nursery.start_soon(drain_stderr)
            try:
                yield client
            finally:
                await proc.stdin.aclose()
                while chunk := await proc.stdout.receive_some(65536):
                    client.rest += chunk
                client.returncode = await proc.wait()
