"""System prompt injection (bridge-rules.md 3): every dialect and merge policy, v1 and v2.

Each case feeds the `initialize` exchange, then a few messages, through a
`Relay([SystemPrompt(...)], strict=True)` and compares the whole transcript that leaves the
bridge, message by message, with exact expected values.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.config import SystemPromptConfig
from acp_bridge.core.messages import Direction
from acp_bridge.core.relay import Relay, Verdict
from acp_bridge.core.rewrites.system_prompt import SystemPrompt
from acp_bridge.core.rewrites.system_prompt_shapes import (
    META_READERS,
    UNCHANGED,
    Dialect,
    Plan,
    choose_plan,
    combine_meta,
    combine_spec,
    inject_setup,
)
from tests.conftest import example, line

A = Direction.TO_AGENT
C = Direction.TO_CLIENT

TEXT = "Follow the team style guide."
CLIENT_TEXT = "You are working inside the Acme monorepo. Follow the team style guide."
CWD = "/home/user/project"
SP_APPEND = {"mode": "append", "content": [{"type": "text", "text": TEXT}]}
SP_OVERRIDE = {"mode": "override", "content": [{"type": "text", "text": TEXT}]}
V1_CAP = "agentCapabilities.sessionCapabilities.systemPrompt"
V2_CAP = "capabilities.session.systemPrompt"

# -- messages ---------------------------------------------------------------------------

V1_INIT = example("v1-initialize-request-client-plain")
V2_INIT = example("v2-initialize-request-client-plain")
V1_AGENT_OVERRIDE = example("v1-initialize-response-agent-with-system-prompt")  # my-agent
V1_AGENT_APPEND = example("v1-initialize-response-agent-system-prompt-append-only")  # my-agent
V1_AGENT_NONE = example("v1-initialize-response-agent-no-system-prompt")  # old-agent
V2_AGENT_OVERRIDE = example("v2-initialize-response-agent-with-system-prompt")  # my-agent
V2_AGENT_NONE = example("v2-initialize-response-agent-no-system-prompt")  # old-agent
V2_AGENT_APPEND: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "result": {
    "protocolVersion": 2, "info": {"name": "my-agent", "version": "1.0.0"},
    "capabilities": {"session": {"systemPrompt": {}}}}}


def renamed(init: dict[str, Any], name: str) -> dict[str, Any]:
    """An agent's initialize response with another agentInfo (v1) or info (v2) name."""
    result = dict(init["result"])
    key = "agentInfo" if "agentInfo" in result else "info"
    result[key] = {**result[key], "name": name}
    return {**init, "result": result}


ZED = "@zed-industries/claude-agent-acp"
ACP = "@agentclientprotocol/claude-agent-acp"

V1_NEW = example("v1-session-new-request-plain")
V1_NEW_SP = example("v1-session-new-request-with-system-prompt")
V1_NEW_SP_OVERRIDE = example("v1-session-new-request-with-system-prompt-override")
V1_NEW_META = example("v1-session-new-request-legacy-meta-system-prompt")
V1_NEW_RESP = example("v1-session-new-response")  # sess_abc123
V1_NEW_REJECTED = example("v1-session-new-error-system-prompt-rejected")
V1_LOAD: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "session/load",
           "params": {"sessionId": "sess_abc123", "cwd": CWD, "mcpServers": []}}
V1_LOAD_RESP = example("v1-session-load-response")
V1_RESUME: dict[str, Any] = {"jsonrpc": "2.0", "id": 3, "method": "session/resume",
             "params": {"sessionId": "sess_abc123", "cwd": CWD, "mcpServers": []}}
V1_RESUME_RESP = {"jsonrpc": "2.0", "id": 3, "result": {}}
V1_FORK: dict[str, Any] = {"jsonrpc": "2.0", "id": 4, "method": "session/fork",
           "params": {"sessionId": "sess_abc123", "cwd": CWD, "mcpServers": []}}
V1_FORK_RESP = example("v1-session-fork-response")  # sess_fork456
V1_PROMPT = example("v1-session-prompt-request")  # id 5, sess_abc123
V1_PROMPT_RESP = example("v1-session-prompt-response")
V1_PROMPT_2: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
               "params": {"sessionId": "sess_abc123", "prompt": [{"type": "text", "text": "Again"}]}}
V1_PROMPT_FORK: dict[str, Any] = {"jsonrpc": "2.0", "id": 8, "method": "session/prompt",
                  "params": {"sessionId": "sess_fork456", "prompt": [{"type": "text", "text": "Go"}]}}

V2_NEW = example("v2-session-new-request-plain")
V2_NEW_SP = example("v2-session-new-request-with-system-prompt")
V2_NEW_RESP = example("v2-session-new-response")  # sess_abc123
V2_RESUME: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "session/resume",
             "params": {"sessionId": "sess_abc123", "cwd": CWD, "replayFrom": {"type": "start"}}}
V2_FORK: dict[str, Any] = {"jsonrpc": "2.0", "id": 3, "method": "session/fork",
           "params": {"sessionId": "sess_abc123", "cwd": CWD}}
V2_FORK_RESP = {"jsonrpc": "2.0", "id": 3, "result": {"sessionId": "sess_fork456"}}
V2_PROMPT = example("v2-session-prompt-request")  # id 5, sess_abc123
V2_PROMPT_RESP = example("v2-session-prompt-response")


