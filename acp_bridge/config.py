"""Configuration: TOML file, environment and command line merged into one frozen `Config`.

Owns: the configuration keys of spec/interface.md, their defaults, validation, and the
precedence command line > `ACP_BRIDGE_*` environment > file > default. Everything is checked
at load time, so a session never fails on configuration. Must never: start anything.
"""

from __future__ import annotations

import dataclasses
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from acp_bridge.errors import ConfigError

SYSTEM_PROMPT_MODES = ("append", "override")
CLIENT_PROMPT_POLICIES = ("merge", "keep", "replace")
ON_UNSUPPORTED = ("auto", "meta", "first-prompt", "error", "skip")
CAPTURE_FIELDS = frozenset({"time", "pid"})


@dataclass(frozen=True)
class AgentConfig:
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True)
class SuggestionsConfig:
    enabled: bool = True
    unlock_legacy_agent: bool = False


@dataclass(frozen=True)
class SystemPromptConfig:
    text: str | None = None  # None: injection off
    mode: str = "append"
    client_prompt: str = "merge"
    on_unsupported: str = "auto"
    strict: bool = False


@dataclass(frozen=True)
class CaptureConfig:
    path: str | None = None  # a template: {time} and {pid} are filled in
    redact: tuple[str, ...] = ()
    include_system_prompt: bool = False
    required: bool = False


@dataclass(frozen=True)
class RelayConfig:
    parse_limit_mib: int = 16
    grace_seconds: float = 5.0


