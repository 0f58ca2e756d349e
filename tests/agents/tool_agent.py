"""An SDK agent whose turns use tools, for the telemetry tests.

Each prompt: a message chunk, a `read` tool call that asks the client for permission and
reads a file through the client (`fs/read_text_file`), an `execute` tool call that fails,
then `end_turn` with token usage. The secret "s3cr3t" is in the read tool's raw input, so
a test can show that redaction applies before content leaves.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    run_agent,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    Usage,
)


class ToolAgent(Agent):
    def __init__(self) -> None:
        self._conn: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="tool-agent", version="2.5.0"))

    async def new_session(self, cwd: str, additional_directories: list[str] | None = None,
                          mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="sess_tools")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        conn = self._conn
        assert conn is not None
        await conn.session_update(session_id=session_id, update=update_agent_message(text_block("Reading it.")))
        await conn.session_update(session_id=session_id, update=start_tool_call(
            "call_1", "Read notes.txt", kind="read", status="pending",
            raw_input={"path": "/tmp/notes.txt", "token": "s3cr3t"}))
        await conn.request_permission(
            session_id=session_id, tool_call=ToolCallUpdate(tool_call_id="call_1"),
            options=[PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                     PermissionOption(option_id="reject", name="Reject", kind="reject_once")])
        await conn.session_update(session_id=session_id, update=update_tool_call("call_1", status="in_progress"))
        read = await conn.read_text_file(session_id=session_id, path="/tmp/notes.txt")
        await conn.session_update(session_id=session_id, update=update_tool_call(
            "call_1", status="completed", raw_output={"text": read.content}))
        await conn.session_update(session_id=session_id, update=start_tool_call(
            "call_2", "Run make", kind="execute", status="in_progress"))
        await conn.session_update(session_id=session_id, update=update_tool_call("call_2", status="failed"))
        return PromptResponse(stop_reason="end_turn", usage=Usage(total_tokens=46, input_tokens=12, output_tokens=34))


if __name__ == "__main__":
    asyncio.run(run_agent(ToolAgent()))  # type: ignore[abstract]  # see sdk_agent.py