# Expected rewrites, written out in full.
def v1_new(**extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": CWD, "mcpServers": [], **extra}}


def v2_new(**extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": CWD, **extra}}


def refused(id_: int, message: str, method: str, agent: str | None, cap: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {
        "code": -32603, "message": message,
        "data": {"method": method, "agent": agent, "capability": cap}}}


def no_cap_message(agent: str, cap: str) -> str:
    return (f'acp-bridge: agent "{agent}" does not advertise the systemPrompt capability ({cap}); '
            'a system prompt is configured and system_prompt.on_unsupported is "error"')


def no_override_message(agent: str, cap: str) -> str:
    return (f'acp-bridge: agent "{agent}" does not advertise systemPrompt override mode '
            f'({cap}.mode.override) and system_prompt.strict forbids falling back to append')


# -- helpers ----------------------------------------------------------------------------------


def started(config: SystemPromptConfig, client_init: dict[str, Any],
            agent_init: dict[str, Any] | None) -> Relay:
    relay = Relay([SystemPrompt(config)], strict=True)
    relay.feed(A, line(client_init))
    if agent_init is not None:
        relay.feed(C, line(agent_init))
    return relay


def transcript(relay: Relay, steps: list[tuple[Direction, dict[str, Any]]]) -> list[tuple[Direction, Any]]:
    """Everything that leaves the bridge for these inputs, as (destination, message)."""
    out = []
    for direction, msg in steps:
        for fwd in relay.feed(direction, line(msg)):
            if fwd.data:
                out.append((fwd.direction, orjson.loads(fwd.data)))
    return out


def cfg(**kw: Any) -> SystemPromptConfig:
    return SystemPromptConfig(text=TEXT, **kw)


# -- the table --------------------------------------------------------------------------------

CASES = [
    # spec dialect
    pytest.param(cfg(), V1_INIT, V1_AGENT_OVERRIDE, [(A, V1_NEW)],
                 [(A, v1_new(systemPrompt=SP_APPEND))], id="v1-spec-append"),
    pytest.param(cfg(mode="override"), V1_INIT, V1_AGENT_OVERRIDE, [(A, V1_NEW)],
                 [(A, v1_new(systemPrompt=SP_OVERRIDE))], id="v1-spec-override"),
    pytest.param(cfg(mode="override"), V1_INIT, V1_AGENT_APPEND, [(A, V1_NEW)],
                 [(A, v1_new(systemPrompt=SP_APPEND))], id="v1-spec-override-downgraded"),
    pytest.param(cfg(mode="override", strict=True), V1_INIT, V1_AGENT_APPEND, [(A, V1_NEW)],
                 [(C, refused(1, no_override_message("my-agent", V1_CAP), "session/new", "my-agent", V1_CAP))],
                 id="v1-spec-override-strict-error"),
    pytest.param(cfg(), V2_INIT, V2_AGENT_OVERRIDE, [(A, V2_NEW)],
                 [(A, v2_new(systemPrompt=SP_APPEND))], id="v2-spec-append"),
    pytest.param(cfg(mode="override"), V2_INIT, V2_AGENT_OVERRIDE, [(A, V2_NEW)],
                 [(A, v2_new(systemPrompt=SP_OVERRIDE))], id="v2-spec-override"),
    pytest.param(cfg(mode="override"), V2_INIT, V2_AGENT_APPEND, [(A, V2_NEW)],
                 [(A, v2_new(systemPrompt=SP_APPEND))], id="v2-spec-override-downgraded"),
    pytest.param(cfg(mode="override", strict=True), V2_INIT, V2_AGENT_APPEND, [(A, V2_NEW)],
                 [(C, refused(1, no_override_message("my-agent", V2_CAP), "session/new", "my-agent", V2_CAP))],
                 id="v2-spec-override-strict-error"),
    pytest.param(cfg(), V1_INIT, V1_AGENT_OVERRIDE,
                 [(A, V1_LOAD), (A, V1_RESUME), (A, V1_FORK)],
                 [(A, {**V1_LOAD, "params": {**V1_LOAD["params"], "systemPrompt": SP_APPEND}}),
                  (A, {**V1_RESUME, "params": {**V1_RESUME["params"], "systemPrompt": SP_APPEND}}),
                  (A, {**V1_FORK, "params": {**V1_FORK["params"], "systemPrompt": SP_APPEND}})],
                 id="v1-spec-load-resume-fork"),
    pytest.param(cfg(), V2_INIT, V2_AGENT_OVERRIDE, [(A, V2_RESUME), (A, V2_FORK)],
                 [(A, {"jsonrpc": "2.0", "id": 2, "method": "session/resume", "params": {
                     "sessionId": "sess_abc123", "cwd": CWD, "replayFrom": {"type": "start"},
                     "systemPrompt": SP_APPEND}}),
                  (A, {"jsonrpc": "2.0", "id": 3, "method": "session/fork", "params": {
                      "sessionId": "sess_abc123", "cwd": CWD, "systemPrompt": SP_APPEND}})],
                 id="v2-spec-resume-fork"),
    # a v2 connection has no session/load: left alone
    pytest.param(cfg(), V2_INIT, V2_AGENT_OVERRIDE, [(A, V1_LOAD)], [(A, V1_LOAD)],
                 id="v2-load-not-a-setup-method"),
    # client_prompt policies, spec dialect
    pytest.param(cfg(), V1_INIT, V1_AGENT_OVERRIDE, [(A, V1_NEW_SP_OVERRIDE)],
                 [(A, v1_new(systemPrompt={"mode": "override", "content": [
                     {"type": "text", "text": "You are a code review bot. Only review; never edit files."},
                     {"type": "text", "text": TEXT}]}))], id="v1-merge-keeps-client-mode"),
    pytest.param(cfg(mode="override"), V1_INIT, V1_AGENT_OVERRIDE, [(A, V1_NEW_SP)],
                 [(A, v1_new(systemPrompt={"mode": "append", "content": [
                     {"type": "text", "text": CLIENT_TEXT}, {"type": "text", "text": TEXT}]}))],
                 id="v1-merge-client-append"),
    pytest.param(cfg(client_prompt="keep"), V1_INIT, V1_AGENT_OVERRIDE, [(A, V1_NEW_SP)],
                 [(A, V1_NEW_SP)], id="v1-keep"),
    pytest.param(cfg(client_prompt="replace"), V1_INIT, V1_AGENT_OVERRIDE, [(A, V1_NEW_SP_OVERRIDE)],
                 [(A, v1_new(systemPrompt=SP_APPEND))], id="v1-replace"),
    pytest.param(cfg(), V2_INIT, V2_AGENT_OVERRIDE, [(A, V2_NEW_SP)],
                 [(A, v2_new(mcpServers=[], systemPrompt={"mode": "append", "content": [
                     {"type": "text", "text": CLIENT_TEXT}, {"type": "text", "text": TEXT}]}))],
                 id="v2-merge"),
    pytest.param(cfg(client_prompt="keep"), V2_INIT, V2_AGENT_OVERRIDE, [(A, V2_NEW_SP)],
                 [(A, V2_NEW_SP)], id="v2-keep"),
    pytest.param(cfg(client_prompt="replace", mode="override"), V2_INIT, V2_AGENT_OVERRIDE,
                 [(A, V2_NEW_SP)], [(A, v2_new(mcpServers=[], systemPrompt=SP_OVERRIDE))],
                 id="v2-replace"),
    pytest.param(cfg(), V1_INIT, V1_AGENT_OVERRIDE,
                 [(A, v1_new(systemPrompt=None))], [(A, v1_new(systemPrompt=SP_APPEND))],
                 id="v1-client-null-is-absent"),
    # meta dialect (claude-agent-acp's _meta.systemPrompt)
    pytest.param(cfg(on_unsupported="meta"), V1_INIT, V1_AGENT_NONE, [(A, V1_NEW)],
                 [(A, v1_new(_meta={"systemPrompt": {"append": TEXT}}))], id="v1-meta-append"),
    pytest.param(cfg(on_unsupported="meta", mode="override"), V1_INIT, V1_AGENT_NONE, [(A, V1_NEW)],
                 [(A, v1_new(_meta={"systemPrompt": TEXT}))], id="v1-meta-override"),
    pytest.param(cfg(on_unsupported="meta"), V1_INIT, V1_AGENT_NONE,
                 [(A, v1_new(_meta={"traceparent": "00-ab-cd-01", "systemPrompt": None}))],
                 [(A, v1_new(_meta={"traceparent": "00-ab-cd-01", "systemPrompt": {"append": TEXT}}))],
                 id="v1-meta-keeps-other-keys"),
    pytest.param(cfg(on_unsupported="meta"), V1_INIT, V1_AGENT_NONE, [(A, V1_NEW_META)],
                 [(A, v1_new(_meta={"systemPrompt": {"append": CLIENT_TEXT + "\n\n" + TEXT}}))],
                 id="v1-meta-merge"),
    pytest.param(cfg(on_unsupported="meta"), V1_INIT, V1_AGENT_NONE,
                 [(A, v1_new(_meta={"systemPrompt": "Be terse."}))],
                 [(A, v1_new(_meta={"systemPrompt": "Be terse.\n\n" + TEXT}))],
                 id="v1-meta-merge-client-string"),
    pytest.param(cfg(on_unsupported="meta", client_prompt="keep"), V1_INIT, V1_AGENT_NONE,
                 [(A, V1_NEW_META)], [(A, V1_NEW_META)], id="v1-meta-keep"),
    pytest.param(cfg(on_unsupported="meta", client_prompt="replace", mode="override"), V1_INIT,
                 V1_AGENT_NONE, [(A, V1_NEW_META)], [(A, v1_new(_meta={"systemPrompt": TEXT}))],
                 id="v1-meta-replace"),
    pytest.param(cfg(on_unsupported="meta"), V1_INIT, V1_AGENT_NONE, [(A, V1_NEW_SP)],
                 [(A, v1_new(systemPrompt=V1_NEW_SP["params"]["systemPrompt"],
                             _meta={"systemPrompt": {"append": TEXT}}))],
                 id="v1-meta-leaves-client-spec-field"),
    pytest.param(cfg(on_unsupported="meta"), V1_INIT, V1_AGENT_NONE, [(A, V1_RESUME), (A, V1_FORK)],
                 [(A, {**V1_RESUME, "params": {**V1_RESUME["params"], "_meta": {"systemPrompt": {"append": TEXT}}}}),
                  (A, {**V1_FORK, "params": {**V1_FORK["params"], "_meta": {"systemPrompt": {"append": TEXT}}}})],
                 id="v1-meta-resume-fork"),
    pytest.param(cfg(on_unsupported="meta"), V2_INIT, V2_AGENT_NONE, [(A, V2_NEW)],
                 [(A, v2_new(_meta={"systemPrompt": {"append": TEXT}}))], id="v2-meta-append"),
    pytest.param(cfg(on_unsupported="meta", mode="override"), V2_INIT, V2_AGENT_NONE, [(A, V2_NEW)],
                 [(A, v2_new(_meta={"systemPrompt": TEXT}))], id="v2-meta-override"),
    # first-prompt dialect
    pytest.param(cfg(on_unsupported="first-prompt"), V1_INIT, V1_AGENT_NONE,
                 [(A, V1_NEW), (C, V1_NEW_RESP), (A, V1_PROMPT), (C, V1_PROMPT_RESP), (A, V1_PROMPT_2)],
                 [(A, V1_NEW), (C, V1_NEW_RESP),
                  (A, {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {
                      "sessionId": "sess_abc123",
                      "prompt": [{"type": "text", "text": TEXT},
                                 {"type": "text", "text": "Fix the failing test in parser.py"}]}}),
                  (C, V1_PROMPT_RESP), (A, V1_PROMPT_2)],
                 id="v1-first-prompt-once"),
    pytest.param(cfg(on_unsupported="first-prompt"), V1_INIT, V1_AGENT_NONE,
                 [(A, V1_FORK), (C, V1_FORK_RESP), (A, V1_PROMPT_FORK), (A, V1_PROMPT)],
                 [(A, V1_FORK), (C, V1_FORK_RESP),
                  (A, {"jsonrpc": "2.0", "id": 8, "method": "session/prompt", "params": {
                      "sessionId": "sess_fork456",
                      "prompt": [{"type": "text", "text": TEXT}, {"type": "text", "text": "Go"}]}}),
                  (A, V1_PROMPT)],
                 id="v1-first-prompt-forked-session"),
    pytest.param(cfg(on_unsupported="first-prompt"), V1_INIT, V1_AGENT_NONE,
                 [(A, V1_LOAD), (C, V1_LOAD_RESP), (A, V1_PROMPT)],
                 [(A, V1_LOAD), (C, V1_LOAD_RESP), (A, V1_PROMPT)],
                 id="v1-first-prompt-not-on-load"),
    pytest.param(cfg(on_unsupported="first-prompt"), V1_INIT, V1_AGENT_NONE,
                 [(A, V1_NEW), (C, V1_NEW_REJECTED), (A, V1_PROMPT)],
                 [(A, V1_NEW), (C, V1_NEW_REJECTED), (A, V1_PROMPT)],
                 id="v1-first-prompt-not-after-failed-new"),
    pytest.param(cfg(on_unsupported="first-prompt"), V1_INIT, V1_AGENT_NONE,
                 [(A, V1_NEW), (C, V1_NEW_RESP), (A, V1_PROMPT_2),
                  (C, {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "busy"}}),
                  (A, V1_PROMPT_2)],
                 [(A, V1_NEW), (C, V1_NEW_RESP),
                  (A, {**V1_PROMPT_2, "params": {"sessionId": "sess_abc123", "prompt": [
                      {"type": "text", "text": TEXT}, {"type": "text", "text": "Again"}]}}),
                  (C, {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "busy"}}),
                  (A, {**V1_PROMPT_2, "params": {"sessionId": "sess_abc123", "prompt": [
                      {"type": "text", "text": TEXT}, {"type": "text", "text": "Again"}]}})],
                 id="v1-first-prompt-refused-prompt-retried"),
    pytest.param(cfg(on_unsupported="first-prompt"), V2_INIT, V2_AGENT_NONE,
                 [(A, V2_NEW), (C, V2_NEW_RESP), (A, V2_PROMPT), (C, V2_PROMPT_RESP), (A, V2_PROMPT)],
                 [(A, V2_NEW), (C, V2_NEW_RESP),
                  (A, {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {
                      "sessionId": "sess_abc123",
                      "prompt": [{"type": "text", "text": TEXT},
                                 {"type": "text", "text": "Fix the failing test in parser.py"}]}}),
                  (C, V2_PROMPT_RESP), (A, V2_PROMPT)],
                 id="v2-first-prompt-once"),
    pytest.param(cfg(on_unsupported="first-prompt"), V2_INIT, V2_AGENT_NONE,
                 [(A, V2_FORK), (C, V2_FORK_RESP), (A, {**V1_PROMPT_FORK, "id": 9})],
                 [(A, V2_FORK), (C, V2_FORK_RESP),
                  (A, {"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": {
                      "sessionId": "sess_fork456",
                      "prompt": [{"type": "text", "text": TEXT}, {"type": "text", "text": "Go"}]}})],
                 id="v2-first-prompt-forked-session"),
    pytest.param(cfg(on_unsupported="first-prompt"), V2_INIT, V2_AGENT_NONE,
                 [(A, V2_RESUME), (C, {"jsonrpc": "2.0", "id": 2, "result": {}}), (A, V2_PROMPT)],
                 [(A, V2_RESUME), (C, {"jsonrpc": "2.0", "id": 2, "result": {}}), (A, V2_PROMPT)],
                 id="v2-first-prompt-not-on-resume"),
    # error dialect
    pytest.param(cfg(on_unsupported="error"), V1_INIT, V1_AGENT_NONE, [(A, V1_NEW), (A, V1_LOAD)],
                 [(C, refused(1, no_cap_message("old-agent", V1_CAP), "session/new", "old-agent", V1_CAP)),
                  (C, refused(2, no_cap_message("old-agent", V1_CAP), "session/load", "old-agent", V1_CAP))],
                 id="v1-error"),
    pytest.param(cfg(on_unsupported="error"), V2_INIT, V2_AGENT_NONE, [(A, V2_NEW)],
                 [(C, refused(1, no_cap_message("old-agent", V2_CAP), "session/new", "old-agent", V2_CAP))],
                 id="v2-error"),
    # skip dialect
    pytest.param(cfg(on_unsupported="skip"), V1_INIT, V1_AGENT_NONE,
                 [(A, V1_NEW), (C, V1_NEW_RESP), (A, V1_PROMPT)],
                 [(A, V1_NEW), (C, V1_NEW_RESP), (A, V1_PROMPT)], id="v1-skip"),
    pytest.param(cfg(on_unsupported="skip"), V2_INIT, V2_AGENT_NONE, [(A, V2_NEW)], [(A, V2_NEW)],
                 id="v2-skip"),
    # auto: keyed on the agent's name; the spec capability always wins
    pytest.param(cfg(), V1_INIT, renamed(V1_AGENT_NONE, ZED), [(A, V1_NEW)],
                 [(A, v1_new(_meta={"systemPrompt": {"append": TEXT}}))], id="v1-auto-zed-meta"),
    pytest.param(cfg(), V1_INIT, renamed(V1_AGENT_NONE, ACP), [(A, V1_NEW)],
                 [(A, v1_new(_meta={"systemPrompt": {"append": TEXT}}))], id="v1-auto-acp-without-cap-meta"),
    pytest.param(cfg(), V1_INIT, renamed(V1_AGENT_OVERRIDE, ACP), [(A, V1_NEW)],
                 [(A, v1_new(systemPrompt=SP_APPEND))], id="v1-auto-acp-with-cap-spec"),
    pytest.param(cfg(), V1_INIT, renamed(V1_AGENT_OVERRIDE, ZED), [(A, V1_NEW)],
                 [(A, v1_new(systemPrompt=SP_APPEND))], id="v1-auto-zed-with-cap-spec"),
    pytest.param(cfg(), V1_INIT, V1_AGENT_NONE,
                 [(A, V1_NEW), (C, V1_NEW_RESP), (A, V1_PROMPT_2)],
                 [(A, V1_NEW), (C, V1_NEW_RESP),
                  (A, {**V1_PROMPT_2, "params": {"sessionId": "sess_abc123", "prompt": [
                      {"type": "text", "text": TEXT}, {"type": "text", "text": "Again"}]}})],
                 id="v1-auto-unknown-first-prompt"),
    pytest.param(cfg(mode="override"), V2_INIT, renamed(V2_AGENT_NONE, ZED), [(A, V2_NEW)],
                 [(A, v2_new(_meta={"systemPrompt": TEXT}))], id="v2-auto-zed-meta"),
    pytest.param(cfg(), V2_INIT, renamed(V2_AGENT_NONE, ACP), [(A, V2_NEW)],
                 [(A, v2_new(_meta={"systemPrompt": {"append": TEXT}}))], id="v2-auto-acp-without-cap-meta"),
    pytest.param(cfg(), V2_INIT, renamed(V2_AGENT_OVERRIDE, ACP), [(A, V2_NEW)],
                 [(A, v2_new(systemPrompt=SP_APPEND))], id="v2-auto-acp-with-cap-spec"),
    pytest.param(cfg(), V2_INIT, V2_AGENT_NONE,
                 [(A, V2_NEW), (C, V2_NEW_RESP), (A, V2_PROMPT)],
                 [(A, V2_NEW), (C, V2_NEW_RESP),
                  (A, {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {
                      "sessionId": "sess_abc123",
                      "prompt": [{"type": "text", "text": TEXT},
                                 {"type": "text", "text": "Fix the failing test in parser.py"}]}})],
                 id="v2-auto-unknown-first-prompt"),
    # the agent's initialize response not seen yet: its capabilities count as absent
    pytest.param(cfg(), V1_INIT, None, [(A, V1_NEW), (C, V1_NEW_RESP), (A, V1_PROMPT_2)],
                 [(A, V1_NEW), (C, V1_NEW_RESP),
                  (A, {**V1_PROMPT_2, "params": {"sessionId": "sess_abc123", "prompt": [
                      {"type": "text", "text": TEXT}, {"type": "text", "text": "Again"}]}})],
                 id="v1-no-agent-init-auto-first-prompt"),
    pytest.param(cfg(on_unsupported="error"), V1_INIT, None, [(A, V1_NEW)],
                 [(C, {"jsonrpc": "2.0", "id": 1, "error": {
                     "code": -32603,
                     "message": "acp-bridge: the agent (no agentInfo name seen) does not advertise the "
                                f'systemPrompt capability ({V1_CAP}); a system prompt is configured and '
                                'system_prompt.on_unsupported is "error"',
                     "data": {"method": "session/new", "agent": None, "capability": V1_CAP}}})],
                 id="v1-no-agent-init-error"),
    # an agent's error on a request that carried the prompt reaches the client unchanged
    pytest.param(cfg(), V1_INIT, V1_AGENT_OVERRIDE, [(A, V1_NEW), (C, V1_NEW_REJECTED)],
                 [(A, v1_new(systemPrompt=SP_APPEND)), (C, V1_NEW_REJECTED)],
                 id="v1-agent-error-passes"),
]


