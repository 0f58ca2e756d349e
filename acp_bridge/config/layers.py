"""The layers above the file: what the command line and the `ACP_BRIDGE_*` environment say,
merged over the file's settings (command line > environment > file > default).

Owns: `Overrides`, `apply_overrides`, `effective` and `load_config`. Must never: start anything.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_bridge.config.model import Config
from acp_bridge.errors import ConfigError


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read and validate a TOML file (None: the defaults), as it takes effect on its own
    (made `effective`). Raises ConfigError."""
    from acp_bridge.config.file import read_config

    return effective(read_config(path))


def effective(config: Config) -> Config:
    """The effective settings, once every layer has been merged.

    `strict` (`--strict`, `ACP_BRIDGE_STRICT`, `[bridge] strict`) asks for every strictness
    at once (spec/interface.md), so it implies `system_prompt.strict`; `system_prompt.strict`
    alone only refuses the override-to-append downgrade. Apply this after the last layer,
    not to each one: a higher layer may still turn `strict` off (`ACP_BRIDGE_STRICT=0`).
    """
    if config.strict and not config.system_prompt.strict:
        return dataclasses.replace(config, system_prompt=dataclasses.replace(config.system_prompt, strict=True))
    return config


@dataclass(frozen=True)
class PromptText:
    """System prompt text given above the file; `label` is how (`--system-prompt`, ...)."""

    text: str
    label: str

    def read(self) -> str:
        if not self.text.strip():
            raise ConfigError(f"{self.label}: is empty")
        try:
            self.text.encode("utf-8")
        except UnicodeEncodeError:  # argv bytes that are not UTF-8 arrive as lone surrogates
            raise ConfigError(f"{self.label}: is not valid UTF-8 text") from None
        return self.text


@dataclass(frozen=True)
class PromptFile:
    """A system prompt file given above the file; `label` is how (`--system-prompt-file`, ...)."""

    path: Path
    label: str

    def read(self) -> str:
        from acp_bridge.config.text_files import read_prompt_file

        return read_prompt_file(self.path, self.label)


Prompt = PromptText | PromptFile


@dataclass(frozen=True)
class Overrides:
    """What one layer above the file says: the `ACP_BRIDGE_*` environment, or the command
    line, as the settings it gives by their dotted field of `Config` (`"capture.path"`,
    `"strict"`). A None value is dropped: this layer does not say. `over` stacks two layers
    and `apply_overrides` puts the result over the file's settings, so the order is written
    out once: `apply_overrides(file, command_line.over(environment))`.

    A new setting is one more key where a layer is read (commands/run.py), nothing here.
    A key that names no field of `Config` is a bug, raised by `apply_overrides`.

    The system prompt is one setting however it is given: `"system_prompt.text"` holds a
    `PromptText` or a `PromptFile`, so text from one layer replaces a file from a lower one
    and the other way round. It is checked (text) or read (a file) only once it is known to
    take effect, so a lower layer's prompt that is replaced never matters.
    """

    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", {key: value for key, value in self.settings.items()
                                              if value is not None})

    def over(self, lower: Overrides) -> Overrides:
        """This layer on top of `lower`: each setting this one gives replaces lower's."""
        return Overrides({**lower.settings, **self.settings})


def apply_overrides(config: Config, given: Overrides) -> Config:
    """`config` with each setting `given` gives replaced. Raises ConfigError for a system
    prompt that is empty or cannot be read, and ValueError for a key that names no setting
    (a bug). Not made `effective`: that comes after the last layer."""
    for key, value in given.settings.items():
        if isinstance(value, Prompt):
            value = value.read()
        config = _replace(config, key, key.split("."), value)
    return _telemetry(config, given.settings)


def _replace(table: Any, key: str, path: list[str], value: Any) -> Any:
    """`table` with the field at `path` (what is left of `key`) set to `value`, copied along
    the path."""
    name, *rest = path
    names = {f.name for f in dataclasses.fields(table)} if dataclasses.is_dataclass(table) else set()
    if name not in names:
        raise ValueError(f"{key!r} names no setting of Config")
    current = getattr(table, name)
    if rest:
        value = _replace(current, key, rest, value)
    elif dataclasses.is_dataclass(current):
        raise ValueError(f"{key!r} names a table of Config, not a setting")
    return dataclasses.replace(table, **{name: value})


def _telemetry(config: Config, given: Mapping[str, Any]) -> Config:
    """`--otlp-content` asks for telemetry too; ACP_BRIDGE_OTLP=0 turns both off."""
    telemetry = config.telemetry
    if given.get("telemetry.enabled") is False:  # said off (ACP_BRIDGE_OTLP=0): off, content too
        enabled = False
    else:
        enabled = telemetry.enabled or bool(given.get("telemetry.content"))
    return dataclasses.replace(config, telemetry=dataclasses.replace(
        telemetry, enabled=enabled, content=telemetry.content and enabled))
