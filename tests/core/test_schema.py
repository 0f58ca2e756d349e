"""What the bridge writes validates against the official ACP JSON schemas.

The schemas ship in the npm package `@agentclientprotocol/sdk`; `.ci/run` unpacks it into
`.schemas/` (not committed). Set ACP_SCHEMA_DIR to use another copy. The SDK 2.4.0 schemas
predate `prompt_suggestions_update`, so the new form is checked by the rule's own tests, and
the forms the schemas do know (the legacy update, injected system prompts, prompts, errors,
initialize edits) are checked here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_bridge.config import SuggestionsConfig, SystemPromptConfig
from acp_bridge.core import Direction, Relay
from acp_bridge.core.rewrites.suggestions import PromptSuggestions
from acp_bridge.core.rewrites.system_prompt import SystemPrompt
from tests.conftest import ROOT, example, line

jsonschema = pytest.importorskip("jsonschema")

SCHEMA_DIR = Path(os.environ.get("ACP_SCHEMA_DIR", ROOT / ".schemas" / "package" / "schema"))
if not (SCHEMA_DIR / "v1" / "schema.json").is_file():
    pytest.skip(f"ACP schemas not found in {SCHEMA_DIR} (.ci/run fetches them with npm pack)",
                allow_module_level=True)

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
TEXT = "Follow the team style guide."


def schema(version: int, unstable: bool = True) -> dict[str, Any]:
    name = "schema.unstable.json" if unstable else "schema.json"
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / f"v{version}" / name).read_text())
    return loaded


def validate(msg: Any, version: int, definition: str | None = None, *, unstable: bool = True) -> None:
    full = schema(version, unstable)
    target = full if definition is None else {"$ref": f"#/$defs/{definition}", "$defs": full["$defs"]}
    jsonschema.Draft202012Validator(target).validate(msg)


def relay_after_init(rewrites: list[Any], client_init: str, agent_init: str) -> Relay:
    relay = Relay(rewrites, strict=True)
    relay.feed(A, line(example(client_init)))
    relay.feed(C, line(example(agent_init)))
    return relay


def sent(relay: Relay, direction: Direction, msg: dict[str, Any]) -> list[tuple[Direction, Any]]:
    return [(f.direction, orjson.loads(f.data)) for f in relay.feed(direction, line(msg)) if f.data]


@pytest.mark.parametrize("version", [1, 2])
def test_injected_system_prompt_on_session_new(version: int) -> None:
    relay = relay_after_init([SystemPrompt(SystemPromptConfig(text=TEXT, mode="override"))],
                             f"v{version}-initialize-request-client-plain",
                             f"v{version}-initialize-response-agent-with-system-prompt")
    ((direction, msg),) = sent(relay, A, example(f"v{version}-session-new-request-plain"))
    assert direction is A and msg["params"]["systemPrompt"]["mode"] == "override"
    validate(msg["params"], version, "NewSessionRequest")
    validate(msg, version)


@pytest.mark.parametrize("version", [1, 2])
def test_first_prompt_injection_is_a_valid_prompt(version: int) -> None:
    relay = relay_after_init([SystemPrompt(SystemPromptConfig(text=TEXT, on_unsupported="first-prompt"))],
                             f"v{version}-initialize-request-client-plain",
                             f"v{version}-initialize-response-agent-no-system-prompt")
    relay.feed(A, line(example(f"v{version}-session-new-request-plain")))
    relay.feed(C, line(example(f"v{version}-session-new-response")))
    ((_, msg),) = sent(relay, A, example(f"v{version}-session-prompt-request"))
    assert msg["params"]["prompt"][0] == {"type": "text", "text": TEXT}
    validate(msg["params"], version, "PromptRequest", unstable=False)


@pytest.mark.parametrize("version", [1, 2])
def test_error_answered_instead_of_forwarding_is_a_valid_response(version: int) -> None:
    relay = relay_after_init([SystemPrompt(SystemPromptConfig(text=TEXT, on_unsupported="error"))],
                             f"v{version}-initialize-request-client-plain",
                             f"v{version}-initialize-response-agent-no-system-prompt")
    ((direction, msg),) = sent(relay, A, example(f"v{version}-session-new-request-plain"))
    assert direction is C and msg["error"]["code"] == -32603
    validate(msg, version, unstable=False)


@pytest.mark.parametrize("version", [1, 2])
def test_new_update_converted_for_an_air_client_is_a_valid_legacy_notification(version: int) -> None:
    relay = relay_after_init([PromptSuggestions(SuggestionsConfig())],
                             f"v{version}-initialize-request-client-legacy-air",
                             f"v{version}-initialize-response-agent-no-system-prompt")
    ((direction, msg),) = sent(relay, C, example(f"v{version}-session-update-prompt-suggestions"))
    assert direction is C and msg["params"]["update"]["sessionUpdate"] == "session_info_update"
    name = "SessionNotification" if version == 1 else "UpdateSessionNotification"
    validate(msg["params"], version, name, unstable=False)
    validate(msg, version, unstable=False)


@pytest.mark.parametrize("version", [1, 2])
def test_initialize_with_capabilities_added_is_valid(version: int) -> None:
    relay = Relay([PromptSuggestions(SuggestionsConfig(unlock_legacy_agent=True))], strict=True)
    ((_, msg),) = sent(relay, A, example(f"v{version}-initialize-request-client-with-suggestions"))
    assert msg != example(f"v{version}-initialize-request-client-with-suggestions")
    validate(msg["params"], version, "InitializeRequest")


@pytest.mark.parametrize("version", [1, 2])
def test_errors_for_requests_left_in_flight_are_valid(version: int) -> None:
    relay = Relay([], strict=True)
    relay.feed(A, line(example(f"v{version}-session-prompt-request")))
    (fwd,) = relay.fail_pending("agent exited with status 3 before answering", {"exitStatus": 3, "stderr": "boom\n"})
    validate(orjson.loads(fwd.data), version, unstable=False)
    unavailable = Relay([])
    assert unavailable.fail_pending("cannot start agent 'x': No such file or directory", {"errno": 2}) == []
    (_, answer) = unavailable.feed(A, line(example(f"v{version}-initialize-request-client-plain")))
    validate(orjson.loads(answer.data), version, unstable=False)


NOTIFICATION = {1: "SessionNotification", 2: "UpdateSessionNotification"}  # (the whole schema takes any method)


@pytest.mark.parametrize("version", [1, 2])
def test_the_commands_mirror_and_the_closing_update_are_valid_notifications(version: int) -> None:
    """What the built-in fixes write (bridge-rules 6.1, 6.2) is a valid SessionNotification
    of the negotiated version."""
    from acp_bridge.core.rewrites.commands import MirrorCommands
    from acp_bridge.core.rewrites.tool_calls import CloseToolCalls

    relay = relay_after_init([MirrorCommands(), CloseToolCalls()], f"v{version}-initialize-request-client-plain",
                             f"v{version}-initialize-response-agent-no-system-prompt")
    relay.feed(A, line(example(f"v{version}-session-new-request-plain")))
    commands = example(f"v{version}-session-update-available-commands")["params"]["update"]["availableCommands"]
    answer = {"jsonrpc": "2.0", "id": example(f"v{version}-session-new-request-plain")["id"],
              "result": {"sessionId": "sess_abc123", "availableCommands": commands}}
    [(_, _), (direction, mirrored)] = sent(relay, C, answer)
    assert direction is C and mirrored["params"]["update"]["availableCommands"] == commands
    validate(mirrored["params"], version, NOTIFICATION[version])
    relay.feed(A, line(example(f"v{version}-session-prompt-request")))
    opened = {"sessionUpdate": "tool_call" if version == 1 else "tool_call_update", "toolCallId": "call_1",
              "title": "Run make", "status": "in_progress"}
    relay.feed(C, line({"jsonrpc": "2.0", "method": "session/update",
                        "params": {"sessionId": "sess_abc123", "update": opened}}))
    end = example("v1-session-prompt-response") if version == 1 else example("v2-session-update-state-idle")
    [(_, closing), (_, ended)] = sent(relay, C, end)
    assert closing["params"]["update"]["status"] == "failed" and ended == end
    validate(closing["params"], version, NOTIFICATION[version])
