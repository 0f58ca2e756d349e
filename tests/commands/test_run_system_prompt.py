"""System prompt injection end to end: `run`'s options in front of a real scripted agent.

The scripted agent logs every line it receives, so each test asserts exactly what the agent
was sent. The client side is driven one message at a time (send, then wait for the answer):
the bridge decides the dialect from the agent's `initialize` response, so a client that
wrote everything at once would race it. The rule's cases are the tables of
tests/core/rewrites/test_system_prompt.py; here, once each, the ways a run gets the setting
(option, file, environment, config file and their layers, --strict, -v) and each dialect.
One runs the real CLI process; the others run `run` in this process (tests/cli_helpers.py:
the real command's options, `run_bridge` on real pipes, the agent a real process), since the
process is not what they test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.commands.scripted_run import AGENT_WITH_CAP, TEXT, V1_INIT, V1_NEW, bridge
from tests.conftest import example

SP_APPEND = {"mode": "append", "content": [{"type": "text", "text": TEXT}]}

V1_PROMPT = example("v1-session-prompt-request")  # id 5, sess_abc123
AGENT_WITHOUT_CAP = example("v1-initialize-response-agent-no-system-prompt")["result"]  # old-agent


def scripted(tmp_path: Path, agent_init: dict[str, Any]) -> dict[str, Any]:
    return {
        "log": str(tmp_path / "received.jsonl"),
        "on": {
            "initialize": [{"respond": agent_init}],
            "session/new": [{"respond": {"sessionId": "sess_abc123"}}],
            "session/prompt": [{"respond": {"stopReason": "end_turn"}}],
        },
    }


def received(tmp_path: Path) -> list[Any]:
    """Every line the agent received, parsed, in order."""
    return [orjson.loads(raw) for raw in (tmp_path / "received.jsonl").read_bytes().splitlines()]


def new_with(**extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": "/home/user/project", "mcpServers": [], **extra}}


async def test_spec_dialect_via_the_system_prompt_option(tmp_path: Path) -> None:
    """Through the real CLI process (the others run `run` in this process)."""
    async with bridge(["--system-prompt", TEXT], scripted(tmp_path, AGENT_WITH_CAP), tmp_path,
                      process=True) as client:
        assert (await client.call(V1_INIT))["result"] == AGENT_WITH_CAP
        assert await client.call(V1_NEW) == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "sess_abc123"}}
    assert client.returncode == 0 and client.rest == b""
    assert received(tmp_path) == [V1_INIT, new_with(systemPrompt=SP_APPEND)]


async def test_meta_dialect_from_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text(f'[system_prompt]\ntext = "{TEXT}"\non_unsupported = "meta"\n', encoding="utf-8")
    async with bridge(["-c", str(config)], scripted(tmp_path, AGENT_WITHOUT_CAP), tmp_path) as client:
        await client.call(V1_INIT)
        await client.call({**V1_NEW, "params": {**V1_NEW["params"], "_meta": {"traceparent": "t"}}})
    assert received(tmp_path)[1] == new_with(_meta={"traceparent": "t", "systemPrompt": {"append": TEXT}})
    assert b'agent "old-agent" does not advertise the systemPrompt capability' in client.stderr
    assert b"sent as _meta.systemPrompt" in client.stderr


async def test_first_prompt_dialect_for_an_unknown_agent(tmp_path: Path) -> None:
    """auto, an agent without the capability and not a known `_meta` reader: first prompt."""
    async with bridge(["--system-prompt", TEXT], scripted(tmp_path, AGENT_WITHOUT_CAP), tmp_path) as client:
        await client.call(V1_INIT)
        await client.call(V1_NEW)
        assert await client.call(V1_PROMPT) == {"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "end_turn"}}
        await client.call({**V1_PROMPT, "id": 6})
    got = received(tmp_path)
    assert got[1] == V1_NEW
    assert got[2] == {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {
        "sessionId": "sess_abc123",
        "prompt": [{"type": "text", "text": TEXT}, {"type": "text", "text": "Fix the failing test in parser.py"}]}}
    assert got[3] == {**V1_PROMPT, "id": 6}
    assert b"put in front of the first session/prompt" in client.stderr


async def test_error_dialect_answers_the_client_and_the_agent_never_sees_the_request(tmp_path: Path) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text(f'[system_prompt]\ntext = "{TEXT}"\non_unsupported = "error"\n', encoding="utf-8")
    async with bridge(["-c", str(config)], scripted(tmp_path, AGENT_WITHOUT_CAP), tmp_path) as client:
        await client.call(V1_INIT)
        answer = await client.call(V1_NEW)
    assert answer == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32603,
        "message": 'acp-bridge: agent "old-agent" does not advertise the systemPrompt capability '
                   "(agentCapabilities.sessionCapabilities.systemPrompt); a system prompt is "
                   'configured and system_prompt.on_unsupported is "error"',
        "data": {"method": "session/new", "agent": "old-agent",
                 "capability": "agentCapabilities.sessionCapabilities.systemPrompt"}}}
    assert received(tmp_path) == [V1_INIT]
    assert client.returncode == 0


async def test_system_prompt_file(tmp_path: Path) -> None:
    prompt = tmp_path / "team.md"
    prompt.write_text("# Team\nBe kind to reviewers.\n\n", encoding="utf-8")
    async with bridge(["--system-prompt-file", str(prompt), "--system-prompt-mode", "override"],
                      scripted(tmp_path, AGENT_WITH_CAP), tmp_path) as client:
        await client.call(V1_INIT)
        await client.call(V1_NEW)
    assert received(tmp_path)[1] == new_with(systemPrompt={
        "mode": "override", "content": [{"type": "text", "text": "# Team\nBe kind to reviewers."}]})


async def test_system_prompt_from_the_environment(tmp_path: Path) -> None:
    async with bridge([], scripted(tmp_path, AGENT_WITH_CAP), tmp_path,
                      env={"ACP_BRIDGE_SYSTEM_PROMPT": TEXT}) as client:
        await client.call(V1_INIT)
        await client.call(V1_NEW)
    assert received(tmp_path)[1] == new_with(systemPrompt=SP_APPEND)


async def test_without_a_system_prompt_nothing_changes(tmp_path: Path) -> None:
    """The control: the same conversation with injection off reaches the agent as sent."""
    async with bridge([], scripted(tmp_path, AGENT_WITH_CAP), tmp_path) as client:
        await client.call(V1_INIT)
        await client.call(V1_NEW)
    assert received(tmp_path) == [V1_INIT, V1_NEW]


# -- the layers of the setting, and what --strict means (issue 12) ----------------------------

AGENT_APPEND_ONLY = example("v1-initialize-response-agent-system-prompt-append-only")["result"]  # my-agent


async def test_the_command_lines_file_beats_the_environments_text(tmp_path: Path) -> None:
    """ACP_BRIDGE_SYSTEM_PROMPT plus --system-prompt-file used to be a usage error; the command
    line wins (spec/interface.md), whatever spelling each layer uses."""
    prompt = tmp_path / "team.md"
    prompt.write_text("From the file.\n", encoding="utf-8")
    async with bridge(["--system-prompt-file", str(prompt)], scripted(tmp_path, AGENT_WITH_CAP), tmp_path,
                      env={"ACP_BRIDGE_SYSTEM_PROMPT": "From the environment."}) as client:
        await client.call(V1_INIT)
        await client.call(V1_NEW)
    assert client.returncode == 0, bytes(client.stderr)
    assert received(tmp_path)[1] == new_with(systemPrompt={
        "mode": "append", "content": [{"type": "text", "text": "From the file."}]})


async def test_strict_option_refuses_the_override_downgrade(tmp_path: Path) -> None:
    """--strict asks for every strictness: an append-only agent gets no silent downgrade of
    override; the client is answered with an error and the agent never sees the request."""
    async with bridge(["--strict", "--system-prompt", TEXT, "--system-prompt-mode", "override"],
                      scripted(tmp_path, AGENT_APPEND_ONLY), tmp_path) as client:
        await client.call(V1_INIT)
        answer = await client.call(V1_NEW)
    assert answer["error"]["code"] == -32603
    assert "system_prompt.strict forbids falling back to append" in answer["error"]["message"]
    assert received(tmp_path) == [V1_INIT]
    assert client.returncode == 0


async def test_a_client_system_prompt_given_as_a_string_is_merged(tmp_path: Path) -> None:
    """A client on the RFD's first draft sends `systemPrompt` as a string; merge used to drop
    the configured prompt without a word. Now the agent gets the spec object: the client's
    text, then the configured text, and -v says what was sent (not the text)."""
    async with bridge(["-v", "--system-prompt", TEXT], scripted(tmp_path, AGENT_WITH_CAP), tmp_path) as client:
        await client.call(V1_INIT)
        await client.call(new_with(systemPrompt="Be terse."))
    assert received(tmp_path)[1] == new_with(systemPrompt={"mode": "append", "content": [
        {"type": "text", "text": "Be terse."}, {"type": "text", "text": TEXT}]})
    assert (b"INFO: session/new 1: the client's systemPrompt was a string (the RFD's first draft), not an "
            b"object; sent the ACP object instead: mode append, 2 content blocks") in client.stderr
    assert TEXT.encode() not in client.stderr
