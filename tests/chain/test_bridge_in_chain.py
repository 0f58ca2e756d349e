"""acp-bridge as a link in real chains: the Python SDK's client → a conductor → `acp-bridge run`
(no agent) → a real agent. The client sees what it sees with the bridge in front of the agent,
the capture reads the same, every envelope the bridge sends passes both unstable schemas, and
params cross byte for byte."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.chain.harness import (
    EXITED,
    INIT,
    RawChain,
    connect,
    python_conductor,
    schemas_missing,
    scripted,
    sdk_agent,
    thinkwell_conductor,
    thinkwell_missing,
)
from tests.conftest import ROOT, TESTS, invoke, sdk
from tests.shell.sdk_client import RecordingClient

needs_schemas = pytest.mark.skipif(schemas_missing() is not None, reason=schemas_missing() or "")
NODE = shutil.which("node")
TS_AGENT = ["node", str(TESTS / "agents" / "ts_agent.mjs"), str(ROOT / ".sdk-ts")]
needs_ts_agent = pytest.mark.skipif(
    NODE is None or not (ROOT / ".sdk-ts" / "node_modules" / "@agentclientprotocol" / "sdk").is_dir(),
    reason="the TypeScript SDK is not installed: npm install --prefix .sdk-ts @agentclientprotocol/sdk zod "
           "(.ci/run does it where npm is available)")


def bridge(*args: str) -> list[str]:
    """`acp-bridge run ARGS` with no agent: a chain component."""
    return [sys.executable, "-m", "acp_bridge", "run", *args]


def with_rules(tmp_path: Path, name: str) -> list[str]:
    """Options for a bridge with a system prompt, a `[[rewrite]]` and a capture."""
    config = tmp_path / "bridge.toml"
    config.write_text('[[rewrite]]\nname = "tag"\nmethod = "session/prompt"\ndirection = "to-agent"\n'
                      'set = { "/_meta/tagged" = true }\n', encoding="utf-8")
    return ["-c", str(config), "--system-prompt", "Be brief.", "--capture", str(tmp_path / name)]


class Granting(RecordingClient):
    """A client that allows what it is asked, and keeps each request."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kwargs: Any) -> Any:
        acp = sdk()
        self.asked.append(tool_call.title)
        allow = acp.schema.AllowedOutcome(option_id=options[0].option_id, outcome="selected")
        return acp.schema.RequestPermissionResponse(outcome=allow)


async def session(command: list[str], texts: int) -> dict[str, Any]:
    """initialize, session/new and one prompt from the Python SDK's client through `command`,
    waiting for `texts` session updates; what the client saw (the texts of the updates that
    have content, in order)."""
    acp = sdk()
    client = Granting()
    async with connect(client, command) as (conn, process):
        init = await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), 30)
        new = await asyncio.wait_for(conn.new_session(cwd="/tmp", mcp_servers=[]), 30)
        reply = await asyncio.wait_for(conn.prompt(session_id=new.session_id, prompt=[acp.text_block("hi chain")]), 30)
        await asyncio.wait_for(client.wait_for_updates(texts), 30)
    meta = dict(init.field_meta or {})
    meta.pop("proxy", None)  # the sacp dialect's answer to its conductor, handed on to the client
    return {"agent": init.agent_info.name if init.agent_info else None, "meta": meta,
            "caps": init.agent_capabilities.model_dump(), "session": new.session_id, "stop": reply.stop_reason,
            "texts": [update.content.text for _, update in client.updates if getattr(update, "content", None)],
            "asked": client.asked, "status": process.returncode}


def capture_messages(path: Path) -> list[tuple[str, str, str | None, Any]]:
    """What a capture recorded: each message's direction, kind, method and params or result
    (ids differ from one chain to another: each conductor numbers its own). The sacp
    dialect's `_meta.proxy` on initialize and its answer (the conductor's and the next
    proxy's) is left out."""
    out = []
    for raw in path.read_bytes().splitlines():
        record = orjson.loads(raw)
        if record["type"] == "message":
            msg = orjson.loads(record["raw"])
            body = msg.get("params", msg.get("result"))
            if record["method"] == "initialize" and isinstance(body, dict):
                body.get("_meta", {}).pop("proxy", None)
                if body.get("_meta") == {}:
                    del body["_meta"]
            out.append((record["direction"], record["kind"], record["method"], body))
    return out


