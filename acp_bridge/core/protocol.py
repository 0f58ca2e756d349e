"""The wire vocabulary of ACP and JSON-RPC 2.0 that the bridge reads or writes.

Owns: `sessionUpdate` values, capability keys and error codes, as string and integer
constants, and the small accessors that read a capability from either protocol version
(method names are `core/methods.py`'s, some named here too).
Must never: hold state, do IO, or guess at shapes it does not know (an accessor returns None).
"""

from __future__ import annotations

from typing import Any

# Method names, and the groups of them, live in `core/methods.py` (the one table of the SDK
# 2.4.0 schemas); the ones most code reads are named here too.
from acp_bridge.core.methods import AUTH_LOGIN as AUTH_LOGIN
from acp_bridge.core.methods import AUTHENTICATE as AUTHENTICATE
from acp_bridge.core.methods import INITIALIZE as INITIALIZE
from acp_bridge.core.methods import SESSION_CANCEL as SESSION_CANCEL
from acp_bridge.core.methods import SESSION_CLOSE as SESSION_CLOSE
from acp_bridge.core.methods import SESSION_FORK as SESSION_FORK
from acp_bridge.core.methods import SESSION_LOAD as SESSION_LOAD
from acp_bridge.core.methods import SESSION_NEW as SESSION_NEW
from acp_bridge.core.methods import SESSION_PROMPT as SESSION_PROMPT
from acp_bridge.core.methods import SESSION_RESUME as SESSION_RESUME
from acp_bridge.core.methods import SESSION_UPDATE as SESSION_UPDATE
from acp_bridge.core.methods import SETUP_METHODS as SETUP_METHODS
from acp_bridge.core.methods import TERMINAL_CREATE as TERMINAL_CREATE

Json = dict[str, Any]

JSONRPC = "2.0"

# session/update discriminators.
SESSION_INFO_UPDATE = "session_info_update"
PROMPT_SUGGESTIONS_UPDATE = "prompt_suggestions_update"
AVAILABLE_COMMANDS_UPDATE = "available_commands_update"
TOOL_CALL = "tool_call"  # v1 only: v2 creates a tool call with its first tool_call_update
TOOL_CALL_UPDATE = "tool_call_update"
STATE_UPDATE = "state_update"  # v2: `state: "idle"` ends a turn

# Keys.
META = "_meta"
PROMPT_SUGGESTIONS = "promptSuggestions"
SYSTEM_PROMPT = "systemPrompt"
AVAILABLE_COMMANDS = "availableCommands"

# JSON-RPC error codes (JSON-RPC 2.0 section 5.1; ACP ErrorCode).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Content block types always allowed in a prompt (ACP content.mdx).
BASELINE_BLOCKS = frozenset({"text", "resource_link"})
# Block type -> the capability name that gates it, on both sides.
GATED_BLOCKS = {"image": "image", "audio": "audio", "resource": "embeddedContext"}


def get_path(obj: Any, *keys: str) -> Any:
    """Follow object keys; None as soon as a step is missing or not an object."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def client_capabilities(params: Any) -> Json:
    """The client's capability object from `initialize` params, v1 or v2 (never None)."""
    if not isinstance(params, dict):
        return {}
    caps = params.get("clientCapabilities")
    if caps is None:
        caps = params.get("capabilities")
    return caps if isinstance(caps, dict) else {}


def agent_capabilities(result: Any) -> Json:
    """The agent's capability object from the `initialize` result, v1 or v2 (never None)."""
    if not isinstance(result, dict):
        return {}
    caps = result.get("agentCapabilities")
    if caps is None:
        caps = result.get("capabilities")
    return caps if isinstance(caps, dict) else {}


def error_response(id_: Any, code: int, message: str, data: Any = None) -> Json:
    """A JSON-RPC error response object."""
    error: Json = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": JSONRPC, "id": id_, "error": error}


def session_update(session_id: Any, update: Json) -> Json:
    """A `session/update` notification carrying one update."""
    return {
        "jsonrpc": JSONRPC,
        "method": SESSION_UPDATE,
        "params": {"sessionId": session_id, "update": update},
    }
