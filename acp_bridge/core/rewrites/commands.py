"""The commands mirror: slash commands given in a setup response also sent as the notification.

bridge-rules 6.1. A v2 agent may list its slash commands in the `session/new`,
`session/load`, `session/resume` or `session/fork` response (`result.availableCommands`);
a client that reads commands only from `available_commands_update` then shows none. Each
notification replaces the list (slash-commands page), so a client that reads both ends with
the same list.

Before (agent -> client, answering `session/new`):
    {"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1","availableCommands":[{"name":"web",...}]}}
After: that response as it came, byte for byte, then
    {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":
     {"sessionUpdate":"available_commands_update","availableCommands":[{"name":"web",...}]}}}

Owns: `commands_update`, the notification a setup response calls for. Must never: change
the response, or a command entry (an unknown `input` type is preserved, numbers stay as
written: the entries are the very objects parsed from the response).
"""

from __future__ import annotations

from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.messages import Direction, Frame
from acp_bridge.core.protocol import Json
from acp_bridge.core.rewrites.base import PASS, Emit, Outcome, Replace, Rule
from acp_bridge.core.rewrites.options import OFF_FLAG, BuiltIn, Option
from acp_bridge.core.session import Connection, Pending

# A response to these names the session its request named; session/new and session/fork
# answer with the session they made (a fork's request names the session it forks from).
_NAMED_BY_REQUEST = frozenset({p.SESSION_LOAD, p.SESSION_RESUME})


def commands_update(response: Json, method: str, request_session: Any) -> Json | None:
    """The `available_commands_update` that mirrors a setup response's commands, or None
    when there is nothing to mirror (no result, no or an empty `availableCommands` array,
    no session to address it to)."""
    result = response.get("result")
    if not isinstance(result, dict):
        return None
    commands = result.get(p.AVAILABLE_COMMANDS)
    if not isinstance(commands, list) or not commands:
        return None
    session_id = read.created_session_id(result)
    if session_id is None and method in _NAMED_BY_REQUEST:
        session_id = request_session
    if not isinstance(session_id, str):  # a SessionId is a string (ACP schema)
        return None
    return p.session_update(session_id, {"sessionUpdate": p.AVAILABLE_COMMANDS_UPDATE,
                                         p.AVAILABLE_COMMANDS: commands})


class MirrorCommands(Rule):
    """On by default; `[commands] mirror_initial = false` or `--no-commands-mirror` turns it off."""

    name = "commands-mirror"

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        if (request.method not in p.SETUP_METHODS or request.origin is not Direction.TO_AGENT
                or frame.msg is None or not session.client_ready):
            return PASS
        update = commands_update(frame.msg, request.method, request.session_id)
        if update is None:
            return PASS
        return Replace(frame.msg, then=(Emit(Direction.TO_CLIENT, update),))  # the response as it came


DECLARED = BuiltIn(
    MirrorCommands.name, switch="commands.mirror_initial", rule=MirrorCommands, rank=30,
    options=(Option(
        "no_commands_mirror", "commands.mirror_initial", "--no-commands-mirror", "ACP_BRIDGE_NO_COMMANDS_MIRROR",
        "Do not follow a setup response that lists slash commands (availableCommands) with the "
        "available_commands_update notification carrying them.", OFF_FLAG, default=True),),
)
