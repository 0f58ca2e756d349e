"""`acp-bridge run --help` names every ACP_BRIDGE_* variable the code reads and, for each
option, its config key, and those keys are keys of the file."""

from __future__ import annotations

import re
from pathlib import Path

import click
from click.testing import CliRunner

from acp_bridge.commands import cli
from acp_bridge.commands.cli import main
from acp_bridge.config.schema import schema

PACKAGE = Path(cli.__file__).parent
VARIABLE = re.compile(r"\bACP_BRIDGE_[A-Z][A-Z0-9_]*")


def run_help() -> str:
    result = CliRunner().invoke(main, ["run", "--help"], terminal_width=80)
    assert result.exit_code == 0
    return " ".join(result.output.split())  # as read, not as wrapped


def variables_in_the_code() -> set[str]:
    found: set[str] = set()
    for source in PACKAGE.rglob("*.py"):
        found.update(VARIABLE.findall(source.read_text(encoding="utf-8")))
    return found


def test_run_help_names_every_variable_the_code_reads() -> None:
    variables = variables_in_the_code()
    assert "ACP_BRIDGE_CONFIG" in variables and len(variables) >= 9  # the grep works
    shown = run_help()
    missing = sorted(v for v in variables if f"[env var: {v}]" not in shown)
    assert missing == []


def test_each_option_with_a_variable_shows_it() -> None:
    shown = run_help()
    for param in cli.run.params:
        if isinstance(param, click.Option) and param.envvar:
            assert f"[env var: {param.envvar}]" in shown, param.name


def test_run_help_names_the_config_key_of_each_option_and_the_keys_exist() -> None:
    shown = run_help()
    options_part = shown.split("Settings:")[0]  # the epilog explains the notation
    keys = re.findall(r"\[config: ([a-z_]+)\.([a-z_]+)", options_part)
    options = [p for p in cli.run.params if isinstance(p, click.Option) and p.name != "config_file"]
    assert len(keys) == len(options)  # every option but -c itself has a key in the file
    tables = schema()
    for table, key in keys:
        assert key in tables[table], f"{table}.{key}"
    assert "the command line wins, then the environment, then the file" in shown


def test_an_invalid_value_names_the_spelling_that_gave_it() -> None:
    runner = CliRunner()
    from_env = runner.invoke(main, ["run", "--", "x"], env={"ACP_BRIDGE_SYSTEM_PROMPT_MODE": "loud"})
    assert from_env.exit_code == 2
    assert from_env.stderr.startswith("acp-bridge: Invalid value for 'ACP_BRIDGE_SYSTEM_PROMPT_MODE': 'loud'")
    from_line = runner.invoke(main, ["run", "--system-prompt-mode", "loud", "--", "x"])
    assert from_line.stderr.startswith("acp-bridge: Invalid value for '--system-prompt-mode': 'loud'")
