"""The JSON-RPC methods of ACP that the bridge knows by name, and what it knows of each.

Owns: the one table of the methods of the ACP SDK 2.4.0 schemas (`schema/v1` and `schema/v2`,
`schema.json` and `schema.unstable.json`): for each method and kind (a request or a
notification), who sends it, the protocol versions whose stable schema has it and those whose
only the unstable schema has; the method names as constants; and the groups the rest of the
bridge treats alike (the requests that open, reopen or close a session, those that name a
session without joining it, those that wait on a person, those removed in v2). Health,
telemetry, show and the rules read them here rather than spelling names of their own.
Must never: hold state, do IO, or read the schemas (a test checks the table against them).

The schemas say who *handles* a method (`x-side`); this table says who *sends* it:
`x-side: agent` is sent by the client, `client` by the agent, `protocol` by either, and
`proxy` is hop-local between a conductor and its proxies (CHAIN).
"""

from __future__ import annotations

# Who sends a method.
CLIENT, AGENT, EITHER, CHAIN = "client", "agent", "either", "chain"
# What it is.
REQUEST, NOTIFICATION = "request", "notification"

# The names the code uses (every method of the table below is one of these).
INITIALIZE = "initialize"
AUTHENTICATE = "authenticate"
LOGOUT = "logout"
AUTH_LOGIN = "auth/login"
AUTH_LOGOUT = "auth/logout"
AUTH_STATUS = "auth/status"
AUTH_STATUS_UPDATE = "auth/status_update"
SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_FORK = "session/fork"
SESSION_CLOSE = "session/close"
SESSION_DELETE = "session/delete"
SESSION_LIST = "session/list"
SESSION_ARCHIVE = "session/archive"
SESSION_UNARCHIVE = "session/unarchive"
SESSION_STATUS = "session/status"
SESSION_SET_TITLE = "session/set_title"
SESSION_SET_MODE = "session/set_mode"
SESSION_SET_CONFIG_OPTION = "session/set_config_option"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_UPDATE = "session/update"
SESSION_REQUEST_PERMISSION = "session/request_permission"
CANCEL_REQUEST = "$/cancel_request"
ELICITATION_CREATE = "elicitation/create"
ELICITATION_COMPLETE = "elicitation/complete"
FS_READ_TEXT_FILE = "fs/read_text_file"
FS_WRITE_TEXT_FILE = "fs/write_text_file"
TERMINAL_CREATE = "terminal/create"
TERMINAL_OUTPUT = "terminal/output"
TERMINAL_RELEASE = "terminal/release"
TERMINAL_WAIT_FOR_EXIT = "terminal/wait_for_exit"
TERMINAL_KILL = "terminal/kill"
TERMINAL_CANCEL = "terminal/cancel"
TOOL_CALL_CANCEL = "tool_call/cancel"
MCP_MESSAGE = "mcp/message"
PROVIDERS_LIST = "providers/list"
PROVIDERS_SET = "providers/set"
PROVIDERS_DISABLE = "providers/disable"
PROXY_INITIALIZE = "proxy/initialize"
PROXY_SUCCESSOR = "proxy/successor"

NONE: frozenset[int] = frozenset()
V1, V2, V12 = frozenset({1}), frozenset({2}), frozenset({1, 2})


class Method:
    """One method of one kind (`mcp/message` and `proxy/successor` are both a request and a
    notification). `stable`: the protocol versions whose `schema.json` has it; `unstable`:
    those whose only `schema.unstable.json` has it. A plain class: `run` imports this module,
    and a dataclass costs a millisecond of start-up to define."""

    __slots__ = ("kind", "name", "sender", "stable", "unstable", "versions")

    def __init__(self, name: str, kind: str, sender: str, stable: frozenset[int], unstable: frozenset[int]) -> None:
        self.name, self.kind, self.sender, self.stable, self.unstable = name, kind, sender, stable, unstable
        self.versions = stable | unstable

    def __repr__(self) -> str:
        return f"<Method {self.name} {self.kind} from {self.sender} v{sorted(self.versions)}>"

    @property
    def is_unstable(self) -> bool:
        """Not in any stable schema: it may change or go."""
        return not self.stable


