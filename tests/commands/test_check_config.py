"""`acp-bridge check-config FILE`: the effective settings, secrets masked; an invalid file is exit 2."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from acp_bridge.commands import main


def test_check_config_prints_effective_settings(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[suggestions]\nunlock_legacy_agent = true\n[system_prompt]\ntext = "secret"\n')
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 0
    settings = orjson.loads(result.stdout)
    assert settings["suggestions"] == {"enabled": True, "unlock_legacy_agent": True}
    assert settings["system_prompt"]["text"] == "<6 characters>"


def test_check_config_rejects_invalid(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[agent]\ncommand = 5\n")
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 2
    assert "agent.command: expected an array or a string, got int" in result.stderr
