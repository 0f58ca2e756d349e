"""The command group: usage errors, --version, the bare command, and the short form
`acp-bridge [RUN OPTIONS] -- AGENT` for `acp-bridge run [RUN OPTIONS] -- AGENT`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from acp_bridge.commands import COMMANDS, main
from tests.cli_helpers import run_cli_in_process
from tests.conftest import agent_cmd, keeper


def test_version() -> None:
    from acp_bridge import __version__

    result = CliRunner().invoke(main, ["--version"])
    assert result.output == f"acp-bridge, version {__version__}\n"


@pytest.mark.parametrize(("args", "message"), [
    (["run", "--system-prompt-mode", "loud", "--", "x"],
     "acp-bridge: Invalid value for '--system-prompt-mode': 'loud' is not one of 'append', 'override'. "
     "(see 'acp-bridge run --help')\n"),
    (["nope"], "acp-bridge: No such command 'nope'. To run it as the agent: acp-bridge -- nope "
     "(see 'acp-bridge --help')\n"),
    # typing habits: a command almost spelled, an agent's name where a command goes
    (["stat"], "acp-bridge: No such command 'stat'. Did you mean 'stats'? (see 'acp-bridge --help')\n"),
    (["chek", "x.jsonl"], "acp-bridge: No such command 'chek'. Did you mean 'check'? (see 'acp-bridge --help')\n"),
    (["my-agent", "--acp", "a b", "\x1b"], "acp-bridge: No such command 'my-agent'. To run it as the agent: "
     "acp-bridge -- my-agent --acp 'a b' '\\u001b' (see 'acp-bridge --help')\n"),
])
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args, prog_name="acp-bridge")
    assert (result.exit_code, result.stderr) == (2, message)


def test_bare_command_prints_help_and_exits_0() -> None:
    result = CliRunner().invoke(main, [], prog_name="acp-bridge")
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: acp-bridge [OPTIONS] COMMAND [ARGS]...")
    assert "demo" in result.stdout and result.stderr == ""


async def test_dash_dash_alone_is_short_for_run() -> None:
    result = await run_cli_in_process(["--", *agent_cmd("echo", "--exit", "4")], b'{"x":1}\n')
    assert (result.returncode, result.stdout) == (4, b'{"x":1}\n')


# -- the short form: `acp-bridge [RUN OPTIONS] -- AGENT` is `acp-bridge run [RUN OPTIONS] -- AGENT` --

def short_form_options(tmp_path: Path) -> dict[str, list[list[str]]]:
    """Each option of `run`, by parameter name, in the spellings a user may give it."""
    config = tmp_path / "c.toml"
    config.write_text("[relay]\ngrace_seconds = 1\n")
    prompt = tmp_path / "prompt.md"
    prompt.write_text("from a file\n")
    log = str(tmp_path / "bridge.log")
    rule = tmp_path / "rule.py"
    rule.write_text("from acp_bridge.rules import Rule\nrules = [Rule()]\n")
    return {
        "config_file": [["-c", str(config)], ["--config", str(config)], [f"--config={config}"], [f"-c{config}"]],
        "capture": [["--capture", "x-{pid}.jsonl"], ["--capture=x.jsonl"]],
        "system_prompt": [["--system-prompt", "Be brief."]],
        "system_prompt_file": [["--system-prompt-file", str(prompt)]],
        "system_prompt_mode": [["--system-prompt-mode", "override"]],
        "unlock_legacy_agent": [["--unlock-legacy-agent"]],
        "no_suggestions": [["--no-suggestions"]],
        "no_health": [["--no-health"]],
        "strict": [["--strict"]],
        "log_file": [["--log-file", log]],
        "verbose": [["-v"], ["-vv"], ["--verbose"]],
        "quiet": [["-q"], ["--quiet"]],
        "otlp": [["--otlp"]],
        "otlp_content": [["--otlp-content"]],
        "rule_files": [["--rule", str(rule)], [f"--rule={rule}"]],
        "no_commands_mirror": [["--no-commands-mirror"]],
        "close_tool_calls": [["--close-tool-calls"]],
        "stray_output": [["--stray-output", "stderr"], ["--stray-output=stderr"]],
    }


def test_the_short_form_takes_every_run_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_bridge.commands import run

    seen: list[Any] = []
    monkeypatch.setattr(run, "run_and_report", keeper(seen))
    monkeypatch.setattr(run, "setup_logging", lambda config: None)
    monkeypatch.chdir(tmp_path)
    options = short_form_options(tmp_path)
    run_options = {p.name for p in run.run.params if isinstance(p, click.Option)}
    assert set(options) == run_options  # a new option of `run` must be tried here too
    runner = CliRunner()
    assert runner.invoke(main, ["run", "--", "my-agent", "--flag"]).exit_code == 0
    plain = seen[-1]
    for spellings in options.values():
        for spelling in spellings:
            long = runner.invoke(main, ["run", *spelling, "--", "my-agent", "--flag"])
            short = runner.invoke(main, [*spelling, "--", "my-agent", "--flag"])
            assert (long.exit_code, short.exit_code) == (0, 0), (spelling, long.stderr, short.stderr)
            assert seen[-1] == seen[-2] != plain, spelling
    # several at once, and the agent from the config file (no `--` at all)
    config = tmp_path / "agent.toml"
    config.write_text('[agent]\ncommand = ["my-agent"]\n')
    result = runner.invoke(main, ["-v", "--capture", "x.jsonl", "--strict", "-c", str(config)])
    assert result.exit_code == 0, result.stderr
    assert (seen[-1].verbosity, seen[-1].capture.path, seen[-1].strict, seen[-1].agent.command) == (
        1, "x.jsonl", True, ("my-agent",))


AFTER_DASHES = "If it is the agent's, put the agent's command line after `--`: acp-bridge run [OPTIONS] -- "


@pytest.mark.parametrize(("args", "agent"), [
    (["run", "my-agent", "--acp"], "my-agent --acp"),
    (["-v", "my-agent", "--acp"], "my-agent --acp"),  # the short form
    (["run", "-c", "f.toml", "--capture=x", "-cg.toml", "-q", "my-agent", "--acp", "x"], "my-agent --acp x"),
    (["run", "--acp", "--", "my-agent"], "my-agent --acp"),
    (["run", "-v", "--acp"], "AGENT --acp"),
    (["--acp", "--", "my-agent"], "my-agent --acp"),  # not an option of run: the group's usage error
])
def test_an_unknown_option_of_run_shows_the_agent_after_dashes(args: list[str], agent: str) -> None:
    result = CliRunner().invoke(main, args, prog_name="acp-bridge")
    where = "acp-bridge run" if args[0] != "--acp" else "acp-bridge"
    assert (result.exit_code, result.stderr) == (
        2, f"acp-bridge: No such option '--acp'. {AFTER_DASHES}{agent} (see '{where} --help')\n")


def test_the_command_listing_shows_each_summary_whole() -> None:
    result = CliRunner().invoke(main, ["--help"], prog_name="acp-bridge", terminal_width=80)
    assert result.stdout.split("Commands:\n")[1] == (
        "  check         Check captures for problems and whether the bridge is needed.\n"
        "  check-config  Validate a config FILE and print the effective settings.\n"
        "  demo          Show the bridge at work, with nothing else installed.\n"
        "  diff          Compare two captures, session by session and turn by turn.\n"
        "  doctor        Start an agent through the bridge and say whether it works.\n"
        "  drive         Play a capture's client side to AGENT and compare.\n"
        "  export        Write a capture as one self-contained HTML page.\n"
        "  mcp           Serve captures to an MCP client on stdin/stdout.\n"
        "  replay        Serve a capture as the agent it recorded, or re-run the rules.\n"
        "  rules         List the rules `run` would apply, in their order.\n"
        "  run           Run AGENT behind the bridge, relaying stdio to it.\n"
        "  setup         Put the bridge in front of an agent in an editor's settings.\n"
        "  show          Print a capture, one line per message.\n"
        "  stats         Summarise a capture: messages, bytes, latency, rules.\n"
        "  ui            Serve a live inspector of captures in the browser.\n")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_commands_help_opens_with_one_short_sentence(name: str) -> None:
    # what a newcomer reads first under `Usage:`; the details come in the paragraphs after it
    first = " ".join((main.load(name).help or "").split("\n\n")[0].split())
    assert first.endswith(".") and first.count(". ") == 0 and len(first) <= 110, first


def test_a_command_without_a_summary_is_listed_with_its_first_sentence_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(main.get_command(click.Context(main), "check"), "short_help", None)
    result = CliRunner().invoke(main, ["--help"], prog_name="acp-bridge", terminal_width=80)
    assert result.stdout.split("Commands:\n")[1].startswith(
        "  check         Check captures for protocol problems and say whether each pair\n"
        "                still needs the bridge.\n"
        "  check-config  ")


@pytest.mark.parametrize(("args", "message"), [
    (["--capture"], "acp-bridge: Option '--capture' requires an argument."),
    (["--bogus", "--", "x"], f"acp-bridge: No such option '--bogus'. {AFTER_DASHES}x --bogus (see"),
    (["run", "--verbos", "--", "x"], "acp-bridge: No such option '--verbos'. Did you mean '--verbose'? (see"),
    (["-v"], "acp-bridge: no agent command"),
])
def test_the_short_form_reports_usage_errors_in_one_line(args: list[str], message: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("acp_bridge.commands.run._stdin_is_a_terminal", lambda: True)  # else: a chain's component
    result = CliRunner().invoke(main, args, prog_name="acp-bridge")
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


async def test_the_short_form_with_options_runs_the_bridge(tmp_path: Path) -> None:
    capture = tmp_path / "x.jsonl"
    result = await run_cli_in_process(["--capture", str(capture), "-v", "--", *agent_cmd("echo")], b'{"x":1}\n')
    assert (result.returncode, result.stdout) == (0, b'{"x":1}\n'), result.stderr
    assert b"INFO: agent started" in result.stderr
    assert b'"type":"header"' in capture.read_bytes()  # the capture was written


# -- each command in its own module, imported only when asked for --

def test_each_command_is_defined_in_the_module_the_group_names() -> None:
    assert {name: main.get_command(click.Context(main), name).callback.__module__  # type: ignore[union-attr]
            for name in COMMANDS} == {
        "run": "acp_bridge.commands.run",
        "check-config": "acp_bridge.commands.check_config",
        "show": "acp_bridge.commands.show",
        "stats": "acp_bridge.commands.stats",
        "export": "acp_bridge.commands.export",
        "check": "acp_bridge.commands.check",
        "replay": "acp_bridge.commands.replay",
        "diff": "acp_bridge.commands.diff",
        "drive": "acp_bridge.commands.drive",
        "rules": "acp_bridge.commands.rules",
        "demo": "acp_bridge.commands.demo",
        "ui": "acp_bridge.commands.ui",
        "mcp": "acp_bridge.commands.mcp",
        "setup": "acp_bridge.commands.setup",
        "doctor": "acp_bridge.commands.doctor",
    }


IMPORTED = {
    "stats": ["captures", "stats"],
    "check-config": ["check_config"],
    "diff": ["captures", "diff"],
    "drive": ["captures", "drive"],
    "mcp": ["captures", "mcp", "paths"],  # captures: its one way to fail; paths: `~` in its folders
    "replay": ["captures", "output_file", "paths", "replay", "run"],  # `replay --rules` takes `run`'s options; captures: reading one
    "setup": ["paths", "run", "setup"],  # `run`'s options, copied
    "doctor": ["doctor", "paths", "run", "setup"],  # `run`'s options and config layering; setup's paths of the bridge and agent
}

# In one fresh interpreter, each command in turn as if it were the first: the commands
# modules the group's own import left out are forgotten before each.
IMPORTS_OF_EACH = """\
import sys
from acp_bridge.commands import main
ours = lambda: {m for m in sys.modules if m.startswith('acp_bridge.commands.')}
with_the_group = ours()
for command in sys.argv[1:]:
    for name in ours() - with_the_group:
        del sys.modules[name]
    try:
        main([command, '--help'])
    except SystemExit:
        pass
    print('imports:', command, sorted(m.rsplit('.', 1)[1] for m in ours()))
"""


def test_a_command_imports_no_other_commands_module() -> None:
    out = subprocess.run([sys.executable, "-c", IMPORTS_OF_EACH, *IMPORTED], check=True, capture_output=True).stdout
    said = [line.decode() for line in out.splitlines() if line.startswith(b"imports: ")]
    assert said == [f"imports: {command} {imported!r}" for command, imported in IMPORTED.items()]
