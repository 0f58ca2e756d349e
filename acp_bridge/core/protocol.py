"""The wire vocabulary of ACP and JSON-RPC 2.0 that the bridge reads or writes.

Owns: method names, `sessionUpdate` values, capability keys and error codes, as string and
integer constants, and the small accessors that read a capability from either protocol version.
Must never: hold state, do IO, or guess at shapes it does not know (an accessor returns None).
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

JSONRPC = "2.0"

# Methods (ACP v1 and v2; see spec/acp-notes.md sections 2-3).
INITIALIZE = "initialize"
SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_FORK = "session/fork"
SESSION_CLOSE = "session/close"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_UPDATE = "session/update"
AUTHENTICATE = "authenticate"
AUTH_LOGIN = "auth/login"
TERMINAL_CREATE = "terminal/create"

# session/update discriminators.
SESSION_INFO_UPDATE = "session_info_update"
PROMPT_SUGGESTIONS_UPDATE = "prompt_suggestions_update"
AVAILABLE_COMMANDS_UPDATE = "available_commands_update"
TOOL_CALL = "tool_call"  # v1 only: v2 creates a tool call with its first tool_call_update
TOOL_CALL_UPDATE = "tool_call_update"
STATE_UPDATE = "state_update"  # v2: `state: "idle"` ends a turn

# The requests that set a session up (their responses may carry `availableCommands`).
SETUP_METHODS = frozenset({SESSION_NEW, SESSION_LOAD, SESSION_RESUME, SESSION_FORK})

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
