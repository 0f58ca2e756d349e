"""Ordinary traffic between the official Python SDK's client and an SDK agent, through the
bridge with a capture: no finding at warning level, live or afterwards."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from acp_bridge.commands import main
from tests.conftest import TESTS, sdk


async def converse(capture: Path) -> None:
    from tests.shell.test_interop_sdk import RecordingClient

    acp = sdk()

    client = RecordingClient()
    bridge = [sys.executable, "-m", "acp_bridge", "run", "--capture", str(capture), "--",
              sys.executable, "-u", str(TESTS / "agents" / "sdk_agent.py")]
    async with acp.spawn_agent_process(client, bridge[0], *bridge[1:]) as (conn, _):
        await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd="/tmp", mcp_servers=[]), 30)
        for text in ("hello", "again"):
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[acp.text_block(text)]), 30)
        await asyncio.wait_for(client.wait_for_updates(4), 10)


def test_sdk_client_and_agent_give_no_warning(tmp_path: Path) -> None:
    capture = tmp_path / "sdk.jsonl"
    asyncio.run(converse(capture))
    records: list[dict[str, Any]] = [json.loads(line) for line in capture.read_text().splitlines()]
    assert [r for r in records if r["type"] == "finding"] == []
    result = CliRunner().invoke(main, ["check", str(capture), "--json"])
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)["captures"][0]
    assert report["findings"] == [] and report["messages"] == 12
    assert report["verdict"] == "nothing was rewritten: the bridge can be removed"
