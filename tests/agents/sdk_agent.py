"""An agent written with the official Python SDK (`agent-client-protocol`), for interop tests.

It answers initialize and session/new, and for each prompt streams two message chunks
before answering `end_turn`. With `--usage`, each prompt's chunks follow a `usage_update`
(what strict clients fail on: configs/no-usage-updates.toml).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from acp import PROTOCOL_VERSION, Agent, run_agent, text_block, update_agent_message
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    UsageUpdate,
)

USAGE = "--usage" in sys.argv[1:]


class EchoAgent(Agent):
    def __init__(self) -> None:
        self._conn: Client | None = None
        self._sessions = 0

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="sdk-echo-agent", version="1.0.0"))

    async def new_session(self, cwd: str, additional_directories: list[str] | None = None,
                          mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        self._sessions += 1
        return NewSessionResponse(session_id=f"sess_{self._sessions}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        assert self._conn is not None
        text = "".join(getattr(block, "text", "") for block in prompt)
        if USAGE:
            await self._conn.session_update(session_id=session_id, update=UsageUpdate(
                session_update="usage_update", used=53000, size=200000))
        for part in ("echo: ", text):
            await self._conn.session_update(session_id=session_id, update=update_agent_message(text_block(part)))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    # The SDK's Agent is a Protocol whose other methods have default bodies; this agent
    # implements what the interop tests use, so mypy's abstract-class check is waived here.
    asyncio.run(run_agent(EchoAgent()))  # type: ignore[abstract]
