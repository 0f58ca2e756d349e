"""doctor's report, pure: the predictions come from the rules' own functions on the agent's
answer, and each problem comes with its fix."""

from __future__ import annotations

from typing import Any

import pytest

from acp_bridge.config.model import SuggestionsConfig, SystemPromptConfig
from acp_bridge.setup.report import Probe, WrongId, as_json, lines, problems, suggestions, system_prompt_dialect


def answered(result: dict[str, Any], protocol: int = 1, **extra: Any) -> Probe:
    return Probe(command=["/bin/agent"], protocol=protocol, initialize={"jsonrpc": "2.0", "id": 1, "result": result},
                 initialize_at=0.25, **extra)


SPEC_V1 = {"protocolVersion": 1, "agentCapabilities": {"sessionCapabilities": {"systemPrompt": {}}}}
SPEC_V2 = {"protocolVersion": 2, "capabilities": {"session": {"systemPrompt": {"mode": {"override": {}}}}}}


@pytest.mark.parametrize(("probe", "config", "expected"), [
    pytest.param(answered({"protocolVersion": 1, "agentInfo": {"name": "@zed-industries/claude-agent-acp"}}),
                 SystemPromptConfig(), {"dialect": "meta", "mode": "append"}, id="meta-reader"),
    pytest.param(answered({"protocolVersion": 1}), SystemPromptConfig(), {"dialect": "first-prompt", "mode": "append"},
                 id="no-capability"),
    pytest.param(answered(SPEC_V1), SystemPromptConfig(mode="override"),
                 {"dialect": "spec", "mode": "append", "downgraded": True}, id="override-downgraded"),
    pytest.param(answered(SPEC_V2, protocol=2), SystemPromptConfig(mode="override"),
                 {"dialect": "spec", "mode": "override"}, id="v2-override"),
    pytest.param(answered({"protocolVersion": 1}), SystemPromptConfig(on_unsupported="skip"),
                 {"dialect": "skip", "mode": "append"}, id="skip"),
])
def test_the_dialect_is_the_one_choose_plan_picks(probe: Probe, config: SystemPromptConfig,
                                                  expected: dict[str, Any]) -> None:
    assert system_prompt_dialect(probe, config) == expected


@pytest.mark.parametrize(("name", "config", "unlock"), [
    pytest.param("@agentclientprotocol/claude-agent-acp", SuggestionsConfig(), [True, False, False], id="legacy"),
    pytest.param("@agentclientprotocol/claude-agent-acp", SuggestionsConfig(unlock_legacy_agent=True),
                 [False, False, False], id="legacy-unlocked"),
    pytest.param("some-new-agent", SuggestionsConfig(), [False, False, False], id="new-agent"),
    pytest.param("codex-acp", SuggestionsConfig(enabled=False), [False, False, False], id="off"),
])
def test_suggestions_name_each_clients_form_and_when_the_unlock_is_needed(
        name: str, config: SuggestionsConfig, unlock: list[bool]) -> None:
    rows = suggestions(answered({"protocolVersion": 1, "agentInfo": {"name": name}}), config)
    assert [row["form"] for row in rows] == ["new", "legacy", None]
    assert [row["unlock_needed"] for row in rows] == unlock
    if not config.enabled:
        assert {row["bridge"] for row in rows} == {"nothing: suggestions pass untouched (--no-suggestions)"}


@pytest.mark.parametrize(("probe", "expected"), [
    pytest.param(answered({"protocolVersion": 1}), [], id="healthy"),
    pytest.param(answered({"protocolVersion": 2}), [
        ("it answers protocol version 2 to a client that asked for 1",
         "clients that speak only version 1 will disconnect; try --protocol 2")], id="other-version"),
    pytest.param(answered({}), [("its initialize answer has no protocolVersion",
                                 "update the agent: every ACP agent answers with the version it speaks")],
                 id="no-version"),
    pytest.param(answered({"protocolVersion": True}), [("its initialize answer has no protocolVersion",
                                                        "update the agent: every ACP agent answers with the version it speaks")],
                 id="boolean-version"),
    pytest.param(answered({"protocolVersion": 1}, session={"jsonrpc": "2.0", "id": 2, "error": {
        "code": -32000, "message": "Authentication required"}}),
        [("session/new fails: Authentication required", "the agent may need a login or an API key in its env")],
        id="session-refused"),
    pytest.param(Probe(command=["/bin/agent"], protocol=1, exited=1, stderr_tail="line\x1b[31m\n"), [
        ("it exited with status 1 before answering initialize; its stderr ends: line\\u001b[31m",
         "run the command by hand to see why; check its arguments, its login or API key")],
        id="exit-with-control-characters-escaped"),
    pytest.param(answered({"protocolVersion": 1}, wrong_id=WrongId("session/new", 2, '"2\x1b"')), [
        ('its answer to session/new did not match the request id (2): it answered id "2\\u001b"',
         "the agent must answer each request with the request's own id, as the client wrote it (JSON-RPC 2.0); "
         "update the agent, or tell its authors")], id="wrong-id-escaped"),
    pytest.param(Probe(command=["/bin/agent"], protocol=1, wrong_id=WrongId("initialize", 1, "9" * 300)), [
        (f"its answer to initialize did not match the request id (1): it answered id {'9' * 200} ...",
         "the agent must answer each request with the request's own id, as the client wrote it (JSON-RPC 2.0); "
         "update the agent, or tell its authors")], id="wrong-id-cut"),
    pytest.param(Probe(command=["/bin/agent"], protocol=1, wrong_id=WrongId("initialize", 1, "null", "Parse\nerror")), [
        ("its answer to initialize did not match the request id (1): it answered id null, with the error: Parse\\nerror",
         "the agent must answer each request with the request's own id, as the client wrote it (JSON-RPC 2.0); "
         "update the agent, or tell its authors")], id="wrong-id-with-an-error"),
    pytest.param(Probe(command=["/bin/agent"], protocol=1, long_line="initialize", max_line_mib=64), [
        ("it wrote a line over 64 MiB to stdout while doctor waited for the answer to initialize; neither "
         "doctor nor the bridge reads a line that long (the bridge passes it on in pieces, unread)",
         "run the command by hand and see what it writes: an answer that long is the agent's fault (the limit "
         "is [relay] parse_limit_mib)")], id="long-line-at-the-configured-limit"),
])
def test_problems_come_with_their_fix(probe: Probe, expected: list[tuple[str, str]]) -> None:
    assert [(x.what, x.fix) for x in problems(probe)] == expected


def test_the_text_report_and_the_json_say_the_same_facts() -> None:
    probe = answered({"protocolVersion": 1, "agentInfo": {"name": "a", "version": "2"},
                      "agentCapabilities": {"loadSession": True}}, session={"result": {"sessionId": "s"}},
                     session_at=0.5, commands=[{"name": "review"}, {"name": "x\ny"}])
    facts = as_json(probe, SystemPromptConfig(), SuggestionsConfig())
    assert facts["healthy"] and facts["commands"] == ["review", "x\ny"]
    text = lines(probe, SystemPromptConfig(), SuggestionsConfig())
    assert text[:4] == ["agent: /bin/agent", "started and answered initialize in 0.25 s", "agentInfo: a 2",
                        "protocol version: 1 (asked for 1)"]
    assert "commands: /review, /x\\ny" in text and text[-1] == "healthy"
