"""The example rules of configs/rules/ through the real CLI: `acp-bridge run --rule FILE --
scripted_agent.py`, one run each, asserting the exact lines each side received."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import trio

from tests.commands.helpers import Client
from tests.conftest import ROOT, SCRIPTED_AGENT

RULES = ROOT / "configs" / "rules"
SID = "sess_1"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
PROMPT = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": SID, "prompt": []}}


def line(msg: dict[str, Any]) -> bytes:
    """A message as the scripted agent (and this client) writes it: json.dumps, with spaces."""
    return json.dumps(msg).encode() + b"\n"


def update(upd: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": upd}}


async def run_with(tmp_path: Path, rule: str, on_prompt: list[dict[str, Any]], answers: int) -> tuple[list[bytes], list[bytes]]:
    """Run the bridge with one example rule: initialize, then one prompt, whose reaction is
    `on_prompt`; stdin stays open until the client has `answers` lines (what the bridge sends
    the agent on its own must not meet a closed stdin). The lines each side received."""
    log = tmp_path / "agent.jsonl"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"log": str(log), "on": {"initialize": [{"respond": {"protocolVersion": 1}}],
                                                         "session/prompt": on_prompt}}))
    command = [sys.executable, "-m", "acp_bridge", "run", "--strict", "--no-health", "--rule", str(RULES / rule),
               "--", sys.executable, "-u", str(SCRIPTED_AGENT), str(script)]
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(partial(trio.run_process, command, stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False))
            client = Client(proc)
            await client.send(INIT)
            await client.send(PROMPT)
            received = await client.lines(answers)
            assert await client.close() == b""
    assert proc.returncode == 0
    return received, log.read_bytes().splitlines(keepends=True)


INIT_ANSWER = line({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}})


async def test_known_updates_only_drops_kinds_the_client_does_not_know(tmp_path: Path) -> None:
    usage = update({"sessionUpdate": "usage_update", "used": 1e3})
    chunk = update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}})
    answer = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}
    client, agent = await run_with(tmp_path, "known_updates_only.py",
                                   [{"send": usage}, {"send": chunk}, {"respond": answer["result"]}], 3)
    assert client == [INIT_ANSWER, line(chunk), line(answer)]  # the chunk byte for byte
    assert agent == [line(INIT), line(PROMPT)]


async def test_stop_reason_turns_an_unknown_one_into_end_turn(tmp_path: Path) -> None:
    big = 123456789012345678901234567890  # orjson reads it as a float: kept as written all the same
    client, _ = await run_with(tmp_path, "stop_reason.py", [{"respond": {"stopReason": "paused", "n": big}}], 2)
    assert client == [INIT_ANSWER, b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn",'
                                   b'"n":123456789012345678901234567890,"_meta":{"stopReason":"paused"}}}\n']


async def test_read_only_fs_answers_a_write_itself(tmp_path: Path) -> None:
    write = {"jsonrpc": "2.0", "id": 7, "method": "fs/write_text_file",
             "params": {"sessionId": SID, "path": "/w/a.txt", "content": "x"}}
    client, agent = await run_with(tmp_path, "read_only_fs.py", [{"send": write}, {"respond": {"stopReason": "end_turn"}}], 2)
    assert client == [INIT_ANSWER, line({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}})]
    assert agent == [line(INIT), line(PROMPT), orjson.dumps(
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "read-only session: not writing /w/a.txt"}}) + b"\n"]
