"""The layers of `run`'s settings (spec/interface.md): command line > ACP_BRIDGE_* environment >
config file > defaults, and what `strict` means across them; the options' own checks; and
`Overrides`, the layers above the file as one mapping of dotted keys (config/layers.py).

A higher layer's choice replaces a lower one's even when the two are different spellings of one
choice (system prompt text or file); only two spellings in the same layer conflict. `run` is
stubbed here (these tests are about the Config it gets); the end-to-end runs are in
tests/commands/test_run_system_prompt.py.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import click
import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.commands import main, run
from acp_bridge.config import Config
from acp_bridge.config.layers import Overrides, PromptFile, PromptText, apply_overrides
from acp_bridge.errors import ConfigError
from tests.config.conftest import field_value, one_line
from tests.conftest import agent_cmd, keeper

TOML_TEXT = '[system_prompt]\ntext = "from toml text"\n'
TOML_FILE = '[system_prompt]\nfile = "toml.md"\n'


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Config]:
    configs: list[Config] = []
    monkeypatch.setattr(run, "run_and_report", keeper(configs))
    monkeypatch.setattr(run, "setup_logging", lambda config: None)
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


def test_precedence_command_line_then_env_then_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(run, "run_and_report", keeper(seen))
    config = tmp_path / "c.toml"
    config.write_text('[system_prompt]\ntext = "from file"\nmode = "override"\n[capture]\npath = "file.jsonl"\n')
    runner = CliRunner()
    runner.invoke(main, ["run", "-c", str(config), "--", "agent"], env={"ACP_BRIDGE_SYSTEM_PROMPT": "from env"})
    runner.invoke(main, ["run", "-c", str(config), "--system-prompt", "from cli", "--", "agent"],
                  env={"ACP_BRIDGE_SYSTEM_PROMPT": "from env"})
    runner.invoke(main, ["run", "-c", str(config), "--", "agent"])
    assert [c.system_prompt.text for c in seen] == ["from env", "from cli", "from file"]
    assert {c.system_prompt.mode for c in seen} == {"override"}
    assert seen[0].capture.path == str(tmp_path / "file.jsonl")
    assert seen[0].agent.command == ("agent",)


def test_a_config_file_in_a_folder_with_braces_keeps_them_out_of_the_capture_template(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative [capture] path starts at the file's folder, and `{time}` and `{pid}` are
    filled in after: a folder named `p{x}` made every command reading the file a traceback
    (KeyError: 'x'), as `run` with it had been. Its braces are doubled in the template."""
    seen: list[Any] = []
    monkeypatch.setattr(run, "run_and_report", keeper(seen))
    folder = tmp_path / "p{x}"
    folder.mkdir()
    config = folder / "c.toml"
    config.write_text('[capture]\npath = "caps/c-{pid}.jsonl"\n')
    result = CliRunner().invoke(main, ["run", "-c", str(config), "--", "agent"])
    assert result.exit_code == 0, result.output
    template = str(tmp_path).replace("{", "{{").replace("}", "}}") + "/p{{x}}/caps/c-{pid}.jsonl"
    assert seen[0].capture.path == template
    assert template.format(pid=7) == str(folder / "caps" / "c-7.jsonl")
    monkeypatch.setenv("HOME", str(folder))  # a home folder put before the template: the same
    config.write_text('[capture]\npath = "~/c-{pid}.jsonl"\n')
    result = CliRunner().invoke(main, ["run", "-c", str(config), "--", "agent"])
    assert result.exit_code == 0, result.output
    assert seen[1].capture.path.format(pid=7) == str(folder / "c-7.jsonl")


def test_bridge_table_sets_strict_log_file_and_verbosity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(run, "run_and_report", keeper(seen))
    monkeypatch.setattr(run, "setup_logging", lambda config: None)
    config = tmp_path / "c.toml"
    config.write_text('[bridge]\nstrict = true\nlog_file = "bridge.log"\nverbosity = 2\n')
    CliRunner().invoke(main, ["run", "-c", str(config), "--", "agent"])
    CliRunner().invoke(main, ["run", "-c", str(config), "-q", "--", "agent"])
    assert [(c.strict, c.log_file, c.verbosity) for c in seen] == [
        (True, str(tmp_path / "bridge.log"), 2), (True, str(tmp_path / "bridge.log"), -1)]


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