@pytest.mark.parametrize(("config", "client_init", "agent_init", "steps", "expected"), CASES)
def test_system_prompt_transcript(config: SystemPromptConfig, client_init: dict[str, Any],
                                  agent_init: dict[str, Any] | None,
                                  steps: list[tuple[Direction, dict[str, Any]]],
                                  expected: list[tuple[Direction, Any]]) -> None:
    """What leaves the bridge, for each dialect, policy and protocol version."""
    relay = started(config, client_init, agent_init)
    before = copy.deepcopy(steps)
    assert transcript(relay, steps) == expected
    assert steps == before


def test_nothing_is_rewritten_before_the_client_initialize() -> None:
    """bridge-rules.md 1: lines pass through unchanged until the client's initialize."""
    relay = Relay([SystemPrompt(cfg(on_unsupported="error"))], strict=True)
    raw = line(V1_NEW)
    [fwd] = relay.feed(A, raw)
    assert fwd.data == raw and fwd.data is fwd.raw and fwd.verdict is Verdict.PASS


@pytest.mark.parametrize("msg", [
    pytest.param(V1_NEW_RESP, id="response"),
    pytest.param(V1_NEW_REJECTED, id="error-response"),
    pytest.param(example("v1-session-update-agent-message-chunk"), id="notification"),
])
def test_messages_toward_the_client_pass_byte_exact(msg: dict[str, Any]) -> None:
    relay = started(cfg(on_unsupported="first-prompt"), V1_INIT, V1_AGENT_NONE)
    relay.feed(A, line(V1_NEW))
    raw = b'{"jsonrpc": "2.0",  ' + line(msg)[1:]  # odd spacing: a re-encode would show
    [fwd] = relay.feed(C, raw)
    assert fwd.data == raw and fwd.data is fwd.raw and fwd.verdict is Verdict.PASS


