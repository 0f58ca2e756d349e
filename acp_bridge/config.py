"""Configuration: the frozen `Config`, and the layers above the file merged into it.

Owns: the settings of spec/interface.md as dataclasses (each rule's own settings live beside
the rule), their defaults, and the precedence command line > `ACP_BRIDGE_*` environment >
file > default (`Overrides`, `apply_overrides`, `settle`), and the check of an agent command
line that the command line and the file share. Reading and checking the TOML file is
`config_file.py` (a run without a file does not load it); the file's keys are derived from
these dataclasses there. Must never: start anything.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

# Each rule's settings live beside the rule (the core never imports this module).
from acp_bridge.core.rewrites.suggestions import SuggestionsConfig as SuggestionsConfig
from acp_bridge.core.rewrites.system_prompt_config import CLIENT_PROMPT_POLICIES as CLIENT_PROMPT_POLICIES
from acp_bridge.core.rewrites.system_prompt_config import ON_UNSUPPORTED as ON_UNSUPPORTED
from acp_bridge.core.rewrites.system_prompt_config import SYSTEM_PROMPT_MODES as SYSTEM_PROMPT_MODES
from acp_bridge.core.rewrites.system_prompt_config import SystemPromptConfig as SystemPromptConfig
from acp_bridge.errors import ConfigError

T = TypeVar("T")
REDACTED = "<redacted>"
IN_FILE = "in_file"  # field metadata: False for a field of `Config` the file cannot set


@dataclass(frozen=True)
class AgentConfig:
    """`[agent]`: the agent's command line, the environment added to ours, its working folder."""

    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True)
class CaptureConfig:
    """`[capture]` (docs/capture-format.md): where the traffic is written, and what is masked."""

    path: str | None = None  # a template: {time} and {pid} are filled in
    redact: tuple[str, ...] = ()
    include_system_prompt: bool = False
    required: bool = False


@dataclass(frozen=True)
class RelayConfig:
    """`[relay]`: the longest line parsed (longer ones pass in pieces, unread), and the grace
    the agent gets at the end before SIGTERM."""

    parse_limit_mib: int = 16
    grace_seconds: float = 5.0


@dataclass(frozen=True)
class TelemetryConfig:
    """[telemetry]: OpenTelemetry export (docs/telemetry.md); the OTEL_* variables win."""

    enabled: bool = False
    content: bool = False  # prompt text, tool input and output: off unless asked for
    endpoint: str | None = None  # OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT wins)
    protocol: str | None = None  # http/protobuf | grpc (OTEL_EXPORTER_OTLP_PROTOCOL wins)
    flush_seconds: float = 2.0  # the longest the bridge's exit waits for the collector


@dataclass(frozen=True)
class HealthConfig:
    """`[health]`: the protocol watchdog (docs/health.md). Thresholds are seconds; 0 turns
    that one off."""

    enabled: bool = True
    request_seconds: float = 60.0  # a client request not answered by the agent
    prompt_seconds: float = 600.0  # session/prompt, counted from the agent's last output
    client_request_seconds: float = 120.0  # an agent request (fs, terminal) not answered by the client
    cancel_seconds: float = 10.0  # session/cancel until the prompt ends as cancelled
    methods: Mapping[str, float] = field(default_factory=dict)  # per-method thresholds, either side


@dataclass(frozen=True)
class Config:
    """The settings of one run: a dataclass per table of the file, then [bridge]'s own.
    (Each dataclass here has a docstring: one without is given a signature built with
    `inspect` as it is defined, a cost to every start-up.)"""

    agent: AgentConfig = AgentConfig()
    suggestions: SuggestionsConfig = SuggestionsConfig()  # noqa: RUF009 - frozen, so shared safely
    system_prompt: SystemPromptConfig = SystemPromptConfig()  # noqa: RUF009 - frozen, so shared safely
    capture: CaptureConfig = CaptureConfig()
    relay: RelayConfig = RelayConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    health: HealthConfig = HealthConfig()
    # Every strictness at once: a rule that raises is fatal (tests, conformance runs), and
    # `settle` makes it imply `system_prompt.strict` (no silent downgrade either).
    strict: bool = False
    log_file: str | None = None
    verbosity: int = 0  # -1 quiet, 0 warnings, 1 rewrites, 2 frames
    source: str | None = field(default=None, metadata={IN_FILE: False})  # the config file, if any

    def digest(self) -> str:
        """A short, stable fingerprint of the effective settings (for the capture header)."""
        import hashlib  # here: loading OpenSSL costs every `run` a few milliseconds

        try:
            blob = orjson.dumps(self.as_dict(), option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            # A command-line value that is not UTF-8 (an agent argument such as a file name
            # in another encoding reaches Python as a lone surrogate): orjson refuses it.
            import json

            blob = json.dumps(self.as_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["agent"]["env"] = dict(self.agent.env)
        data["health"]["methods"] = dict(self.health.methods)
        return data

    def printable(self) -> dict[str, Any]:
        """`as_dict` for people: what `check-config` prints. Secrets are masked: each
        `agent.env` value becomes "<redacted>" (the names stay), and the system prompt text
        becomes "<N characters>"."""
        data = self.as_dict()
        data["agent"]["env"] = dict.fromkeys(self.agent.env, REDACTED)
        if self.system_prompt.text is not None:
            data["system_prompt"]["text"] = f"<{len(self.system_prompt.text)} characters>"
        return data


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read and validate a TOML file (None: the defaults), as it takes effect on its own
    (`settle`d). Raises ConfigError."""
    from acp_bridge.config_file import read_config

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


# -- the layers above the file ----------------------------------------------------------------


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
        from acp_bridge.config_file import read_prompt_file

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


def command_problem(command: tuple[str, ...] | list[str]) -> str | None:
    """What makes an agent command line unusable before trying it, or None (the command
    line's `-- AGENT` and the file's [agent] command alike)."""
    if not command:
        return "must not be empty"
    if not command[0]:
        return "the program (the first item) is an empty string"
    if any("\0" in arg for arg in command):
        return "has a NUL character, which a command line cannot hold"
    return None