# -- the command line's own checks ----------------------------------------------------------


@pytest.mark.parametrize(("args", "env", "message"), [
    pytest.param(["--system-prompt-file", "."], {}, "acp-bridge: --system-prompt-file: . is a directory, not a file",
                 id="prompt-file-option-directory"),
    pytest.param([], {"ACP_BRIDGE_SYSTEM_PROMPT_FILE": "."},
                 "acp-bridge: ACP_BRIDGE_SYSTEM_PROMPT_FILE: . is a directory, not a file", id="prompt-file-env-directory"),
    pytest.param(["--system-prompt-file", "loop.md"], {}, "acp-bridge: --system-prompt-file: cannot read loop.md:",
                 id="prompt-file-option-symlink-loop"),
    pytest.param(["--system-prompt-file", "latin1.md"], {}, "acp-bridge: --system-prompt-file: latin1.md is not UTF-8",
                 id="prompt-file-option-not-utf8"),
    pytest.param(["--capture", "x-{pid:s}"], {}, "acp-bridge: --capture: bad template", id="capture-option-format-spec"),
    pytest.param([], {"ACP_BRIDGE_CAPTURE": "x-{when}"}, "acp-bridge: ACP_BRIDGE_CAPTURE: unknown placeholder {when}",
                 id="capture-env-placeholder"),
    pytest.param(["-v", "-q"], {}, "acp-bridge: -v/--verbose and -q/--quiet: give only one", id="verbose-and-quiet"),
])
def test_bad_run_options_are_exit_2_naming_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      args: list[str], env: dict[str, str], message: str) -> None:
    (tmp_path / "latin1.md").write_bytes("Caf\xe9".encode("latin-1"))
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", *args, "--", "agent"], env=env)
    assert result.exit_code == 2, result.output
    assert one_line(result.stderr).startswith(message), result.stderr