def test_untouched_setup_request_is_the_same_bytes() -> None:
    relay = started(cfg(client_prompt="keep"), V1_INIT, V1_AGENT_OVERRIDE)
    raw = (b'{ "jsonrpc":"2.0", "id":1, "method":"session/new", "params":{"cwd":"/w",'
           b'"mcpServers":[], "systemPrompt":{"mode":"append","content":[]}} }\r\n')
    [fwd] = relay.feed(A, raw)
    assert fwd.data == raw and fwd.data is fwd.raw and fwd.verdict is Verdict.PASS


def test_rewritten_line_keeps_its_terminator() -> None:
    relay = started(cfg(), V1_INIT, V1_AGENT_OVERRIDE)
    [fwd] = relay.feed(A, orjson.dumps(V1_NEW) + b"\r\n")
    assert fwd.data.endswith(b"}\r\n") and fwd.verdict is Verdict.REWRITE
    assert fwd.rules == ("system-prompt",)


def test_refused_request_is_forgotten_and_answered_once() -> None:
    """The bridge answered it: no response is expected from the agent any more."""
    relay = started(cfg(on_unsupported="error"), V1_INIT, V1_AGENT_NONE)
    out = relay.feed(A, line(V1_NEW))
    assert [(f.direction, f.verdict) for f in out] == [(A, Verdict.DROP), (C, Verdict.EMIT)]
    assert relay.statistics().pending_to_agent == 0


