"""The settings of one run (config/model.py): its digest, and what check-config prints of it."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from click.testing import CliRunner

from acp_bridge.commands import main


def test_digest_survives_a_command_line_that_is_not_utf8() -> None:
    """An agent argument such as a Latin-1 file name is a legitimate argv; the capture
    header's config digest must not fail on it."""
    from acp_bridge.config import AgentConfig, Config

    config = Config(agent=AgentConfig(command=("agent", os.fsdecode(b"caf\xe9.txt"))))
    assert len(config.digest()) == 16
    assert config.digest() != Config(agent=AgentConfig(command=("agent", "cafe.txt"))).digest()


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