METHODS: tuple[Method, ...] = (
    Method(CANCEL_REQUEST, NOTIFICATION, EITHER, V12, NONE),
    Method(INITIALIZE, REQUEST, CLIENT, V12, NONE),
    Method(AUTHENTICATE, REQUEST, CLIENT, V1, NONE),
    Method(LOGOUT, REQUEST, CLIENT, V1, NONE),
    Method(AUTH_LOGIN, REQUEST, CLIENT, V2, NONE),
    Method(AUTH_LOGOUT, REQUEST, CLIENT, V2, NONE),
    Method(AUTH_STATUS, REQUEST, CLIENT, NONE, V12),
    Method(AUTH_STATUS_UPDATE, NOTIFICATION, AGENT, NONE, V12),
    Method(SESSION_NEW, REQUEST, CLIENT, V12, NONE),
    Method(SESSION_LOAD, REQUEST, CLIENT, V1, NONE),
    Method(SESSION_RESUME, REQUEST, CLIENT, V12, NONE),
    Method(SESSION_FORK, REQUEST, CLIENT, NONE, V12),
    Method(SESSION_CLOSE, REQUEST, CLIENT, V12, NONE),
    Method(SESSION_DELETE, REQUEST, CLIENT, V12, NONE),
    Method(SESSION_LIST, REQUEST, CLIENT, V12, NONE),
    Method(SESSION_ARCHIVE, REQUEST, CLIENT, NONE, V12),
    Method(SESSION_UNARCHIVE, REQUEST, CLIENT, NONE, V12),
    Method(SESSION_STATUS, REQUEST, CLIENT, NONE, V12),
    Method(SESSION_SET_TITLE, REQUEST, CLIENT, NONE, V12),
    Method(SESSION_SET_MODE, REQUEST, CLIENT, V1, NONE),
    Method(SESSION_SET_CONFIG_OPTION, REQUEST, CLIENT, V12, NONE),
    Method(SESSION_PROMPT, REQUEST, CLIENT, V12, NONE),
    Method(SESSION_CANCEL, NOTIFICATION, CLIENT, V12, NONE),
    Method(SESSION_UPDATE, NOTIFICATION, AGENT, V12, NONE),
    Method(SESSION_REQUEST_PERMISSION, REQUEST, AGENT, V12, NONE),
    Method(TOOL_CALL_CANCEL, REQUEST, CLIENT, V2, NONE),
    Method(TERMINAL_CANCEL, REQUEST, CLIENT, V2, NONE),
    Method(ELICITATION_CREATE, REQUEST, AGENT, V12, NONE),
    Method(ELICITATION_COMPLETE, NOTIFICATION, AGENT, V12, NONE),
    Method(FS_READ_TEXT_FILE, REQUEST, AGENT, V1, NONE),
    Method(FS_WRITE_TEXT_FILE, REQUEST, AGENT, V1, NONE),
    Method(TERMINAL_CREATE, REQUEST, AGENT, V1, NONE),
    Method(TERMINAL_OUTPUT, REQUEST, AGENT, V1, NONE),
    Method(TERMINAL_RELEASE, REQUEST, AGENT, V1, NONE),
    Method(TERMINAL_WAIT_FOR_EXIT, REQUEST, AGENT, V1, NONE),
    Method(TERMINAL_KILL, REQUEST, AGENT, V1, NONE),
    Method(MCP_MESSAGE, REQUEST, AGENT, NONE, V12),
    Method(MCP_MESSAGE, NOTIFICATION, CLIENT, NONE, V12),
    Method(PROVIDERS_LIST, REQUEST, CLIENT, NONE, V12),
    Method(PROVIDERS_SET, REQUEST, CLIENT, NONE, V12),
    Method(PROVIDERS_DISABLE, REQUEST, CLIENT, NONE, V12),
    Method(PROXY_INITIALIZE, REQUEST, CHAIN, NONE, V12),
    Method(PROXY_SUCCESSOR, REQUEST, CHAIN, NONE, V12),
    Method(PROXY_SUCCESSOR, NOTIFICATION, CHAIN, NONE, V12),
)

BY_NAME_KIND: dict[tuple[str, str], Method] = {(m.name, m.kind): m for m in METHODS}
NAMES: frozenset[str] = frozenset(m.name for m in METHODS)


def lookup(name: object, kind: str) -> Method | None:
    """The method `name` of `kind` (REQUEST or NOTIFICATION), or None when ACP has no such one
    (a name from the wire can be anything, not even a string)."""
    return BY_NAME_KIND.get((name, kind)) if isinstance(name, str) else None


# The requests whose response names the session they create.
SESSION_OPENERS = frozenset({SESSION_NEW, SESSION_FORK})
# The requests that name a session they open again (load replays its history, resume does not).
SESSION_REOPENERS = frozenset({SESSION_LOAD, SESSION_RESUME})
# Every request that sets a session up (their responses may carry `availableCommands`).
SETUP_METHODS = SESSION_OPENERS | SESSION_REOPENERS
# The requests whose success ends an active session on the connection: `session/archive`
# frees an active session "as if `session/close` had been called" (its schema says so).
SESSION_CLOSERS = frozenset({SESSION_CLOSE, SESSION_ARCHIVE})
# Requests that name a session without joining it: the session need not be active on the
# connection (status, title, archive, unarchive and delete act on any session `session/list`
# would show), so they open nothing.
SESSION_DETACHED = frozenset({SESSION_STATUS, SESSION_SET_TITLE, SESSION_ARCHIVE, SESSION_UNARCHIVE,
                              SESSION_DELETE})
# Agent requests that wait on a person or on a command by design.
WAIT_BY_DESIGN = frozenset({SESSION_REQUEST_PERMISSION, TERMINAL_WAIT_FOR_EXIT, ELICITATION_CREATE})
# Methods of v1 that v2 removed (in no v2 schema, stable or unstable).
V1_ONLY: frozenset[str] = frozenset(m.name for m in METHODS if m.versions == V1)