# -- logging ----------------------------------------------------------------------------------


def messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "acp_bridge.system_prompt"]


def test_override_downgrade_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "acp_bridge.system_prompt")
    relay = started(cfg(mode="override"), V1_INIT, V1_AGENT_APPEND)
    transcript(relay, [(A, V1_NEW), (A, {**V1_NEW, "id": 11})])
    assert messages(caplog) == [(logging.WARNING,
        'agent "my-agent" does not advertise systemPrompt override mode; the system prompt is sent '
        "in append mode (system_prompt.strict = true refuses instead)")]


@pytest.mark.parametrize(("config", "agent_init", "expected"), [
    pytest.param(cfg(), V1_AGENT_OVERRIDE, (logging.INFO,
        "session sess_abc123: system prompt sent in the systemPrompt field (mode append, client_prompt merge)"),
        id="spec"),
    pytest.param(cfg(on_unsupported="meta"), V1_AGENT_NONE, (logging.WARNING,
        'session sess_abc123: agent "old-agent" does not advertise the systemPrompt capability; '
        "system prompt sent as _meta.systemPrompt (claude-agent-acp dialect, mode append)"), id="meta"),
    pytest.param(cfg(), V1_AGENT_NONE, (logging.WARNING,
        'session sess_abc123: agent "old-agent" does not advertise the systemPrompt capability; '
        "system prompt will be put in front of the first session/prompt"), id="first-prompt"),
    pytest.param(cfg(on_unsupported="skip"), V1_AGENT_NONE, (logging.WARNING,
        'session sess_abc123: agent "old-agent" does not advertise the systemPrompt capability; '
        "system prompt NOT sent (on_unsupported = skip)"), id="skip"),
])
def test_dialect_logged_once_per_session(caplog: pytest.LogCaptureFixture, config: SystemPromptConfig,
                                         agent_init: dict[str, Any], expected: tuple[int, str]) -> None:
    """A user can tell from the log how the prompt reached each session, once per session."""
    caplog.set_level(logging.INFO, "acp_bridge.system_prompt")
    relay = started(config, V1_INIT, agent_init)
    transcript(relay, [(A, V1_NEW), (C, V1_NEW_RESP), (A, V1_RESUME), (C, V1_RESUME_RESP)])
    assert messages(caplog) == [expected]


