"""`[agent] command` as one string is split as a shell would (shlex.split), never taken whole
as a program name; a string a shell could not split is a configuration error (exit 2)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from acp_bridge.commands.cli import main
from tests.conftest import agent_cmd, run_cli


def toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string for what these tests write


@pytest.mark.parametrize(("command", "argv"), [
    ("my-agent --flag", ["my-agent", "--flag"]),
    ("my-agent", ["my-agent"]),
    ("  /opt/My\\ Agent/bin/agent --model 'big one' \"--x=1 2\"  ",
     ["/opt/My Agent/bin/agent", "--model", "big one", "--x=1 2"]),
])
def test_check_config_shows_the_split_command(tmp_path: Path, command: str, argv: list[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f"[agent]\ncommand = {toml_string(command)}\n")
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["agent"]["command"] == argv


@pytest.mark.parametrize(("command", "problem"), [
    ("my-agent 'unclosed", "cannot be split as a shell would: No closing quotation"),
    ("   ", "must not be empty"),
    ("''", "the program (the first item) is an empty string"),
])
def test_a_string_that_does_not_split_is_exit_2(tmp_path: Path, command: str, problem: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f"[agent]\ncommand = {toml_string(command)}\n")
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 2
    assert result.stderr == f"acp-bridge: {config}: agent.command: {problem}\n"


async def test_run_starts_the_split_command(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f"[agent]\ncommand = {toml_string(shlex.join(agent_cmd('echo')))}\n")
    result = await run_cli(["run", "-c", str(config)], b'{"x":1}\n')
    assert (result.returncode, result.stdout) == (0, b'{"x":1}\n'), result.stderr
