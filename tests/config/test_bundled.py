"""The ready-made configs in configs/: each one is valid and means what its comments say.

`acp-bridge check-config FILE` is what a user runs on them, so that is what is tested: exit 0,
nothing on stderr, and the effective settings it prints (exact values for the keys each file
exists to set).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from acp_bridge.commands import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FILES = sorted(CONFIGS.glob("*.toml"))

# file name -> {"table.key": exact effective value}
EXPECTED: dict[str, dict[str, Any]] = {
    "claude-new-client.toml": {
        "agent.command": ["claude-agent-acp"],
        "agent.env": {"CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "<redacted>"},  # names only
        "suggestions.enabled": True,
        "suggestions.unlock_legacy_agent": True,
        "system_prompt.mode": "append",
        "system_prompt.client_prompt": "merge",
        "system_prompt.on_unsupported": "auto",
        "capture.path": None,
    },
    "air-new-agent.toml": {
        "agent.command": [],  # the agent comes after `--`
        "suggestions.enabled": True,
        "suggestions.unlock_legacy_agent": False,
        "system_prompt.text": None,
        "capture.path": None,
    },
    "capture-debug.toml": {
        "agent.command": [],
        "suggestions.enabled": True,
        "suggestions.unlock_legacy_agent": False,
        "system_prompt.text": None,
        "capture.path": str(CONFIGS / "captures/acp-{time}-{pid}.jsonl"),
        "capture.redact": ["/params/_meta/token", "/result/_meta/apiKey"],
        "capture.include_system_prompt": False,
        "capture.required": False,
        "relay.parse_limit_mib": 16,
        "relay.grace_seconds": 5.0,
    },
    "no-usage-updates.toml": {  # the [[rewrite]] table that keeps usage_update from a strict client
        "rewrite": [{"name": "no-usage-updates", "direction": "to-client", "method": "session/update",
                     "update": "usage_update", "where": {}, "drop": True, "set": {}, "remove": [], "line": 12}],
        "rules.files": [],
    },
    "strict-conformance.toml": {
        "strict": True,  # [bridge] strict: every strictness at once
        "suggestions.unlock_legacy_agent": False,
        "system_prompt.mode": "override",
        "system_prompt.strict": True,
        "system_prompt.on_unsupported": "error",
        "system_prompt.client_prompt": "replace",
        "capture.path": str(CONFIGS / "captures/conformance-{time}-{pid}.jsonl"),
        "capture.required": True,
        "relay.parse_limit_mib": 64,
        "relay.grace_seconds": 2.0,
    },
}

# check-config masks the prompt text as "<N characters>"
MASKED_TEXT = re.compile(r"<[1-9][0-9]* characters>")
WITH_PROMPT = {"claude-new-client.toml", "strict-conformance.toml"}


def check_config(path: Path) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["check-config", str(path)])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    settings: dict[str, Any] = json.loads(result.stdout)
    return settings


def test_every_config_has_expectations() -> None:
    """A new file in configs/ must come with the values it is meant to set."""
    assert {f.name for f in FILES} == set(EXPECTED)


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_config_is_valid_and_sets_what_it_says(path: Path) -> None:
    """check-config exits 0 and prints the effective values the file's comments promise."""
    settings = check_config(path)
    assert settings["source"] == str(path)
    for dotted, expected in EXPECTED[path.name].items():
        value = settings
        for key in dotted.split("."):
            value = value[key]
        assert value == expected, dotted
    text = settings["system_prompt"]["text"]
    if path.name in WITH_PROMPT:
        assert MASKED_TEXT.fullmatch(text), text
    else:
        assert text is None


def test_what_the_comments_say_could_go_in_a_file_can(tmp_path: Path) -> None:
    """strict-conformance.toml says -vv and --log-file could go in [bridge] as `verbosity = 2`
    and `log_file = "..."`; air-new-agent.toml shows `[agent] command` commented out. Done as
    the comments say, check-config takes them (docs/configuration.md and `run --help` name the same keys)."""
    strict = (CONFIGS / "strict-conformance.toml").read_text()
    assert "verbosity = 2" in strict and 'log_file = "..."' in strict
    edited = tmp_path / "strict.toml"
    edited.write_text(strict.replace("strict = true\n", 'strict = true\nverbosity = 2\nlog_file = "bridge.log"\n', 1))
    settings = check_config(edited)
    assert (settings["verbosity"], settings["log_file"], settings["strict"]) == (2, str(tmp_path / "bridge.log"), True)

    air = (CONFIGS / "air-new-agent.toml").read_text()
    assert '# [agent]\n# command = ["my-agent", "--acp"]' in air
    uncommented = tmp_path / "air.toml"
    uncommented.write_text(air.replace('# [agent]\n# command = ["my-agent", "--acp"]',
                                       '[agent]\ncommand = ["my-agent", "--acp"]'))
    assert check_config(uncommented)["agent"]["command"] == ["my-agent", "--acp"]