def test_agent_error_on_injected_request_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "acp_bridge.system_prompt")
    relay = started(cfg(), V1_INIT, V1_AGENT_OVERRIDE)
    transcript(relay, [(A, V1_NEW), (C, V1_NEW_REJECTED)])
    [(level, text)] = messages(caplog)
    assert level == logging.WARNING
    assert "session/new carrying the system prompt (spec dialect)" in text
    assert "Unsupported systemPrompt mode: override" in text


# -- pure functions ---------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "capability", "name", "dialect", "mode"), [
    pytest.param(cfg(), {}, None, Dialect.SPEC, "append", id="spec"),
    pytest.param(cfg(mode="override"), {"mode": {"override": {}}}, None, Dialect.SPEC, "override", id="override"),
    pytest.param(cfg(mode="override"), {"mode": {"override": None}}, None, Dialect.SPEC, "append", id="override-null"),
    pytest.param(cfg(mode="override"), {"mode": {}}, None, Dialect.SPEC, "append", id="override-absent"),
    pytest.param(cfg(), None, ZED, Dialect.META, "append", id="auto-zed"),
    pytest.param(cfg(), None, "@zed-industries/claude-code-acp", Dialect.META, "append", id="auto-old-name"),
    pytest.param(cfg(), None, "claude-agent-acp", Dialect.FIRST_PROMPT, "append", id="auto-unscoped-name"),
    pytest.param(cfg(), None, None, Dialect.FIRST_PROMPT, "append", id="auto-no-name"),
    pytest.param(cfg(on_unsupported="skip"), None, ZED, Dialect.SKIP, "append", id="skip-beats-name"),
])
def test_choose_plan(config: SystemPromptConfig, capability: dict[str, Any] | None, name: str | None,
                     dialect: Dialect, mode: str) -> None:
    plan = choose_plan(config, capability, name)
    assert (plan.dialect, plan.mode, plan.error) == (dialect, mode, None)


def test_known_meta_readers() -> None:
    assert {ZED, ACP, "@zed-industries/claude-code-acp"} == META_READERS


@pytest.mark.parametrize(("client", "policy", "expected"), [
    pytest.param(None, "keep", SP_APPEND, id="absent-keep"),
    pytest.param({"mode": "append", "content": "x"}, "merge",
                 {"mode": "append", "content": [{"type": "text", "text": "x"}, *SP_APPEND["content"]]},
                 id="merge-string-content"),
    pytest.param("text", "merge", {"mode": "append", "content": [{"type": "text", "text": "text"},
                                                                 *SP_APPEND["content"]]},
                 id="merge-string"),
    pytest.param({"mode": "_custom", "content": [], "_meta": {"k": 1}}, "merge",
                 {"mode": "_custom", "content": [{"type": "text", "text": TEXT}], "_meta": {"k": 1}},
                 id="merge-keeps-unknown-mode-and-meta"),
    pytest.param({"mode": "append", "content": {"type": "text"}}, "merge", UNCHANGED, id="merge-object-content"),
    pytest.param({"mode": ["append"], "content": []}, "merge", UNCHANGED, id="merge-list-mode"),
    pytest.param(3, "merge", UNCHANGED, id="merge-number"),
])
def test_combine_spec(client: Any, policy: str, expected: Any) -> None:
    assert combine_spec(client, SP_APPEND, policy) == expected


# -- a client systemPrompt of another shape (issue 12) ----------------------------------------
# The spec's value is an object {"mode", "content": [blocks]} (acp-notes.md 7.1); clients
# built on earlier drafts of the RFD send a string or a bare list (7.2), and a client may send
# anything. Each shape, under each policy: what the agent receives, and what is logged.

CLIENT_BLOCK = {"type": "text", "text": "Be terse."}
OURS = {"type": "text", "text": TEXT}


def sp(mode: Any, *content: Any, **extra: Any) -> dict[str, Any]:
    return {"mode": mode, "content": list(content), **extra}


INFO, WARNING = logging.INFO, logging.WARNING

