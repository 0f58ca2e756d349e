"""Configuration: TOML file, environment and command line merged into one frozen `Config`.

Owns: the configuration keys of spec/interface.md, their defaults, validation, and the
precedence command line > `ACP_BRIDGE_*` environment > file > default. Everything is checked
at load time, so a session never fails on configuration. Must never: start anything.
"""

from __future__ import annotations

import dataclasses
import math
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
REDACTED = "<redacted>"


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
    # Every strictness at once: a rule that raises is fatal (tests, conformance runs), and
    # `settle` makes it imply `system_prompt.strict` (no silent downgrade either).
    strict: bool = False
    log_file: str | None = None
    verbosity: int = 0  # -1 quiet, 0 warnings, 1 rewrites, 2 frames
    source: str | None = None  # the config file, if any

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
        return data

    def printable(self) -> dict[str, Any]:
        """`as_dict` for people: what `check-config` prints. Secrets are masked: each
        `agent.env` value becomes "<redacted>" (the names stay), and the system prompt text
        becomes "<N characters>"."""
        data = self.as_dict()
        data["agent"]["env"] = {name: REDACTED for name in self.agent.env}
        if self.system_prompt.text is not None:
            data["system_prompt"]["text"] = f"<{len(self.system_prompt.text)} characters>"
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
    """Read and validate a TOML file (None: the defaults), as it takes effect on its own
    (`settle`d). Raises ConfigError."""
    return settle(read_config(path))


def settle(config: Config) -> Config:
    """The effective settings, once every layer has been merged.

    `strict` (`--strict`, `ACP_BRIDGE_STRICT`, `[bridge] strict`) asks for every strictness
    at once (spec/interface.md), so it implies `system_prompt.strict`; `system_prompt.strict`
    alone only refuses the override-to-append downgrade. Apply this after the last layer,
    not to each one: a higher layer may still turn `strict` off (`ACP_BRIDGE_STRICT=0`).
    """
    if config.strict and not config.system_prompt.strict:
        return with_overrides(config, system_prompt__strict=True)
    return config


def read_config(path: str | os.PathLike[str] | None) -> Config:
    """One layer: the TOML file as written, validated but not `settle`d. Raises ConfigError."""
    if path is None:
        return Config()
    file = Path(path)
    try:
        text = read_text_file(file)
    except FileNotFoundError:
        raise ConfigError(f"{file}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{file}: is a directory, not a config file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 (TOML files are UTF-8): {exc}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{file}: cannot read config file: {exc}") from None
    import tomllib  # only here: a run without a file does not pay for it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise ConfigError(f"{file}: not valid TOML: arrays or tables nested too deeply") from None
    return config_from_dict(data, file)


def config_from_dict(data: Mapping[str, Any], file: Path | None = None) -> Config:
    where = str(file) if file else "<config>"
    base = file.parent if file else Path.cwd()

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{where}: {key}: {problem}")

    for table, values in data.items():
        if table not in _SCHEMA:
            what = "unknown table" if isinstance(values, dict) else "unknown key"
            raise fail(table, f"{what} (known tables: {', '.join(_SCHEMA)})")
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
    if "command" in agent:
        problem = command_problem(command)
        if problem:
            raise fail("agent.command", problem)
    env = agent.get("env", {})
    for name, value in env.items():
        key = f"agent.env.{name}" if name.isprintable() else f"agent.env.{name!r}"
        if not isinstance(value, str):
            raise fail(key, f"expected a string, got {type(value).__name__}")
        if not name or "=" in name or "\0" in name:
            raise fail(key, "not a valid environment variable name (empty, or has = or NUL)")
        if "\0" in value:
            raise fail(key, "has a NUL character, which an environment value cannot hold")
    cwd = agent.get("cwd")
    if cwd is not None:
        _path_chars(cwd, lambda problem: fail("agent.cwd", problem))
        try:
            cwd = str((base / cwd).resolve())
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
            raise fail("agent.cwd", f"cannot resolve {cwd}: {exc}") from None
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
        _path_chars(sp["file"], lambda problem: fail("system_prompt.file", problem))
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
        if not isinstance(pointer, str):
            raise fail("capture.redact", f"{pointer!r} is not a JSON pointer (a string, RFC 6901)")
        problem = pointer_problem(pointer)
        if problem:
            raise fail("capture.redact", f"{pointer!r} is not a JSON pointer ({problem})")
    capture = CaptureConfig(
        path=capture_path,
        redact=redact,
        include_system_prompt=cap.get("include_system_prompt", False),
        required=cap.get("required", False),
    )

    rel = data.get("relay", {})
    limit = rel.get("parse_limit_mib", 16)
    if limit < 1:
        raise fail("relay.parse_limit_mib", f"must be a positive whole number of MiB, got {limit}")
    grace = _seconds(rel.get("grace_seconds", 5.0), lambda problem: fail("relay.grace_seconds", problem))

    own = data.get("bridge", {})
    log_file = own.get("log_file")
    if log_file is not None:
        _path_chars(log_file, lambda problem: fail("bridge.log_file", problem))
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


