"""The layers of `run`'s settings (spec/interface.md): command line > ACP_BRIDGE_* environment >
config file > defaults, and what `strict` means across them.

A higher layer's choice replaces a lower one's even when the two are different spellings of one
choice (system prompt text or file); only two spellings in the same layer conflict. `run` is
stubbed here (these tests are about the Config it gets); the end-to-end runs are in
test_system_prompt_cli.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.commands import cli
from acp_bridge.commands.cli import main
from acp_bridge.config import Config
from tests.conftest import keeper

TOML_TEXT = '[system_prompt]\ntext = "from toml text"\n'
TOML_FILE = '[system_prompt]\nfile = "toml.md"\n'


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Config]:
    configs: list[Config] = []
    monkeypatch.setattr(cli, "run_and_report", keeper(configs))
    monkeypatch.setattr(cli, "setup_logging", lambda config: None)
    monkeypatch.chdir(tmp_path)
    for name in ("toml", "env", "cli"):
        (tmp_path / f"{name}.md").write_text(f"from {name} file\n")
    return configs


def invoke(tmp_path: Path, toml: str, args: list[str], env: dict[str, str]) -> Any:
    config = tmp_path / "c.toml"
    config.write_text(toml)
    return CliRunner().invoke(main, ["run", "-c", str(config), *args, "--", "agent"], env=env)


ENV_TEXT = {"ACP_BRIDGE_SYSTEM_PROMPT": "from env text"}
ENV_FILE = {"ACP_BRIDGE_SYSTEM_PROMPT_FILE": "env.md"}
CLI_TEXT = ["--system-prompt", "from cli text"]
CLI_FILE = ["--system-prompt-file", "cli.md"]


@pytest.mark.parametrize(("toml", "env", "args", "expected"), [
    pytest.param(TOML_TEXT, {}, [], "from toml text", id="toml-text"),
    pytest.param(TOML_FILE, {}, [], "from toml file", id="toml-file"),
    # the issue: the environment's text and the command line's file
    pytest.param("", ENV_TEXT, CLI_FILE, "from cli file", id="env-text-cli-file"),
    pytest.param("", ENV_FILE, CLI_TEXT, "from cli text", id="env-file-cli-text"),
    pytest.param("", ENV_TEXT, CLI_TEXT, "from cli text", id="env-text-cli-text"),
    pytest.param("", ENV_FILE, CLI_FILE, "from cli file", id="env-file-cli-file"),
    pytest.param(TOML_TEXT, ENV_FILE, [], "from env file", id="toml-text-env-file"),
    pytest.param(TOML_FILE, ENV_TEXT, [], "from env text", id="toml-file-env-text"),
    pytest.param(TOML_TEXT, {}, CLI_FILE, "from cli file", id="toml-text-cli-file"),
    pytest.param(TOML_FILE, {}, CLI_TEXT, "from cli text", id="toml-file-cli-text"),
    pytest.param(TOML_FILE, ENV_TEXT, CLI_FILE, "from cli file", id="all-three-layers"),
    # a lower layer's file that does not exist does not matter once replaced
    pytest.param("", {"ACP_BRIDGE_SYSTEM_PROMPT_FILE": "missing.md"}, CLI_TEXT, "from cli text",
                 id="replaced-env-file-is-not-read"),
    pytest.param("", {"ACP_BRIDGE_SYSTEM_PROMPT_FILE": "."}, CLI_TEXT, "from cli text",
                 id="replaced-env-file-may-be-a-directory"),
    # an empty variable counts as unset, as click reads it
    pytest.param(TOML_TEXT, {"ACP_BRIDGE_SYSTEM_PROMPT": ""}, [], "from toml text", id="empty-env-is-unset"),
])
def test_system_prompt_text_or_file_higher_layer_wins(seen: list[Config], tmp_path: Path, toml: str,
                                                      env: dict[str, str], args: list[str], expected: str) -> None:
    result = invoke(tmp_path, toml, args, env)
    assert result.exit_code == 0, result.stderr
    assert [c.system_prompt.text for c in seen] == [expected]


@pytest.mark.parametrize(("env", "args", "message"), [
    pytest.param({}, [*CLI_TEXT, *CLI_FILE], "acp-bridge: --system-prompt and --system-prompt-file: give only one",
                 id="both-on-the-command-line"),
    pytest.param({**ENV_TEXT, **ENV_FILE}, [],
                 "acp-bridge: ACP_BRIDGE_SYSTEM_PROMPT and ACP_BRIDGE_SYSTEM_PROMPT_FILE: give only one",
                 id="both-in-the-environment"),
    pytest.param({**ENV_TEXT, **ENV_FILE}, [*CLI_TEXT, *CLI_FILE],
                 "acp-bridge: --system-prompt and --system-prompt-file: give only one",
                 id="both-everywhere"),
])
def test_text_and_file_in_the_same_layer_conflict(seen: list[Config], tmp_path: Path, env: dict[str, str],
                                                  args: list[str], message: str) -> None:
    result = invoke(tmp_path, "", args, env)
    assert (result.exit_code, result.stderr) == (2, message + "\n")
    assert seen == []


def test_errors_name_the_layer_the_value_came_from(seen: list[Config], tmp_path: Path) -> None:
    result = invoke(tmp_path, "", [], {"ACP_BRIDGE_SYSTEM_PROMPT_FILE": "missing.md"})
    assert result.exit_code == 2
    assert result.stderr.startswith("acp-bridge: ACP_BRIDGE_SYSTEM_PROMPT_FILE: cannot read missing.md")
    result = invoke(tmp_path, "", ["--system-prompt", " "], {})
    assert result.stderr == "acp-bridge: --system-prompt: is empty\n"


# -- strict: one word, one meaning ------------------------------------------------------------

BRIDGE_STRICT = "[bridge]\nstrict = true\n"
PROMPT_STRICT = "[system_prompt]\nstrict = true\n"


@pytest.mark.parametrize(("toml", "env", "args", "expected"), [
    pytest.param("", {}, [], (False, False), id="default"),
    pytest.param("", {}, ["--strict"], (True, True), id="option-implies-system-prompt-strict"),
    pytest.param("", {"ACP_BRIDGE_STRICT": "1"}, [], (True, True), id="env-implies-system-prompt-strict"),
    pytest.param(BRIDGE_STRICT, {}, [], (True, True), id="bridge-table-implies-system-prompt-strict"),
    pytest.param(PROMPT_STRICT, {}, [], (False, True), id="system-prompt-strict-alone-is-only-that"),
    pytest.param(BRIDGE_STRICT, {"ACP_BRIDGE_STRICT": "0"}, [], (False, False), id="env-turns-the-file-off"),
    pytest.param(BRIDGE_STRICT + PROMPT_STRICT, {"ACP_BRIDGE_STRICT": "false"}, [], (False, True),
                 id="env-off-keeps-the-files-own-system-prompt-strict"),
    pytest.param("", {"ACP_BRIDGE_STRICT": "0"}, ["--strict"], (True, True), id="option-beats-env"),
])
def test_strict_means_every_strictness(seen: list[Config], tmp_path: Path, toml: str, env: dict[str, str],
                                       args: list[str], expected: tuple[bool, bool]) -> None:
    """`--strict` asks for no silent downgrade too (spec/interface.md); `system_prompt.strict`
    alone only refuses the override-to-append downgrade, and a rule failure is still logged."""
    result = invoke(tmp_path, toml, args, env)
    assert result.exit_code == 0, result.stderr
    assert [(c.strict, c.system_prompt.strict) for c in seen] == [expected]


@pytest.mark.parametrize(("env", "expected"), [
    pytest.param({"ACP_BRIDGE_NO_SUGGESTIONS": "0"}, (True, True), id="no-suggestions-off-beats-file"),
    pytest.param({"ACP_BRIDGE_UNLOCK_LEGACY_AGENT": "no"}, (False, False), id="unlock-off-beats-file"),
    pytest.param({}, (False, True), id="the-file"),
])
def test_a_flag_turned_off_in_the_environment_replaces_the_file(seen: list[Config], tmp_path: Path,
                                                                env: dict[str, str], expected: tuple[bool, bool]) -> None:
    toml = "[suggestions]\nenabled = false\nunlock_legacy_agent = true\n"
    result = invoke(tmp_path, toml, [], env)
    assert result.exit_code == 0, result.stderr
    assert [(c.suggestions.enabled, c.suggestions.unlock_legacy_agent) for c in seen] == [expected]


@pytest.mark.parametrize(("toml", "expected"), [
    pytest.param(BRIDGE_STRICT, (True, True), id="bridge-strict"),
    pytest.param(PROMPT_STRICT, (False, True), id="system-prompt-strict"),
])
def test_check_config_prints_the_effective_strictness(tmp_path: Path, toml: str, expected: tuple[bool, bool]) -> None:
    config = tmp_path / "c.toml"
    config.write_text(toml)
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 0, result.stderr
    settings = orjson.loads(result.stdout)
    assert (settings["strict"], settings["system_prompt"]["strict"]) == expected


def test_run_help_explains_strict() -> None:
    result = CliRunner().invoke(main, ["run", "--help"])
    text = " ".join(result.output.split())
    assert "Every strictness at once" in text
    assert "implies system_prompt.strict" in text
    assert "Same as [bridge] strict" in text


# -- check-config prints no secrets -----------------------------------------------------------


def test_check_config_masks_agent_env_values_and_the_system_prompt(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[agent]\ncommand = ["agent"]\nenv = { API_KEY = "sk-live-123", MODE = "fast" }\n'
                      '[system_prompt]\ntext = "Private team rules."\n')
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 0, result.stderr
    assert "sk-live-123" not in result.stdout and "fast" not in result.stdout
    assert "Private" not in result.stdout
    settings = orjson.loads(result.stdout)
    assert settings["agent"]["env"] == {"API_KEY": "<redacted>", "MODE": "<redacted>"}
    assert settings["system_prompt"]["text"] == "<19 characters>"