SHAPES = [
    # (client systemPrompt, extra params, merged value or None for "left as the client sent it", log)
    pytest.param("Be terse.", {}, sp("append", CLIENT_BLOCK, OURS),
                 (INFO, "a string (the RFD's first draft), not an object; sent the ACP object instead: "
                        "mode append, 2 content blocks"), id="string"),
    pytest.param("", {}, sp("append", {"type": "text", "text": ""}, OURS),
                 (INFO, "a string (the RFD's first draft)"), id="empty-string"),
    pytest.param([CLIENT_BLOCK], {}, sp("append", CLIENT_BLOCK, OURS),
                 (INFO, "a list of blocks (the RFD's July draft), not an object; sent the ACP object instead"),
                 id="list"),
    pytest.param([CLIENT_BLOCK], {"systemPromptMode": "override"}, sp("override", CLIENT_BLOCK, OURS),
                 (INFO, "a list of blocks"), id="list-with-july-mode"),
    pytest.param([CLIENT_BLOCK], {"systemPromptMode": 7}, sp("append", CLIENT_BLOCK, OURS),
                 (INFO, "a list of blocks"), id="list-with-odd-july-mode"),
    pytest.param(["Be terse.", 3], {}, sp("append", "Be terse.", 3, OURS),
                 (INFO, "a list of blocks"), id="list-of-non-objects"),
    pytest.param(sp("append", "Be terse.", None), {}, sp("append", "Be terse.", None, OURS),
                 None, id="blocks-that-are-not-objects-kept"),
    pytest.param({"content": [CLIENT_BLOCK]}, {}, sp("append", CLIENT_BLOCK, OURS),
                 (INFO, "an object without a mode; sent the ACP object instead: mode append"), id="no-mode"),
    pytest.param({"mode": None, "content": [CLIENT_BLOCK]}, {}, sp("append", CLIENT_BLOCK, OURS),
                 (INFO, "an object without a mode"), id="null-mode"),
    pytest.param({"mode": "override"}, {}, sp("override", OURS),
                 (INFO, "an object without content"), id="no-content"),
    pytest.param({"mode": "append", "content": None, "_meta": {"k": 1}}, {}, sp("append", OURS, _meta={"k": 1}),
                 (INFO, "an object without content"), id="null-content"),
    pytest.param({"mode": "append", "content": "Be terse."}, {}, sp("append", CLIENT_BLOCK, OURS),
                 (INFO, "an object whose content is a string"), id="string-content"),
    pytest.param({}, {}, sp("append", OURS), (INFO, "an object without a mode"), id="empty-object"),
    # no sensible reading: left for the agent to judge, and said
    pytest.param({"mode": "append", "content": CLIENT_BLOCK}, {}, None,
                 (WARNING, "an object whose content is an object, which cannot be merged with the configured "
                           "one; forwarded as the client sent it, WITHOUT the configured prompt"),
                 id="object-content"),
    pytest.param({"mode": "append", "content": 5}, {}, None,
                 (WARNING, "an object whose content is a number"), id="number-content"),
    pytest.param({"mode": 1, "content": [CLIENT_BLOCK]}, {}, None,
                 (WARNING, "an object whose mode is a number"), id="number-mode"),
    pytest.param({"mode": {"append": {}}, "content": [CLIENT_BLOCK]}, {}, None,
                 (WARNING, "an object whose mode is an object"), id="object-mode"),
    pytest.param(42, {}, None, (WARNING, "systemPrompt is a number, which cannot be merged"), id="number"),
    pytest.param(True, {}, None, (WARNING, "systemPrompt is a boolean"), id="boolean"),
    # null is no value (acp-notes.md 7.1: omitted = null)
    pytest.param(None, {}, sp("append", OURS), None, id="null"),
]


@pytest.mark.parametrize(("client", "extra", "merged", "logged"), SHAPES)
@pytest.mark.parametrize("policy", ["merge", "keep", "replace"])
@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_client_system_prompt_shapes(caplog: pytest.LogCaptureFixture, policy: str, v2: bool, client: Any,
                                     extra: dict[str, Any], merged: Any, logged: tuple[int, str] | None) -> None:
    """merge never loses the configured prompt without saying so, keep leaves the client's
    value, replace sends only the configured one; and no shape makes the rule raise."""
    caplog.set_level(logging.INFO, "acp_bridge.system_prompt")
    relay = started(cfg(client_prompt=policy), V2_INIT if v2 else V1_INIT,
                    V2_AGENT_OVERRIDE if v2 else V1_AGENT_OVERRIDE)
    new = v2_new if v2 else v1_new
    sent = new(systemPrompt=client, **extra)
    [(direction, got)] = transcript(relay, [(A, sent)])
    assert direction is A
    if policy == "replace" or client is None:
        expected = new(systemPrompt=SP_APPEND, **extra)
    elif policy == "keep" or merged is None:
        expected = sent
    else:
        expected = new(systemPrompt=merged, **extra)
    assert got == expected
    setup_logs = [(level, text) for level, text in messages(caplog) if text.startswith("session/new 1: ")]
    if policy == "merge" and logged is not None:
        [(level, text)] = setup_logs
        assert level == logged[0] and logged[1] in text, text
        assert TEXT not in text and "Be terse" not in text  # what was sent, never the text
    else:
        assert setup_logs == []


@pytest.mark.parametrize(("meta", "expected", "logged"), [
    pytest.param({"systemPrompt": ["Be terse."]}, None, "_meta.systemPrompt is a list, which cannot be merged",
                 id="list"),
    pytest.param({"systemPrompt": 3}, None, "_meta.systemPrompt is a number", id="number"),
    pytest.param({"systemPrompt": {"append": 3}}, None, "_meta.systemPrompt is an object whose append is not a string",
                 id="odd-append"),
    pytest.param("x", None, "_meta is a string", id="meta-not-object"),
    pytest.param({"systemPrompt": "Be terse."}, {"systemPrompt": "Be terse.\n\n" + TEXT}, None, id="string"),
    pytest.param({"systemPrompt": None}, {"systemPrompt": {"append": TEXT}}, None, id="null"),
])
def test_meta_dialect_client_shapes(caplog: pytest.LogCaptureFixture, meta: Any, expected: Any,
                                    logged: str | None) -> None:
    caplog.set_level(logging.INFO, "acp_bridge.system_prompt")
    relay = started(cfg(on_unsupported="meta"), V1_INIT, V1_AGENT_NONE)
    sent = v1_new(_meta=meta)
    [(_, got)] = transcript(relay, [(A, sent)])
    assert got == (sent if expected is None else v1_new(_meta=expected))
    warnings = [text for level, text in messages(caplog) if level == WARNING and text.startswith("session/new 1: ")]
    if logged is None:
        assert warnings == []
    else:
        [text] = warnings
        assert logged in text and "WITHOUT the configured prompt" in text


def test_unmergeable_client_prompt_is_not_reported_as_kept(caplog: pytest.LogCaptureFixture) -> None:
    """The once-per-session line must not say `client_prompt = keep` when merge was asked."""
    caplog.set_level(logging.INFO, "acp_bridge.system_prompt")
    relay = started(cfg(), V1_INIT, V1_AGENT_OVERRIDE)
    transcript(relay, [(A, v1_new(systemPrompt=42)), (C, V1_NEW_RESP)])
    assert (WARNING, "session sess_abc123: the client's own systemPrompt could not be merged; the configured "
                     "prompt was not added") in messages(caplog)
    assert not any("client_prompt = keep" in text for _, text in messages(caplog))


