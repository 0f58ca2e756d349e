"""Helpers of the config tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_bridge.config import Config
from acp_bridge.config.file import read_config
from acp_bridge.errors import ConfigError


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in stderr
    return lines[0]


def field_value(config: Config, path: str) -> Any:
    value: Any = config
    for name in path.split("."):
        value = getattr(value, name)
    return value


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "prompt.md").write_text("From a file.\n")
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def refused(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        read_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")