@dataclass(frozen=True)
class Config:
    agent: AgentConfig = AgentConfig()
    suggestions: SuggestionsConfig = SuggestionsConfig()
    system_prompt: SystemPromptConfig = SystemPromptConfig()
    capture: CaptureConfig = CaptureConfig()
    relay: RelayConfig = RelayConfig()
    strict: bool = False  # a rule that raises is fatal (tests, conformance runs)
    log_file: str | None = None
    verbosity: int = 0  # -1 quiet, 0 warnings, 1 rewrites, 2 frames
    source: str | None = None  # the config file, if any

    def digest(self) -> str:
        """A short, stable fingerprint of the effective settings (for the capture header)."""
        import hashlib  # here: loading OpenSSL costs every `run` a few milliseconds

        blob = orjson.dumps(self.as_dict(), option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(blob).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["agent"]["env"] = dict(self.agent.env)
        return data


# -- loading --------------------------------------------------------------------------------

_SCHEMA: dict[str, dict[str, tuple[type, ...]]] = {
    "agent": {"command": (list, str), "env": (dict,), "cwd": (str,)},
    "suggestions": {"enabled": (bool,), "unlock_legacy_agent": (bool,)},
    "system_prompt": {
        "text": (str,), "file": (str,), "mode": (str,), "client_prompt": (str,),
        "on_unsupported": (str,), "strict": (bool,), "dialect": (str,),
    },
    "capture": {"path": (str,), "redact": (list,), "include_system_prompt": (bool,), "required": (bool,)},
    "relay": {"parse_limit_mib": (int,), "grace_seconds": (int, float)},
    # The run options that are about the bridge itself rather than a feature.
    "bridge": {"strict": (bool,), "log_file": (str,), "verbosity": (int,)},
}


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read and validate a TOML file (None: the defaults). Raises ConfigError."""
    if path is None:
        return Config()
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{file}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read config file: {exc}") from None
    import tomllib  # only here: a run without a file does not pay for it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    return config_from_dict(data, file)


def config_from_dict(data: Mapping[str, Any], file: Path | None = None) -> Config:
    where = str(file) if file else "<config>"
    base = file.parent if file else Path.cwd()

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{where}: {key}: {problem}")

    for table, values in data.items():
        if table not in _SCHEMA:
            raise fail(table, f"unknown table (known: {', '.join(_SCHEMA)})")
        if not isinstance(values, dict):
            raise fail(table, "must be a table")
        for key, value in values.items():
            types = _SCHEMA[table].get(key)
            if types is None:
                raise fail(f"{table}.{key}", f"unknown key (known: {', '.join(_SCHEMA[table])})")
            if isinstance(value, bool) and bool not in types:
                raise fail(f"{table}.{key}", f"expected {_type_names(types)}, got a boolean")
            if not isinstance(value, types):
                raise fail(f"{table}.{key}", f"expected {_type_names(types)}, got {type(value).__name__}")

    agent = data.get("agent", {})
    command = agent.get("command", ())
    if isinstance(command, str):
        command = (command,)
    if not all(isinstance(arg, str) for arg in command):
        raise fail("agent.command", "every item must be a string")
    if "command" in agent and not command:
        raise fail("agent.command", "must not be empty")
    env = agent.get("env", {})
    for name, value in env.items():
        if not isinstance(value, str):
            raise fail(f"agent.env.{name}", f"expected a string, got {type(value).__name__}")
    cwd = agent.get("cwd")
    if cwd is not None:
        cwd = str((base / cwd).resolve())
        if not Path(cwd).is_dir():
            raise fail("agent.cwd", f"not a directory: {cwd}")

    sugg = data.get("suggestions", {})
    suggestions = SuggestionsConfig(
        enabled=sugg.get("enabled", True),
        unlock_legacy_agent=sugg.get("unlock_legacy_agent", False),
    )

    sp = data.get("system_prompt", {})
    if "dialect" in sp and "on_unsupported" in sp:
        raise fail("system_prompt.dialect", "is the old name of on_unsupported; give only one")
    text: str | None = sp.get("text")
    if "text" in sp and "file" in sp:
        raise fail("system_prompt", "give text or file, not both")
    if "file" in sp:
        text = read_prompt_file(base / sp["file"], f"{where}: system_prompt.file")
    if text is not None and not text.strip():
        raise fail("system_prompt.text", "is empty")
    system_prompt = SystemPromptConfig(
        text=text,
        mode=_choice(sp, "mode", SYSTEM_PROMPT_MODES, fail, "system_prompt"),
        client_prompt=_choice(sp, "client_prompt", CLIENT_PROMPT_POLICIES, fail, "system_prompt"),
        on_unsupported=_choice(
            {"on_unsupported": sp.get("on_unsupported", sp.get("dialect", "auto"))},
            "on_unsupported", ON_UNSUPPORTED, fail, "system_prompt",
        ),
        strict=sp.get("strict", False),
    )

    cap = data.get("capture", {})
    capture_path = cap.get("path")
    if capture_path is not None:
        check_capture_template(capture_path, lambda problem: fail("capture.path", problem))
        capture_path = str(base / capture_path)
    redact = tuple(cap.get("redact", ()))
    for pointer in redact:
        if not isinstance(pointer, str) or not (pointer == "" or pointer.startswith("/")):
            raise fail("capture.redact", f"{pointer!r} is not a JSON pointer (RFC 6901: starts with /)")
    capture = CaptureConfig(
        path=capture_path,
        redact=redact,
        include_system_prompt=cap.get("include_system_prompt", False),
        required=cap.get("required", False),
    )

    rel = data.get("relay", {})
    limit = rel.get("parse_limit_mib", 16)
    if limit < 1:
        raise fail("relay.parse_limit_mib", "must be at least 1")
    grace = float(rel.get("grace_seconds", 5.0))
    if grace < 0:
        raise fail("relay.grace_seconds", "must not be negative")

    own = data.get("bridge", {})
    log_file = own.get("log_file")
    if log_file is not None:
        log_file = str(base / log_file)
    verbosity = own.get("verbosity", 0)
    if not -1 <= verbosity <= 2:
        raise fail("bridge.verbosity", "must be -1 (quiet), 0, 1 or 2")

    return Config(
        strict=own.get("strict", False),
        log_file=log_file,
        verbosity=verbosity,
        agent=AgentConfig(command=tuple(command), env=dict(env), cwd=cwd),
        suggestions=suggestions,
        system_prompt=system_prompt,
        capture=capture,
        relay=RelayConfig(parse_limit_mib=limit, grace_seconds=grace),
        source=str(file) if file else None,
    )


def read_prompt_file(path: Path, label: str) -> str:
    """A system prompt file: UTF-8, trailing newlines dropped, not empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{label}: cannot read {path}: {exc}") from None
    text = text.rstrip("\r\n")
    if not text.strip():
        raise ConfigError(f"{label}: {path} is empty")
    return text


def check_capture_template(template: str, fail: Any) -> None:
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise fail(f"bad template {template!r}: {exc}") from None
    unknown = names - CAPTURE_FIELDS
    if unknown:
        raise fail(f"unknown placeholder {{{sorted(unknown)[0]}}} (known: {{time}}, {{pid}})")


def capture_path(template: str, now: float, pid: int) -> str:
    """Fill in a capture path template: `{time}` as UTC `YYYYmmddTHHMMSSZ`, `{pid}`."""
    import time

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return template.format(time=stamp, pid=pid)


def _choice(section: Mapping[str, Any], key: str, allowed: tuple[str, ...], fail: Any, table: str) -> str:
    value = section.get(key, allowed[0])
    if value not in allowed:
        raise fail(f"{table}.{key}", f"{value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _type_names(types: tuple[type, ...]) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "an array", dict: "a table"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def with_overrides(config: Config, **changes: Any) -> Config:
    """Apply dotted overrides (`system_prompt__mode="override"`) to a frozen Config."""
    sections: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for key, value in changes.items():
        if "__" in key:
            section, name = key.split("__", 1)
            sections.setdefault(section, {})[name] = value
        else:
            top[key] = value
    for section, values in sections.items():
        top[section] = dataclasses.replace(getattr(config, section), **values)
    return dataclasses.replace(config, **top)