@pytest.mark.parametrize(("client", "mode", "expected"), [
    pytest.param({"preset": "claude_code"}, "append", {"preset": "claude_code", "append": TEXT}, id="object-without-append"),
    pytest.param({"append": 3}, "append", UNCHANGED, id="object-odd-append"),
    pytest.param(7, "override", UNCHANGED, id="number"),
])
def test_combine_meta(client: Any, mode: str, expected: Any) -> None:
    assert combine_meta(client, TEXT, mode, "merge") == expected


def test_meta_not_an_object_is_left_alone() -> None:
    relay = started(cfg(on_unsupported="meta"), V1_INIT, V1_AGENT_NONE)
    assert transcript(relay, [(A, v1_new(_meta="x"))]) == [(A, v1_new(_meta="x"))]


# -- properties -------------------------------------------------------------------------------

json_leaf = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


@given(
    text=st.text(min_size=1, max_size=40).filter(str.strip),
    mode=st.sampled_from(["append", "override"]),
    v2=st.booleans(),
    methods=st.lists(st.sampled_from(["session/new", "session/load", "session/resume", "session/fork"]),
                     min_size=1, max_size=6),
)
def test_same_system_prompt_on_every_setup_request(text: str, mode: str, v2: bool, methods: list[str]) -> None:
    """acp-notes 7.1: clients re-send the same value on load/resume/fork as at creation."""
    config = SystemPromptConfig(text=text, mode=mode)
    relay = started(config, V2_INIT if v2 else V1_INIT, V2_AGENT_OVERRIDE if v2 else V1_AGENT_OVERRIDE)
    sent = []
    for n, method in enumerate(methods, start=1):
        params: dict[str, Any] = {"cwd": CWD}
        if method != "session/new":
            params["sessionId"] = "sess_abc123"
        [fwd] = relay.feed(A, line({"jsonrpc": "2.0", "id": n, "method": method, "params": params}))
        sent.append(orjson.loads(fwd.data)["params"].get("systemPrompt"))
    expected = {"mode": mode, "content": [{"type": "text", "text": text}]}
    setup = [m for m in methods if not (v2 and m == "session/load")]
    assert [s for s in sent if s is not None] == [expected] * len(setup)


@given(
    method=st.text(min_size=1, max_size=20).filter(
        lambda m: m not in {"session/new", "session/load", "session/resume", "session/fork",
                            "session/prompt", "initialize"}),
    params=json_value,
    id_=st.integers(0, 10**9) | st.text(max_size=6),
    on_unsupported=st.sampled_from(["auto", "meta", "first-prompt", "error", "skip"]),
    agent=st.sampled_from([V1_AGENT_OVERRIDE, V1_AGENT_NONE, renamed(V1_AGENT_NONE, ZED)]),
)
def test_other_requests_pass_byte_exact(method: str, params: Any, id_: Any, on_unsupported: str,
                                        agent: dict[str, Any]) -> None:
    relay = started(cfg(on_unsupported=on_unsupported), V1_INIT, agent)
    raw = line({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
    [fwd] = relay.feed(A, raw)
    assert fwd.data == raw and fwd.data is fwd.raw and fwd.verdict is Verdict.PASS


@given(
    params=st.dictionaries(st.sampled_from(["cwd", "systemPrompt", "_meta", "sessionId", "x"]),
                           json_value, max_size=5),
    dialect=st.sampled_from([Dialect.SPEC, Dialect.META]),
    policy=st.sampled_from(["merge", "keep", "replace"]),
    mode=st.sampled_from(["append", "override"]),
)
def test_inject_never_mutates_and_changes_only_its_key(params: dict[str, Any], dialect: Dialect,
                                                       policy: str, mode: str) -> None:
    """Copy on write: the original survives, and every other key is the same object."""
    msg = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": params}
    before = copy.deepcopy(msg)
    out = inject_setup(msg, Plan(dialect, mode), cfg(client_prompt=policy))
    assert msg == before
    if out is not None:
        owned = "systemPrompt" if dialect is Dialect.SPEC else "_meta"
        assert {k: v for k, v in out["params"].items() if k != owned} == \
            {k: v for k, v in params.items() if k != owned}
        assert all(out["params"][k] is params[k] for k in params if k != owned)


@pytest.mark.parametrize("agent_init", [V1_AGENT_OVERRIDE, V1_AGENT_NONE], ids=["spec", "first-prompt"])
def test_the_sessions_remembered_are_bounded(agent_init: dict[str, Any]) -> None:
    """A bridge that sees a million sessions set up must not remember each (it did: about
    440 bytes a session, for ever). Past MAX_SESSIONS the session used longest ago is let go:
    the newest still gets the prompt in front of its first prompt."""
    from acp_bridge.core.rewrites.system_prompt import MAX_SESSIONS, SystemPromptState

    relay = started(cfg(on_unsupported="first-prompt"), V1_INIT, agent_init)
    count = MAX_SESSIONS + 10
    relay.feed(A, b"".join(line({"jsonrpc": "2.0", "id": i, "method": "session/new",
                                 "params": {"cwd": CWD, "mcpServers": []}}) for i in range(1, count + 1)))
    relay.feed(C, b"".join(line({"jsonrpc": "2.0", "id": i, "result": {"sessionId": f"s{i}"}})
                           for i in range(1, count + 1)))
    held = [i for i in range(1, count + 1) if relay.session.existing_state(SystemPromptState, f"s{i}")]
    assert held == list(range(11, count + 1))
    assert relay.session.session_count == MAX_SESSIONS
    prompt = {"jsonrpc": "2.0", "id": 0, "method": "session/prompt",
              "params": {"sessionId": f"s{count}", "prompt": [{"type": "text", "text": "hi"}]}}
    (out,) = transcript(relay, [(A, prompt)])
    first_block = out[1]["params"]["prompt"][0]
    assert first_block == ({"type": "text", "text": TEXT} if agent_init is V1_AGENT_NONE else {"type": "text", "text": "hi"})