def readers_agree(chain: Path, direct: Path, tmp_path: Path) -> None:
    """`stats`, `show`, `export` and `replay --rules` read a chain's capture as any other: the
    same counts as the capture made in front of the agent, every message shown, a page, and
    the rules re-run over it as over that capture."""
    def stats(path: Path) -> Any:
        facts = json.loads(invoke(["stats", "--json", str(path)]).stdout)
        return (facts["messages"], facts["malformed"], facts["ended"],
                sorted((row["method"], row["direction"], row["count"]) for row in facts["by_method"]))

    assert stats(chain) == stats(direct)
    shown = invoke(["show", str(chain)])
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) == stats(direct)[0]
    page = tmp_path / "chain.html"
    assert invoke(["export", "--html", str(page), str(chain)]).returncode == 0
    assert b"session/prompt" in page.read_bytes()
    def rerun(path: Path) -> Any:  # with no system prompt given, the prompt that carried it differs
        return json.loads(invoke(["replay", "--rules", "--json", str(path)]).stdout)["summary"]

    assert rerun(chain) == rerun(direct) and rerun(chain)["compared"] > 0


def check(path: Path) -> list[Any]:
    """`check`'s findings on a capture: each code with its count."""
    done = invoke(["check", "--json", str(path)])
    return [(f["code"], f["count"]) for f in json.loads(done.stdout)["captures"][0]["findings"]]


@needs_schemas
def test_under_the_official_conductor_the_client_and_the_capture_see_what_they_see_in_front_of_the_agent(
        tmp_path: Path) -> None:
    direct = asyncio.run(session(bridge(*with_rules(tmp_path, "direct.jsonl"), "--", *sdk_agent()), texts=2))
    conductor = python_conductor([bridge(*with_rules(tmp_path, "chain.jsonl")), sdk_agent()], tmp_path)
    chained = asyncio.run(session(conductor.command, texts=2))
    assert conductor.violations() == []
    assert chained == direct
    assert direct["texts"][1].startswith("Be brief.")  # the system prompt reached the agent both ways
    assert capture_messages(tmp_path / "chain.jsonl") == capture_messages(tmp_path / "direct.jsonl")
    assert check(tmp_path / "chain.jsonl") == check(tmp_path / "direct.jsonl")
    readers_agree(tmp_path / "chain.jsonl", tmp_path / "direct.jsonl", tmp_path)
    header = orjson.loads((tmp_path / "chain.jsonl").read_bytes().splitlines()[0])
    assert header["chain"] == {"role": "proxy", "dialect": "official"}
    # The agent's chunk crossed the bridge byte for byte: from inside the conductor's envelope
    # to the client's line.
    chunk = next(line for line in conductor.lines(1, "received") if b"agent_message_chunk" in line)
    params = chunk[chunk.index(b'"params":') + 9:-1]
    assert any(params in line and b"proxy/successor" in line for line in conductor.lines(0, "sent"))
    assert any(line.endswith(b'"params":' + params + b"}") for line in conductor.lines("client", "sent"))


@needs_ts_agent
def test_under_thinkwell_the_typescript_agents_permission_request_crosses_the_chain(tmp_path: Path) -> None:
    missing = thinkwell_missing()
    if missing:
        pytest.skip(missing)
    direct = asyncio.run(session(bridge(*with_rules(tmp_path, "direct.jsonl"), "--", *TS_AGENT), texts=2))
    chained = asyncio.run(session(thinkwell_conductor([bridge(*with_rules(tmp_path, "chain.jsonl")), TS_AGENT]),
                                  texts=2))
    assert chained == direct
    assert direct["asked"] == ["Run the tests"] and direct["texts"][-1] == "permission: allow"
    # The agent sends its commands from a timer, so they may come before or after the prompt:
    # the same messages, and, but for those, in the same order each way.
    chain_messages, direct_messages = capture_messages(tmp_path / "chain.jsonl"), capture_messages(tmp_path / "direct.jsonl")
    assert sorted(map(repr, chain_messages)) == sorted(map(repr, direct_messages))

    def in_order(messages: list[Any], way: str) -> list[Any]:
        return [m for m in messages if m[0] == way and "available_commands_update" not in repr(m[3])]

    for way in ("to-agent", "to-client"):
        assert in_order(chain_messages, way) == in_order(direct_messages, way)
    assert check(tmp_path / "chain.jsonl") == check(tmp_path / "direct.jsonl")
    header = orjson.loads((tmp_path / "chain.jsonl").read_bytes().splitlines()[0])
    assert header["chain"] == {"role": "proxy", "dialect": "sacp"}


