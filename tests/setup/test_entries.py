"""The pure entry logic of `setup`: entries built for each editor, recognised as going
through the bridge, wrapped and given back exactly, and the snippets of editors whose
settings are code."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.setup import entries as e

BRIDGE = ["/home/me/.local/bin/acp-bridge"]
MODULE = ["/home/me/.venv/bin/python3", "-m", "acp_bridge"]


@pytest.mark.parametrize(("editor", "bridge", "expected"), [
    pytest.param("zed", BRIDGE, {"type": "custom", "command": BRIDGE[0],
                                 "args": ["run", "--capture", "/c.jsonl", "--", "/bin/agent", "--acp"], "env": {}},
                 id="zed-custom"),
    pytest.param("jetbrains", MODULE, {"command": MODULE[0], "args": ["-m", "acp_bridge", "run", "--capture",
                                                                      "/c.jsonl", "--", "/bin/agent", "--acp"],
                                       "env": {}}, id="jetbrains-interpreter"),
])
def test_build_entry_runs_the_agent_through_the_bridge(editor: str, bridge: list[str], expected: dict[str, Any]) -> None:
    assert e.build_entry(editor, bridge, ["--capture", "/c.jsonl"], ["/bin/agent", "--acp"]) == expected


@pytest.mark.parametrize(("entry", "expected"), [
    pytest.param({"command": "/x/acp-bridge", "args": ["run", "-v", "--", "a", "b"]},
                 e.Bridged(("run",), ("-v",), ("a", "b")), id="run"),
    pytest.param({"command": "acp-bridge", "args": ["--capture", "c", "--", "a"]},
                 e.Bridged((), ("--capture", "c"), ("a",)), id="short-form"),
    pytest.param({"command": "/usr/bin/python3.12", "args": ["-m", "acp_bridge", "run", "--", "a"]},
                 e.Bridged(("-m", "acp_bridge", "run"), (), ("a",)), id="interpreter"),
    pytest.param({"command": "acp-bridge", "args": ["run", "-c", "/b.toml"]},
                 e.Bridged(("run",), ("-c", "/b.toml"), None), id="agent-from-config"),
    pytest.param({"command": "my-agent", "args": ["run", "--", "x"]}, None, id="another-program"),
    pytest.param({"command": "python3", "args": ["-m", "other"]}, None, id="another-module"),
    pytest.param({"type": "registry"}, None, id="registry"),
    pytest.param({"command": "acp-bridge", "args": "run"}, None, id="args-not-a-list"),
    pytest.param(["acp-bridge"], None, id="not-an-object"),
])
def test_bridged_tells_an_entry_that_starts_the_bridge(entry: Any, expected: e.Bridged | None) -> None:
    assert e.bridged(entry) == expected


def test_wrap_keeps_every_other_key_in_its_place() -> None:
    entry = {"type": "custom", "command": "claude-agent-acp", "args": ["--x"], "env": {"K": "v"}, "own": 1}
    wrapped = e.wrap(entry, BRIDGE, ["--capture", "/c.jsonl"], "Claude", "zed")
    assert list(wrapped) == ["type", "command", "args", "env", "own"]
    assert wrapped == {"type": "custom", "command": BRIDGE[0],
                       "args": ["run", "--capture", "/c.jsonl", "--", "claude-agent-acp", "--x"],
                       "env": {"K": "v"}, "own": 1}
    assert e.unwrap(wrapped, "Claude") == entry


def test_wrap_adds_args_after_the_command_when_there_were_none_and_unwrap_removes_them() -> None:
    entry = {"command": "agent", "env": {}}
    wrapped = e.wrap(entry, MODULE, [], "A", "jetbrains")
    assert list(wrapped) == ["command", "args", "env"]
    assert wrapped["args"] == ["-m", "acp_bridge", "run", "--", "agent"]
    assert e.unwrap(wrapped, "A") == entry


def test_a_registry_entry_cannot_be_wrapped_and_the_message_says_how_to_give_its_command() -> None:
    with pytest.raises(e.CannotWrap) as caught:
        e.wrap({"type": "registry"}, BRIDGE, [], "claude-acp", "zed")
    assert str(caught.value) == (
        "'claude-acp' names no command (\"type\": \"registry\": the editor installs and starts it itself); "
        "to run it through the bridge, give its command: acp-bridge setup zed --name claude-acp -- COMMAND [ARG...]")


@pytest.mark.parametrize(("entry", "message"), [
    pytest.param({"command": "agent"}, "'n' does not go through the bridge; nothing to unwrap", id="not-bridged"),
    pytest.param({"command": "acp-bridge", "args": ["run", "-c", "/b.toml"]},
                 "'n' runs the bridge with no agent after `--` (the agent comes from its config file); edit it by hand",
                 id="agent-from-config"),
])
def test_unwrap_refuses_what_it_cannot_give_back(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(e.CannotWrap) as caught:
        e.unwrap(entry, "n")
    assert str(caught.value) == message


WORD = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
OTHER_KEYS = st.dictionaries(st.sampled_from(["type", "env", "own", "icon"]), st.one_of(WORD, st.integers()),
                             max_size=3)


@given(command=WORD.filter(lambda w: w and "acp-bridge" not in w and not w.startswith("python")),
       args=st.one_of(st.none(), st.lists(WORD, min_size=1, max_size=4)), others=OTHER_KEYS,
       run_args=st.lists(st.sampled_from(["-v", "--capture", "/c", "--strict"]), max_size=3))
def test_unwrap_gives_back_exactly_what_was_wrapped(command: str, args: list[str] | None, others: dict[str, Any],
                                                     run_args: list[str]) -> None:
    """Property: for any entry with a command and args (or none), unwrap(wrap(x)) == x, key
    order included."""
    entry: dict[str, Any] = {**others, "command": command}
    if args is not None:
        entry["args"] = args
    wrapped = e.wrap(entry, BRIDGE, run_args, "n", "zed")
    assert e.bridged(wrapped) is not None
    back = e.unwrap(wrapped, "n")
    assert back == entry and list(back) == list(entry)


def test_changed_keys_names_only_what_differs() -> None:
    assert e.changed_keys({"a": 1, "b": [1], "c": 3}, {"a": 1, "b": [2], "d": 4}) == ({"b": [2], "d": 4}, ["c"])
    assert e.changed_keys({"a": 1}, {"a": 1}) == ({}, [])


def test_default_name_is_the_program_with_the_bridge_named() -> None:
    assert e.default_name(["/usr/local/bin/claude-agent-acp", "--x"]) == "claude-agent-acp (acp-bridge)"


COMMAND = ["/b/acp-bridge", "run", "--", "/n/claude-agent-acp"]


def test_codecompanion_snippet_extends_the_adapter_of_the_agent() -> None:
    where, text = e.snippet("neovim-codecompanion", "Claude via bridge", COMMAND, ["claude-agent-acp"])
    assert "codecompanion" in where
    assert 'extend("claude_code", {' in text
    assert 'default = { "/b/acp-bridge", "run", "--", "/n/claude-agent-acp" },' in text
    assert "Claude_via_bridge = function()" in text


def test_codecompanion_snippet_for_an_unknown_agent_says_which_adapter_to_replace_where_it_is_read() -> None:
    _, text = e.snippet("neovim-codecompanion", "mine", ["/b/acp-bridge", "run", "--", "/n/my-agent"], ["my-agent"])
    assert text.splitlines()[3:6] == [
        "      mine = function()",
        "        -- replace claude_code with the built-in adapter closest to your agent",
        '        return require("codecompanion.adapters").extend("claude_code", {',
    ]


def test_avante_snippet_names_the_provider_and_its_command() -> None:
    _, text = e.snippet("neovim-avante", "bridged", COMMAND, ["claude-agent-acp"])
    assert 'provider = "bridged",' in text
    assert 'command = "/b/acp-bridge",' in text
    assert 'args = { "run", "--", "/n/claude-agent-acp" },' in text


def test_agent_shell_snippet_sets_the_agents_command_variable_with_elisp_quoting() -> None:
    _, text = e.snippet("emacs-agent-shell", "x", ["/b/acp-bridge", "run", "--system-prompt", 'say "hi" \\o/',
                                                   "--", "/n/codex-acp"], ["codex-acp"])
    assert text == ("(setq agent-shell-openai-codex-command\n"
                    "      '(\"/b/acp-bridge\" \"run\" \"--system-prompt\" \"say \\\"hi\\\" \\\\o/\" \"--\" "
                    "\"/n/codex-acp\"))\n")
