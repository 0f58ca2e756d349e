"""The settings of one run: the frozen `Config` and a dataclass per table of spec/interface.md.

Owns: the settings and their defaults (the rules' too: the rules take theirs in their
constructors), and the check of an agent command line that the command line and the file
share. Reading and checking the TOML file is `config/file.py`, whose keys are derived from
these dataclasses; the layers above the file are `config/layers.py`. Must never: import
anything of the package (every layer may import this module), or start anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

REDACTED = "<redacted>"
IN_FILE = "in_file"  # field metadata: False for a field of `Config` the file cannot set


@dataclass(frozen=True)
class SuggestionsConfig:
    """`[suggestions]` (interface.md): the prompt-suggestions rule's settings."""

    enabled: bool = True
    unlock_legacy_agent: bool = False


@dataclass(frozen=True)
class SystemPromptConfig:
    """`[system_prompt]` (interface.md): the system-prompt rule's settings."""

    text: str | None = None  # None: injection off
    mode: str = "append"  # the choices: core/rewrites/settings.py
    client_prompt: str = "merge"  # CLIENT_PROMPT_POLICIES
    on_unsupported: str = "auto"  # ON_UNSUPPORTED
    strict: bool = False


@dataclass(frozen=True)
class CommandsConfig:
    """`[commands]` (interface.md): the commands mirror's settings (bridge-rules 6.1)."""

    mirror_initial: bool = True


@dataclass(frozen=True)
class RepairConfig:
    """`[repair]` (interface.md): repairs of what agents leave undone (bridge-rules 6.2)."""

    close_tool_calls: bool = False


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
    """`[relay]`: the longest line parsed (longer ones pass in pieces, unread), the grace
    the agent gets at the end before SIGTERM, and where stray agent output goes."""

    parse_limit_mib: int = 16
    grace_seconds: float = 5.0
    stray_output: str = "forward"  # core/rewrites/stray_output.py: an agent line that is no JSON object


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
class RulesConfig:
    """`[rules]` (docs/rules.md): rules written in Python. `files` are paths (relative to the
    config file), `enable` names of the entry-point group `acp_bridge.rules` (never loaded
    unless named); `command_line` holds each `run --rule FILE`, which come after `files`."""

    files: tuple[str, ...] = ()
    enable: tuple[str, ...] = ()
    command_line: tuple[str, ...] = field(default=(), metadata={IN_FILE: False})


@dataclass(frozen=True)
class RewriteConfig:
    """One `[[rewrite]]` table (docs/rules.md): a rule without Python; implements
    core/rewrites/settings.py's `RewriteSettings`. `line`: where its header is in the file."""

    name: str = ""
    direction: str = "both"  # to-client | to-agent | both
    method: str | None = None
    update: str | None = None  # params.update.sessionUpdate
    where: Mapping[str, Any] = field(default_factory=dict)  # JSON pointer -> value it must equal
    drop: bool = False
    set: Mapping[str, Any] = field(default_factory=dict)  # JSON pointer -> value
    remove: tuple[str, ...] = ()  # JSON pointers
    line: int | None = field(default=None, metadata={IN_FILE: False})


@dataclass(frozen=True)
class Config:
    """The settings of one run: a dataclass per table of the file, then [bridge]'s own.
    (Each dataclass here has a docstring: one without is given a signature built with
    `inspect` as it is defined, a cost to every start-up.)"""

    agent: AgentConfig = AgentConfig()
    suggestions: SuggestionsConfig = SuggestionsConfig()
    system_prompt: SystemPromptConfig = SystemPromptConfig()
    capture: CaptureConfig = CaptureConfig()
    relay: RelayConfig = RelayConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    health: HealthConfig = HealthConfig()
    commands: CommandsConfig = CommandsConfig()
    repair: RepairConfig = RepairConfig()
    rules: RulesConfig = RulesConfig()
    # The [[rewrite]] tables, in file order (an array of tables: `config/file.py` reads it).
    rewrite: tuple[RewriteConfig, ...] = field(default=(), metadata={IN_FILE: False})
    # Every strictness at once: a rule that raises is fatal (tests, conformance runs), and
    # `effective` makes it imply `system_prompt.strict` (no silent downgrade either).
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
