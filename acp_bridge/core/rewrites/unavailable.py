"""AgentUnavailable: answer every client request with an error when the agent cannot run.

Before: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{...}}          (-> agent)
After:  nothing to the agent, and toward the client
        {"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"cannot start agent ...",
         "data":{"command":[...],"reason":"..."}}}

Used only when the agent command could not be started, so the editor sees why instead of
waiting forever (bridge-rules.md 5).
"""

from __future__ import annotations

from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core.frames import Direction, Frame
from acp_bridge.core.rewrites.base import DROP, Emit, Outcome, Replace, Rewrite
from acp_bridge.core.session import Session


class AgentUnavailable(Rewrite):
    name = "agent-unavailable"

    def __init__(self, message: str, data: Any = None) -> None:
        self.message, self.data = message, data

    def request(self, frame: Frame, session: Session) -> Outcome:
        if frame.direction is not Direction.TO_AGENT:
            return DROP
        answer = p.error_response(frame.id, p.INTERNAL_ERROR, self.message, self.data)
        return Replace(None, then=(Emit(Direction.TO_CLIENT, answer),))

    def notification(self, frame: Frame, session: Session) -> Outcome:
        return DROP