@pytest.mark.parametrize(("args", "env", "message"), [
    pytest.param(["--capture", ""], {}, "--capture: is empty; name a capture file", id="empty"),
    pytest.param(["--capture", "caps/"], {}, "--capture: caps/ names a directory, not a file", id="trailing-slash"),
    pytest.param(["--capture", "caps/.."], {}, "--capture: caps/.. names a directory, not a file", id="dot-dot"),
    pytest.param(["--capture", "folder"], {}, "--capture: folder is a directory, not a file", id="a-directory"),
    pytest.param([], {"ACP_BRIDGE_CAPTURE": "folder"}, "ACP_BRIDGE_CAPTURE: folder is a directory, not a file",
                 id="env-a-directory"),
    pytest.param(["--capture", "fifo"], {}, "--capture: fifo is a FIFO, not a regular file", id="a-fifo"),
    pytest.param(["--capture", "/dev/null"], {}, "--capture: /dev/null is a character device, not a regular file",
                 id="a-device"),
    pytest.param(["--capture", "notes.txt/c-{pid}.jsonl"], {}, "--capture: notes.txt is not a directory",
                 id="under-a-file"),
    pytest.param(["--capture", "link/new/c.jsonl"], {}, "--capture: link is not a directory", id="under-a-link-to-a-file"),
])
def test_a_capture_path_no_capture_can_be_made_at_is_exit_2_before_the_agent_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], message: str) -> None:
    """`--capture` (or ACP_BRIDGE_CAPTURE) naming nothing, a directory, a FIFO, a device, or a
    file under something that is no directory was found only when the capture was created: a
    line in the log, no capture, and for a FIFO or /dev/null a capture beside it (fifo-1,
    /dev/null-1). Now one line and exit 2, and the agent never starts."""
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "notes.txt")
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "started"
    result = CliRunner().invoke(main, ["run", *args, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
                                env=env)
    assert (result.exit_code, result.stderr) == (2, f"acp-bridge: {message}\n")
    assert not marker.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fifo", "folder", "link", "notes.txt"]


def test_an_empty_capture_variable_is_no_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """click reads an empty variable as unset, for every option: ACP_BRIDGE_CAPTURE= is no
    capture, not an empty path (the bridge runs, relaying, and writes nothing)."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", "--", sys.executable, "-c", "pass"], env={"ACP_BRIDGE_CAPTURE": ""})
    assert (result.exit_code, result.stderr, list(tmp_path.iterdir())) == (0, "", [])


def test_an_empty_agent_program_after_dash_dash_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["run", "--", ""])
    assert result.exit_code == 2
    assert one_line(result.stderr) == ("acp-bridge: the agent command after `--`: the program (the first item) "
                                       "is an empty string")


async def test_a_system_prompt_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    """argv bytes that are not UTF-8 reach Python as lone surrogates, which JSON cannot carry:
    the rule would fail on every session setup request."""
    import trio

    pidfile = tmp_path / "agent.pid"
    env = {**os.environ, "FAKE_AGENT_PIDFILE": str(pidfile)}
    with trio.fail_after(30):
        proc = await trio.run_process(
            [os.fsencode(sys.executable), b"-m", b"acp_bridge", b"run", b"--system-prompt", b"caf\xe9",
             b"--", *map(os.fsencode, agent_cmd("echo"))],
            stdin=b"", capture_stdout=True, capture_stderr=True, check=False, env=env)
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr == b"acp-bridge: --system-prompt: is not valid UTF-8 text\n"
    assert not pidfile.exists()


# -- the layers above the file, one mapping of dotted keys ----------------------------------

# Every setting a layer above the file can give, by the dotted field of `Config` it sets.
OVERRIDES: dict[str, tuple[Any, Any, Any]] = {
    # key: (the upper layer's, the lower layer's, the effect of upper's)
    "agent.command": (("upper",), ("lower",), ("upper",)),
    "capture.path": ("upper.jsonl", "lower.jsonl", "upper.jsonl"),
    "system_prompt.text": (PromptText("upper", "--system-prompt"),
                           PromptFile(Path("/nonexistent/lower.md"), "ACP_BRIDGE_SYSTEM_PROMPT_FILE"), "upper"),
    "system_prompt.mode": ("override", "append", "override"),
    "suggestions.enabled": (False, True, False),
    "suggestions.unlock_legacy_agent": (True, False, True),
    "health.enabled": (False, True, False),
    "strict": (True, False, True),
    "log_file": ("upper.log", "lower.log", "upper.log"),
    "verbosity": (2, -1, 2),
    "telemetry.enabled": (True, False, True),
    "telemetry.content": (True, False, True),
    "rules.command_line": (("upper.py",), ("lower.py",), ("upper.py",)),
    "commands.mirror_initial": (False, True, False),
    "repair.close_tool_calls": (True, False, True),
    "relay.stray_output": ("stderr", "forward", "stderr"),
}
UPPER = Overrides({key: upper for key, (upper, _, _) in OVERRIDES.items()})
LOWER = Overrides({key: lower for key, (_, lower, _) in OVERRIDES.items()})

# Every run option that sets something, given on the command line, then in the environment
# (where -v and -q have no variable).
EVERY_OPTION = ["--capture", "c.jsonl", "--system-prompt", "text", "--system-prompt-mode", "override",
                "--unlock-legacy-agent", "--no-suggestions", "--no-health", "--strict", "--log-file", "b.log",
                "--otlp", "--otlp-content", "--rule", "r.py", "-v", "--no-commands-mirror", "--close-tool-calls",
                "--stray-output", "stderr"]
EVERY_VARIABLE = {"ACP_BRIDGE_CAPTURE": "c.jsonl", "ACP_BRIDGE_SYSTEM_PROMPT": "text",
                  "ACP_BRIDGE_SYSTEM_PROMPT_MODE": "override", "ACP_BRIDGE_UNLOCK_LEGACY_AGENT": "1",
                  "ACP_BRIDGE_NO_SUGGESTIONS": "1", "ACP_BRIDGE_NO_HEALTH": "1", "ACP_BRIDGE_STRICT": "1",
                  "ACP_BRIDGE_LOG_FILE": "b.log", "ACP_BRIDGE_OTLP": "1", "ACP_BRIDGE_OTLP_CONTENT": "1",
                  "ACP_BRIDGE_NO_COMMANDS_MIRROR": "1", "ACP_BRIDGE_CLOSE_TOOL_CALLS": "1",
                  "ACP_BRIDGE_STRAY_OUTPUT": "stderr"}


# Options that set nothing of their own: the file to read, and second spellings of a setting.
NOT_IN_EVERY_OPTION = {"config_file", "system_prompt_file", "quiet"}


def test_every_option_and_variable_is_tried_below() -> None:
    """So a new option of `run` cannot escape the test after this one."""
    options = [p for p in run.run.params if isinstance(p, click.Option)]
    assert {p.name for p in options if set(p.opts) & set(EVERY_OPTION)} == {
        p.name for p in options} - NOT_IN_EVERY_OPTION
    assert set(EVERY_VARIABLE) == {p.envvar for p in options if p.envvar} - {
        "ACP_BRIDGE_CONFIG", "ACP_BRIDGE_SYSTEM_PROMPT_FILE"}


@pytest.mark.parametrize(("args", "env", "expected"), [
    pytest.param(EVERY_OPTION, {}, set(OVERRIDES), id="command-line"),
    pytest.param([], EVERY_VARIABLE, set(OVERRIDES) - {"verbosity", "rules.command_line"}, id="environment"),
])
def test_the_overrides_table_names_every_setting_the_command_line_gives(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str], env: dict[str, str],
        expected: set[str]) -> None:
    """The keys `run` builds are the table's (the agent after `--` is one of them), so each
    one is tested below to reach a real field of `Config`."""
    given: list[Overrides] = []

    def keep(config: Config, overrides: Overrides) -> Config:
        given.append(overrides)
        return apply_overrides(config, overrides)

    monkeypatch.setattr(run, "apply_overrides", keep)
    monkeypatch.setattr(run, "run_and_report", keeper([]))
    monkeypatch.setattr(run, "setup_logging", lambda config: None)
    monkeypatch.chdir(tmp_path)
    CliRunner().invoke(main, ["run", *args, "--", "agent"], env=env)
    assert [set(overrides.settings) for overrides in given] == [expected]


@pytest.mark.parametrize("key", sorted(OVERRIDES))
def test_each_key_names_a_setting_of_config(key: str) -> None:
    assert not dataclasses.is_dataclass(field_value(Config(), key))


@pytest.mark.parametrize(("key", "message"), [
    ("capture.pth", "'capture.pth' names no setting of Config"),
    ("nope", "'nope' names no setting of Config"),
    ("strict.on", "'strict.on' names no setting of Config"),
    ("capture", "'capture' names a table of Config, not a setting"),
])
def test_a_key_that_names_no_setting_is_a_bug(key: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        apply_overrides(Config(), Overrides({key: "x"}))
    assert str(caught.value) == message


def test_a_layer_that_does_not_say_gives_none() -> None:
    """None is how a layer says nothing: it neither sets a field nor hides a lower layer's."""
    assert Overrides({"strict": None, "log_file": "b.log"}).settings == {"log_file": "b.log"}
    assert Overrides({"strict": None}).over(Overrides({"strict": True})) == Overrides({"strict": True})


@pytest.mark.parametrize("key", sorted(OVERRIDES))
def test_the_upper_layer_wins_each_setting_it_gives(key: str) -> None:
    assert UPPER.over(LOWER).settings[key] == UPPER.settings[key]
    only_lower = Overrides().over(LOWER)
    assert only_lower.settings[key] == LOWER.settings[key]


def test_an_empty_layer_changes_nothing() -> None:
    assert Overrides().over(LOWER) == LOWER
    assert UPPER.over(Overrides()) == UPPER
    config = Config(verbosity=1, log_file="file.log")
    assert apply_overrides(config, Overrides()) == config


@pytest.mark.parametrize("key", sorted(OVERRIDES))
def test_each_setting_reaches_its_field(key: str) -> None:
    upper, _, effect = OVERRIDES[key]
    applied = apply_overrides(Config(), Overrides({key: upper}))
    assert field_value(applied, key) == effect
    assert field_value(Config(), key) != effect


def test_a_replaced_prompt_file_is_never_read() -> None:
    """The lower layer's file does not exist: only the upper layer's text is used."""
    assert apply_overrides(Config(), UPPER.over(LOWER)).system_prompt.text == "upper"
    with pytest.raises(ConfigError, match="ACP_BRIDGE_SYSTEM_PROMPT_FILE: cannot read"):
        apply_overrides(Config(), LOWER)


@pytest.mark.parametrize(("prompt", "message"), [
    (PromptText("  ", "--system-prompt"), "--system-prompt: is empty"),
    (PromptText("caf\udce9", "ACP_BRIDGE_SYSTEM_PROMPT"), "ACP_BRIDGE_SYSTEM_PROMPT: is not valid UTF-8 text"),
])
def test_prompt_text_is_checked_where_it_takes_effect(prompt: PromptText, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        apply_overrides(Config(), Overrides({"system_prompt.text": prompt}))
    assert str(caught.value) == message


HOME_CASES = [  # (toml, env, args, the Config's field, what it holds) with HOME = tmp_path/home
    ("", {}, ["--capture", "~/caps/{pid}.jsonl"], "capture.path", "{home}/caps/{{pid}}.jsonl"),
    ("", {"ACP_BRIDGE_CAPTURE": "~/caps/{time}.jsonl"}, [], "capture.path", "{home}/caps/{{time}}.jsonl"),
    ('[capture]\npath = "~/caps/{pid}.jsonl"\n', {}, [], "capture.path", "{home}/caps/{{pid}}.jsonl"),
    ("", {}, ["--log-file", "~/bridge.log"], "log_file", "{home}/bridge.log"),
    ("", {"ACP_BRIDGE_LOG_FILE": "~/bridge.log"}, [], "log_file", "{home}/bridge.log"),
    ('[bridge]\nlog_file = "~/bridge.log"\n', {}, [], "log_file", "{home}/bridge.log"),
    ("", {}, ["--rule", "~/r.py"], "rules.command_line", ("{home}/r.py",)),
    ('[rules]\nfiles = ["~/r.py"]\n', {}, [], "rules.files", ("{home}/r.py",)),
    ("", {}, ["--system-prompt-file", "~/p.md"], "system_prompt.text", "from home"),
    ("", {"ACP_BRIDGE_SYSTEM_PROMPT_FILE": "~/p.md"}, [], "system_prompt.text", "from home"),
    ('[system_prompt]\nfile = "~/p.md"\n', {}, [], "system_prompt.text", "from home"),
    ('[agent]\ncwd = "~"\n', {}, [], "agent.cwd", "{home}"),
    ("", {"ACP_BRIDGE_CONFIG": "~/home.toml"}, [], "capture.path", "{home}/from-home-config.jsonl"),
    # Only a leading ~ is a home: nothing else a file name may hold is expanded.
    ("", {}, ["--capture", "$HOME/x~/{pid}.jsonl"], "capture.path", "$HOME/x~/{{pid}}.jsonl"),
]


@pytest.mark.parametrize(("toml", "env", "args", "key", "expected"), HOME_CASES)
def test_a_leading_tilde_is_the_home_folder_wherever_a_path_is_given(
        seen: list[Config], tmp_path: Path, toml: str, env: dict[str, str], args: list[str], key: str,
        expected: Any) -> None:
    """An editor starts the bridge with no shell, and nobody expands a variable's value or a
    config file's: `--capture ~/acp/...` in an editor's settings made a folder named `~`."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "p.md").write_text("from home\n")
    (home / "home.toml").write_text('[capture]\npath = "from-home-config.jsonl"\n')
    (home / "r.py").write_text("from acp_bridge.rules import Rule\nclass Home(Rule):\n    pass\nrules = [Home()]\n")
    config = tmp_path / "c.toml"
    config.write_text(toml)
    command = ["run", *([] if "ACP_BRIDGE_CONFIG" in env else ["-c", str(config)]), *args, "--", "agent"]
    result = CliRunner().invoke(main, command, env={"HOME": str(home), **env})
    assert result.exit_code == 0, result.output
    filled = (tuple(item.format(home=home) for item in expected) if isinstance(expected, tuple)
              else expected.format(home=home))
    assert field_value(seen[-1], key) == filled