def test_two_bridges_in_one_thinkwell_chain(tmp_path: Path) -> None:
    missing = thinkwell_missing()
    if missing:
        pytest.skip(missing)
    chunk = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "$sessionId", "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "two bridges"}}}}
    agent = scripted(tmp_path, {"initialize": [{"respond": {"protocolVersion": 1, "agentCapabilities": {}}}],
                                "session/new": [{"respond": {"sessionId": "sess_1"}}],
                                "session/prompt": [{"send": chunk}, {"respond": {"stopReason": "end_turn"}}]})
    chain = [bridge("--capture", str(tmp_path / "first.jsonl")), bridge("--capture", str(tmp_path / "second.jsonl")),
             agent]
    seen = asyncio.run(session(thinkwell_conductor(chain), texts=1))
    assert (seen["texts"], seen["stop"], seen["status"]) == (["two bridges"], "end_turn", 0)
    first, second = capture_messages(tmp_path / "first.jsonl"), capture_messages(tmp_path / "second.jsonl")
    assert first == second  # the second bridge saw what the first passed on, and the other way
    assert [m[2] for m in first if m[1] == "request"] == ["initialize", "session/new", "session/prompt"]


@needs_schemas
def test_official_a_successor_request_a_cancel_and_a_successor_that_exits(tmp_path: Path) -> None:
    """The agent's file read reaches the client through the bridge and its answer goes back;
    the client's cancel reaches each hop under that hop's id; the agent exits, and the
    conductor's own error answers the prompt, under the client's id."""
    read = {"jsonrpc": "2.0", "id": "agent-1", "method": "fs/read_text_file", "params": {"sessionId": "s", "path": "/x"}}
    agent = scripted(tmp_path, {"initialize": [{"respond": {"protocolVersion": 1}}], "session/prompt": [{"send": read}],
                                "$/cancel_request": [{"exit": 0}]})
    conductor = python_conductor([bridge("--capture", str(tmp_path / "cap.jsonl")), agent], tmp_path)
    big = b"123456789012345678901234567890"
    with RawChain(conductor.command) as chain:
        chain.send(INIT)
        assert chain.receive() == b'{"jsonrpc":"2.0","id":"init","result":{"protocolVersion": 1}}'
        chain.send(b'{"jsonrpc":"2.0","id":' + big + b',"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}')
        assert chain.receive() == (b'{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file",'
                                   b'"params":{"sessionId": "s", "path": "/x"}}')
        chain.send(b'{"jsonrpc":"2.0","id":1,"result":{"content":"hi"}}')
        chain.send(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":' + big + b"}}")
        assert chain.receive() == (b'{"jsonrpc":"2.0","id":' + big + b',"error":{"code": %d, "message": '
                                   b'"conductor: component 1 exited"}}' % EXITED)
        status = chain.close()
    assert (conductor.violations(), status) == ([], 0)
    assert (tmp_path / "agent.log").read_bytes().splitlines() == [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}',
        b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}',
        b'{"jsonrpc":"2.0","id":"agent-1","result":{"content":"hi"}}',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}',
    ]


@needs_schemas
def test_official_a_40_mib_prompt_crosses_the_chain_to_the_agent(tmp_path: Path) -> None:
    agent = scripted(tmp_path, {"initialize": [{"respond": {"protocolVersion": 1}}],
                                "session/prompt": [{"respond": {"stopReason": "end_turn"}}]})
    conductor = python_conductor([bridge(), agent], tmp_path, trace=False)
    params = b'{"sessionId":"s","prompt":[{"type":"text","text":"' + b"y" * (40 << 20) + b'"}]}'
    with RawChain(conductor.command) as chain:
        chain.send(INIT)
        chain.receive()
        chain.send(b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":' + params + b"}")
        assert chain.receive(timeout=60) == b'{"jsonrpc":"2.0","id":7,"result":{"stopReason": "end_turn"}}'
        status = chain.close()
    assert (conductor.violations(), status) == ([], 0)
    received = (tmp_path / "agent.log").read_bytes().splitlines()[1]
    assert received == b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":' + params + b"}"
