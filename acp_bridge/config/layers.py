"""The layers above the file: what the command line and the `ACP_BRIDGE_*` environment say,
merged over the file's settings (command line > environment > file > default).

Owns: `Overrides`, `apply_overrides`, `settle` and `load_config`. Must never: start anything.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from acp_bridge.config.model import Config, TelemetryConfig
from acp_bridge.errors import ConfigError

T = TypeVar("T")


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read and validate a TOML file (None: the defaults), as it takes effect on its own
    (`settle`d). Raises ConfigError."""
    from acp_bridge.config.file import read_config

    return settle(read_config(path))


def settle(config: Config) -> Config:
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
        from acp_bridge.config.file import read_prompt_file

        return read_prompt_file(self.path, self.label)


@dataclass(frozen=True)
class Overrides:
    """What one layer above the file says: the `ACP_BRIDGE_*` environment, or the command
    line. None: this layer does not say. `over` stacks two layers and `apply_overrides` puts
    the result over the file's settings, so the order is written out once:
    `apply_overrides(file, command_line.over(environment))`.

    The system prompt is one setting however it is given: text from one layer replaces a file
    from a lower one and the other way round. It is checked (text) or read (a file) only once
    it is known to take effect, so a lower layer's prompt that is replaced never matters.
    """

    agent_command: tuple[str, ...] | None = None
    capture_path: str | None = None
    system_prompt: PromptText | PromptFile | None = None
    system_prompt_mode: str | None = None
    suggestions_enabled: bool | None = None
    unlock_legacy_agent: bool | None = None
    health_enabled: bool | None = None
    strict: bool | None = None
    log_file: str | None = None
    verbosity: int | None = None
    otlp: bool | None = None
    otlp_content: bool | None = None

    def over(self, lower: Overrides) -> Overrides:
        """This layer on top of `lower`: each setting this one gives replaces lower's."""
        return Overrides(
            agent_command=_given(self.agent_command, lower.agent_command),
            capture_path=_given(self.capture_path, lower.capture_path),
            system_prompt=_given(self.system_prompt, lower.system_prompt),
            system_prompt_mode=_given(self.system_prompt_mode, lower.system_prompt_mode),
            suggestions_enabled=_given(self.suggestions_enabled, lower.suggestions_enabled),
            unlock_legacy_agent=_given(self.unlock_legacy_agent, lower.unlock_legacy_agent),
            health_enabled=_given(self.health_enabled, lower.health_enabled),
            strict=_given(self.strict, lower.strict),
            log_file=_given(self.log_file, lower.log_file),
            verbosity=_given(self.verbosity, lower.verbosity),
            otlp=_given(self.otlp, lower.otlp),
            otlp_content=_given(self.otlp_content, lower.otlp_content),
        )


def apply_overrides(config: Config, given: Overrides) -> Config:
    """`config` with each setting `given` gives replaced. Raises ConfigError for a system
    prompt that is empty or cannot be read. Not `settle`d: that comes after the last layer."""
    text = given.system_prompt.read() if given.system_prompt is not None else config.system_prompt.text
    return dataclasses.replace(
        config,
        agent=dataclasses.replace(config.agent, command=_given(given.agent_command, config.agent.command)),
        suggestions=dataclasses.replace(
            config.suggestions,
            enabled=_given(given.suggestions_enabled, config.suggestions.enabled),
            unlock_legacy_agent=_given(given.unlock_legacy_agent, config.suggestions.unlock_legacy_agent),
        ),
        system_prompt=dataclasses.replace(
            config.system_prompt, text=text, mode=_given(given.system_prompt_mode, config.system_prompt.mode)),
        capture=dataclasses.replace(config.capture, path=_given(given.capture_path, config.capture.path)),
        health=dataclasses.replace(config.health, enabled=_given(given.health_enabled, config.health.enabled)),
        strict=_given(given.strict, config.strict),
        log_file=_given(given.log_file, config.log_file),
        verbosity=_given(given.verbosity, config.verbosity),
        telemetry=_telemetry(config.telemetry, given),
    )


def _telemetry(telemetry: TelemetryConfig, given: Overrides) -> TelemetryConfig:
    """`--otlp-content` asks for telemetry too; ACP_BRIDGE_OTLP=0 turns both off."""
    content = _given(given.otlp_content, telemetry.content)
    if given.otlp is False:  # said off (--otlp given false, ACP_BRIDGE_OTLP=0): off, content too
        enabled = False
    else:
        enabled = _given(given.otlp, telemetry.enabled) or bool(given.otlp_content)
    return dataclasses.replace(telemetry, enabled=enabled, content=content and enabled)


def _given(value: T | None, otherwise: T) -> T:
    return otherwise if value is None else value


