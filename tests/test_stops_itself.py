"""The bridge stopping itself, through the real CLI: a required capture that can no longer be
written. The exit status is 1 and every client request in flight is answered first, as when
the agent dies (bridge-rules 5)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import SCRIPTED_AGENT, line
from tests.test_system_prompt_cli import V1_INIT, Client

PROMPT = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
          "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}}
BIG = "x" * 65536  # a line whose record cannot fit under the capture's size limit
FILE_LIMIT = 16384  # bytes the bridge may write to a file (RLIMIT_FSIZE): header and a few records


def stopped(why: str, id_: int) -> bytes:
    return line({"jsonrpc": "2.0", "id": id_, "error": {
        "code": -32603, "message": f"acp-bridge stopped before the agent answered: {why}"}})


def limit_file_size() -> None:
    """In the bridge's process: writes past FILE_LIMIT bytes fail with EFBIG ("File too
    large"; Python ignores SIGXFSZ), as on a full disk, while the pipes are unaffected."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


@asynccontextmanager
async def running(args: list[str], script: dict[str, Any], tmp_path: Path,
                  file_limit: bool = False) -> AsyncIterator[Client]:
    """`python -m acp_bridge run ARGS -- scripted_agent SCRIPT`, driven by the test as the
    client; on leaving, stdout is read to its end and the exit status kept."""
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps(script), encoding="utf-8")
    cmd = [sys.executable, "-m", "acp_bridge", "run", *args, "--",
           sys.executable, "-u", str(SCRIPTED_AGENT), str(script_file)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_BRIDGE_")}
    with trio.fail_after(30):
        proc = await trio.lowlevel.open_process(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            preexec_fn=limit_file_size if file_limit else None)
        client = Client(proc)
        async with trio.open_nursery() as nursery:
            async def drain_stderr() -> None:
                assert proc.stderr is not None
                while chunk := await proc.stderr.receive_some(65536):
                    client.stderr += chunk

            nursery.start_soon(drain_stderr)
            try:
                yield client
            finally:
                assert proc.stdin is not None and proc.stdout is not None
                await proc.stdin.aclose()
                while chunk := await proc.stdout.receive_some(65536):
                    client.rest += chunk
                client.returncode = await proc.wait()


def required_capture(tmp_path: Path) -> list[str]:
    config = tmp_path / "required.toml"
    config.write_text(f'[capture]\npath = "{tmp_path / "c.jsonl"}"\nrequired = true\n', encoding="utf-8")
    return ["--no-health", "-c", str(config)]


# -- a required capture that fails ---------------------------------------------------------------

@pytest.mark.parametrize("big_answer", [False, True], ids=["update-while-in-flight", "the-answer-itself"])
async def test_a_required_capture_that_fails_answers_the_requests_in_flight(tmp_path: Path,
                                                                            big_answer: bool) -> None:
    """The agent writes a line too big for what is left of the capture's room: the bridge
    stops (exit 1) without sending it, and the prompt in flight gets an error that says so.
    When that line was the prompt's own answer, the prompt is in flight again: its answer
    was never sent."""
    big = {"jsonrpc": "2.0", "method": "session/update",
           "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                                    "content": {"type": "text", "text": BIG}}}}
    reaction = [{"respond": {"stopReason": "end_turn", "text": BIG}}] if big_answer else [{"send": big}]
    script = {"on": {"initialize": [{"respond": {"protocolVersion": 1}}], "session/prompt": reaction}}
    async with running(required_capture(tmp_path), script, tmp_path, file_limit=True) as client:
        assert await client.call(V1_INIT) == {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}
        await client.send(PROMPT)
    why = f"capture: cannot write {tmp_path / 'c.jsonl'}: File too large (capture.required is set)"
    assert (client.returncode, client.rest) == (1, stopped(why, 2))
    assert client.stderr.decode().splitlines() == [
        "acp-bridge: WARNING: stopping: answered 1 client request(s) left in flight", f"acp-bridge: {why}"]