def command_problem(command: tuple[str, ...] | list[str]) -> str | None:
    """What makes an agent command line unusable before trying it, or None."""
    if not command:
        return "must not be empty"
    if not command[0]:
        return "the program (the first item) is an empty string"
    if any("\0" in arg for arg in command):
        return "has a NUL character, which a command line cannot hold"
    return None


def pointer_problem(pointer: str) -> str | None:
    """RFC 6901: "" or "/..." tokens, in which "~" is only ever "~0" or "~1"."""
    if pointer and not pointer.startswith("/"):
        return "RFC 6901: starts with /"
    rest = pointer.replace("~0", "").replace("~1", "")
    if "~" in rest:
        return "RFC 6901: ~ is written ~0 and / is written ~1"
    return None


def _seconds(value: int | float, fail: Any) -> float:
    """A duration from the file: finite, not negative (TOML allows nan and inf)."""
    try:
        seconds = float(value)
    except OverflowError:
        raise fail(f"is too large ({value})") from None
    if not math.isfinite(seconds):
        raise fail(f"must be a finite number of seconds, got {value}")
    if seconds < 0:
        raise fail(f"must not be negative, got {value}")
    return seconds


def _path_chars(path: str, fail: Any) -> None:
    if "\0" in path:
        raise fail("has a NUL character, which a file name cannot hold")


# A config or system prompt file larger than this is a mistake (a device such as /dev/zero,
# a log named by accident), and reading it whole would exhaust memory.
MAX_FILE_BYTES = 16 * 1024 * 1024


def read_text_file(path: Path) -> str:
    """A UTF-8 file the user named, at most MAX_FILE_BYTES. Raises OSError (ValueError for
    an oversized file or a NUL in the name, UnicodeDecodeError for other bytes)."""
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    # Universal newlines, as open() in text mode would give: a prompt written on Windows
    # reaches the agent with "\n" line ends.
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def read_prompt_file(path: Path, label: str) -> str:
    """A system prompt file: UTF-8, trailing newlines dropped, not empty."""
    try:
        text = read_text_file(path)
    except IsADirectoryError:
        raise ConfigError(f"{label}: {path} is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: {path} is not UTF-8: {exc}") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise ConfigError(f"{label}: cannot read {path}: {exc}") from None
    text = text.rstrip("\r\n")
    if not text.strip():
        raise ConfigError(f"{label}: {path} is empty")
    return text


def check_capture_template(template: str, fail: Any) -> None:
    """Raise `fail(problem)` unless `capture_path` can fill in `template` at run time."""
    _path_chars(template, fail)
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise fail(f"bad template {template!r}: {exc}") from None
    unknown = names - CAPTURE_FIELDS
    if unknown:
        raise fail(f"unknown placeholder {{{sorted(unknown)[0]}}} (known: {{time}}, {{pid}})")
    try:  # a format spec or conversion that does not fit the value: {pid:s}, {time:d}
        filled = template.format(time="20260101T000000Z", pid=4194304)
    except (ValueError, TypeError) as exc:
        raise fail(f"bad template {template!r}: {exc}") from None
    if len(filled) > 4096:
        raise fail(f"bad template {template!r}: the file name would be {len(filled)} characters long")


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


