"""Sessions recorded through the bridge (the demo, and the Python SDK example agent) replayed
to the official Python SDK client: it receives the same session updates, stop reasons and
suggestions as in the recording.

The SDK (0.12) does not know `prompt_suggestions_update` and drops it with a logged
validation error, so the suggestions are checked on the wire: the replay runs behind a bridge
with no rule at work (`run --no-suggestions --capture`) whose capture shows what reached the SDK.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from acp_bridge.commands import main
from tests.conftest import TESTS, sdk
from tests.replay.drive import PY, recorded_updates, replayed, stop_reasons, suggestions
from tests.shell.sdk_client import RecordingClient


async def converse(command: list[str], prompts: list[str], updates: int) -> tuple[Any, list[Any], RecordingClient]:
    """initialize, session/new, then each prompt; wait for `updates` session updates."""
    acp = sdk()
    client = RecordingClient()
    async with acp.spawn_agent_process(client, command[0], *command[1:]) as (conn, _):
        await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd="/tmp", mcp_servers=[]), 30)
        replies = [await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                      prompt=[acp.text_block(text)]), 30) for text in prompts]
        try:
            await asyncio.wait_for(client.wait_for_updates(updates), 10)
        except TimeoutError:
            pass  # the assertions show what did not come
    return session, replies, client


def sdk_updates(client: RecordingClient) -> list[tuple[str, Any]]:
    return [(sid, u.model_dump(mode="json", by_alias=True, exclude_none=True)) for sid, u in client.updates]


def test_the_demo_session_replays_to_the_sdk_client(demo: Path, tmp_path: Path) -> None:
    capture, wire = demo, tmp_path / "wire.jsonl"
    expected = recorded_updates(capture)
    known = [(sid, u) for sid, u in expected if u["sessionUpdate"] != "prompt_suggestions_update"]
    session, replies, client = asyncio.run(converse(replayed(capture, wire), ["Explain the parser", "Now run"],
                                                    len(known)))
    assert session.session_id == "sess_1"
    assert [r.stop_reason for r in replies] == stop_reasons(capture) == ["end_turn", "end_turn"]
    assert sdk_updates(client) == known
    assert suggestions(recorded_updates(wire)) == suggestions(expected)
    assert len(suggestions(expected)) == 3  # offered, withdrawn on the next prompt, offered again


def test_a_session_of_the_sdk_example_agent_replays_to_the_sdk_client(tmp_path: Path) -> None:
    """Recorded live (SDK client, bridge, SDK agent), then replayed: the same updates and
    stop reason reach the SDK client; and the recording drives the SDK agent again
    (`acp-bridge drive`) with no difference."""
    capture, wire = tmp_path / "live.jsonl", tmp_path / "wire.jsonl"
    agent = [sys.executable, "-u", str(TESTS / "agents" / "sdk_agent.py")]
    live = [*PY, "run", "--capture", str(capture), "--", *agent]
    _, live_replies, live_client = asyncio.run(converse(live, ["hello bridge"], 2))
    assert [u.content.text for _, u in live_client.updates] == ["echo: ", "hello bridge"]
    session, replies, client = asyncio.run(converse(replayed(capture, wire), ["hello again"], 2))
    assert session.session_id == "sess_1"
    assert [r.stop_reason for r in replies] == [r.stop_reason for r in live_replies] == ["end_turn"]
    assert client.updates == live_client.updates
    assert recorded_updates(wire) == recorded_updates(capture)
    driven = CliRunner().invoke(main, ["drive", str(capture), "--compare", "text", "--", *agent])
    assert (driven.exit_code, driven.stdout) == (
        0, "drive: 1 prompt turn(s) compared: 1 as recorded, 0 differ, 0 failed\n")
