"""Prompt suggestions through `run -- scripted_agent.py`.

Each test writes a script for tests/agents/scripted_agent.py, runs the bridge in front of
it (as a real process for the withdrawal on real pipes; the others run `run` in this
process, tests/cli_helpers.py, with the agent a real process), and asserts the exact lines
the client received and what the agent was sent (bridge-rules.md 2). Lines the bridge
forwards untouched must come out as the agent wrote them (the scripted agent writes
`json.dumps` output, with spaces, which orjson would not reproduce); lines the bridge writes
itself are orjson-encoded. The rule's cases are the tables of
tests/core/rewrites/test_suggestions.py; here, once each, what only a real run shows: the rule
on by default, `--unlock-legacy-agent` and its default, `--no-suggestions`, and the
withdrawal's place among the lines on real pipes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import trio

from tests.cli_helpers import run_cli_in_process
from tests.commands.helpers import Client, agent_line
from tests.conftest import SCRIPTED_AGENT, example

SID = "sess_1"
V1_AGENT_INIT = example("v1-initialize-response-agent-no-system-prompt")["result"]


def response(id_: int, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def update(upd: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": upd}}


LEGACY = update({"sessionUpdate": "session_info_update",
                 "_meta": {"promptSuggestions": {"suggestions": [{"text": "Run the tests"}]}}})
NEW = update({"sessionUpdate": "prompt_suggestions_update",
              "suggestions": [{"prompt": [{"type": "text", "text": "Run the tests"}]}]})
NEW_CLEAR = update({"sessionUpdate": "prompt_suggestions_update", "suggestions": []})


def client_init(name: str) -> dict[str, Any]:
    return example(name)


SESSION_NEW = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}


def prompt(id_: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "session/prompt",
            "params": {"sessionId": SID, "prompt": [{"type": "text", "text": "hi"}]}}


def script(tmp_path: Path, after_prompt: list[dict[str, Any]]) -> tuple[Path, Path]:
    """An agent that answers initialize (v1, no prompt content caps), session/new, and each
    prompt, then runs `after_prompt` steps."""
    log = tmp_path / "agent-received.jsonl"
    data = {
        "log": str(log),
        "on": {
            "initialize": [{"respond": V1_AGENT_INIT}],
            "session/new": [{"respond": {"sessionId": SID}}],
            "session/prompt": [{"respond": {"stopReason": "end_turn"}}, *after_prompt],
        },
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path, log


def bridge_args(script_path: Path, *options: str) -> list[str]:
    return ["run", "--strict", *options, "--", sys.executable, "-u", str(SCRIPTED_AGENT), str(script_path)]


def stdin_of(*msgs: dict[str, Any]) -> bytes:
    return b"".join(agent_line(m) for m in msgs)


STANDARD_REPLIES = [
    agent_line(response(0, V1_AGENT_INIT)),
    agent_line(response(1, {"sessionId": SID})),
    agent_line(response(2, {"stopReason": "end_turn"})),
]


async def test_new_client_gets_legacy_agent_suggestion_in_new_form(tmp_path: Path) -> None:
    """A legacy agent unlocked for a new client: its `_meta` suggestion reaches the client as a
    `prompt_suggestions_update` only, and the agent was told the client is AIR (2.2, 2.5)."""
    path, log = script(tmp_path, [{"send": LEGACY}])
    init = client_init("v1-initialize-request-client-with-suggestions")
    sent = stdin_of(init, SESSION_NEW, prompt(2))
    done = await run_cli_in_process(bridge_args(path, "--unlock-legacy-agent"), sent, timeout=10)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines(keepends=True) == [*STANDARD_REPLIES, orjson.dumps(NEW) + b"\n"]
    received = log.read_bytes().splitlines(keepends=True)
    marked = json.loads(json.dumps(init))
    marked["params"]["clientCapabilities"]["_meta"] = {"jetbrains": {"air": {"version": 1, "capabilities": []}}}
    assert orjson.loads(received[0]) == marked
    assert received[1:] == sent.splitlines(keepends=True)[1:]  # byte-exact


async def test_new_client_without_unlock_leaves_initialize_alone(tmp_path: Path) -> None:
    """Unlocking is opt-in: without it the agent receives the client's initialize as sent."""
    path, log = script(tmp_path, [])
    sent = stdin_of(client_init("v1-initialize-request-client-with-suggestions"), SESSION_NEW, prompt(2))
    done = await run_cli_in_process(bridge_args(path), sent, timeout=10)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines(keepends=True) == STANDARD_REPLIES
    assert log.read_bytes() == sent


async def test_no_suggestions_leaves_everything_untouched(tmp_path: Path) -> None:
    """`--no-suggestions`: the rule is off, both forms pass byte-exact, initialize included."""
    path, log = script(tmp_path, [{"send": LEGACY}, {"send": NEW}])
    sent = stdin_of(client_init("v1-initialize-request-client-legacy-air"), SESSION_NEW, prompt(2))
    done = await run_cli_in_process(bridge_args(path, "--no-suggestions"), sent, timeout=10)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines(keepends=True) == [*STANDARD_REPLIES, agent_line(LEGACY), agent_line(NEW)]
    assert log.read_bytes() == sent


async def test_next_prompt_withdraws_offered_suggestion(tmp_path: Path) -> None:
    """When the client sends its next prompt while it holds a suggestion, the bridge withdraws
    it toward the client right after forwarding the prompt, and the agent's own clear that
    follows is not repeated (2.4). Interactive, so the suggestion is held before the next
    prompt is written. The agent answers at once: the withdrawal is queued toward the client
    as the prompt goes through, so the answer, which comes after, cannot overtake it."""
    clear = update({"sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": {"suggestions": []}}})
    log = tmp_path / "agent-received.jsonl"
    data = {
        "log": str(log),
        "on": {
            "initialize": [{"respond": V1_AGENT_INIT}],
            "session/new": [{"respond": {"sessionId": SID}}],
            # each turn: the answer, the agent's own (late) clear, then its next prediction
            "session/prompt": [{"respond": {"stopReason": "end_turn"}}, {"send": clear}, {"send": LEGACY}],
        },
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    command = [sys.executable, "-m", "acp_bridge", *bridge_args(path, "--unlock-legacy-agent")]
    init = client_init("v1-initialize-request-client-with-suggestions")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(partial(trio.run_process, command, stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, check=False))
            client = Client(proc)
            await client.send(init)
            await client.send(SESSION_NEW)
            assert await client.lines(2) == STANDARD_REPLIES[:2]
            await client.send(prompt(2))
            # the agent's clear of an empty list is not forwarded; the prediction is converted
            assert await client.lines(2) == [STANDARD_REPLIES[2], orjson.dumps(NEW) + b"\n"]
            await client.send(prompt(3))
            assert await client.lines(3) == [
                orjson.dumps(NEW_CLEAR) + b"\n",  # the bridge's withdrawal, right after the prompt
                agent_line(response(3, {"stopReason": "end_turn"})),
                orjson.dumps(NEW) + b"\n",  # the agent's clear of an empty list was dropped
            ]
            rest = await client.close()
    assert rest == b""
    assert proc.returncode == 0
    received = log.read_bytes().splitlines(keepends=True)
    assert received[1:] == [agent_line(SESSION_NEW), agent_line(prompt(2)), agent_line(prompt(3))]
