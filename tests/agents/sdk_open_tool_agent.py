"""An agent written with the official Python SDK that ends its turn with a tool call still
running (bridge-rules 6.2): each prompt starts `call_1` `in_progress` and answers `end_turn`
without ever finishing it."""

from __future__ import annotations

import asyncio
from typing import Any

from acp import PROTOCOL_VERSION, Agent, run_agent, start_tool_call
from acp.interfaces import Client
from acp.schema import AgentCapabilities, Implementation, InitializeResponse, NewSessionResponse, PromptResponse


class OpenToolAgent(Agent):
    def __init__(self) -> None:
        self._conn: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="open-tool-agent", version="1.0.0"))

    async def new_session(self, cwd: str, additional_directories: list[str] | None = None,
                          mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="sess_open")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        assert self._conn is not None
        await self._conn.session_update(session_id=session_id, update=start_tool_call(
            "call_1", "Run make", kind="execute", status="in_progress"))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(OpenToolAgent()))  # type: ignore[abstract]  # see sdk_agent.py
