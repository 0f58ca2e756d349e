"""Configuration: TOML file, environment and command line merged into one frozen `Config`.

Owns: the configuration keys of spec/interface.md, their defaults, validation, and the
precedence command line > `ACP_BRIDGE_*` environment > file > default. Everything is checked
at load time, so a session never fails on configuration. Must never: start anything.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import string
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar

import orjson

# Each rule's settings live beside the rule (the core never imports this module).
from acp_bridge.core.rewrites.suggestions import SuggestionsConfig as SuggestionsConfig
from acp_bridge.core.rewrites.system_prompt_shapes import CLIENT_PROMPT_POLICIES as CLIENT_PROMPT_POLICIES
from acp_bridge.core.rewrites.system_prompt_shapes import ON_UNSUPPORTED as ON_UNSUPPORTED
from acp_bridge.core.rewrites.system_prompt_shapes import SYSTEM_PROMPT_MODES as SYSTEM_PROMPT_MODES
from acp_bridge.core.rewrites.system_prompt_shapes import SystemPromptConfig as SystemPromptConfig
from acp_bridge.errors import ConfigError

T = TypeVar("T")
REDACTED = "<redacted>"
IN_FILE = "in_file"  # field metadata: False for a field of `Config` the file cannot set


@dataclass(frozen=True)
class AgentConfig:
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


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
    suggestions: SuggestionsConfig = SuggestionsConfig()  # noqa: RUF009 - frozen, so shared safely
    system_prompt: SystemPromptConfig = SystemPromptConfig()  # noqa: RUF009 - frozen, so shared safely
    capture: CaptureConfig = CaptureConfig()
    relay: RelayConfig = RelayConfig()
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


# -- the file's schema -----------------------------------------------------------------------
#
# Derived from the dataclasses, so that a field is a key: a field of `Config` whose type is a
# dataclass is a table ([agent], [relay], ...), each of its fields a key; the other fields of
# `Config` are the bridge's own settings, the keys of [bridge].

Schema = dict[str, dict[str, tuple[type, ...]]]
Fail = Callable[[str], Exception]

BRIDGE_TABLE = "bridge"
# Keys of the file that are no field of their table's dataclass: the prompt as a file (read
# into `text`), and the old name of `on_unsupported`.
FILE_ONLY_KEYS: dict[str, dict[str, tuple[type, ...]]] = {
    "system_prompt": {"file": (str,), "dialect": (str,)},
}
# A second shape the file may give a field in: a command line as one string, split as a
# shell would (`shlex.split`, see `_agent`).
ALSO_ACCEPTED: dict[tuple[str, str], tuple[type, ...]] = {("agent", "command"): (str,)}
# The TOML values that can stand for each Python type (TOML's integers are numbers too).
_FILE_TYPES: dict[Any, tuple[type, ...]] = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


def table_classes() -> dict[str, type[Any]]:
    """The tables of the file and the dataclass each one reads into, in the order of `Config`."""
    return {name: hint for name, hint in _settable_fields(Config).items()
            if isinstance(hint, type) and dataclasses.is_dataclass(hint)}


@functools.cache
def schema() -> Schema:
    """Every table of the file, its keys, and the TOML types each key accepts."""
    tables = {name: _keys(name, cls) for name, cls in table_classes().items()}
    tables[BRIDGE_TABLE] = {name: file_types(hint) for name, hint in _settable_fields(Config).items()
                            if name not in tables}
    return tables


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """`cls`'s field types, resolved (this module postpones annotations)."""
    return typing.get_type_hints(cls)


def _settable_fields(cls: type) -> dict[str, Any]:
    """`cls`'s fields that the file may set, with their types."""
    hints = _hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.metadata.get(IN_FILE, True)}


def _keys(table: str, cls: type[Any]) -> dict[str, tuple[type, ...]]:
    keys = {name: file_types(hint) for name, hint in _settable_fields(cls).items()}
    for (also_table, name), types in ALSO_ACCEPTED.items():
        if also_table == table:
            keys[name] = (*keys[name], *types)
    return {**keys, **FILE_ONLY_KEYS.get(table, {})}


def file_types(hint: Any) -> tuple[type, ...]:
    """The TOML values a field of type `hint` is given as: `float` takes 1 and 1.5, a tuple
    an array, a mapping a table; None is the absence of the key, so `str | None` is `str`."""
    types: list[type] = []
    for one in _alternatives(hint):
        origin = typing.get_origin(one) or one
        if origin in (tuple, list):
            types.append(list)
        elif origin in (dict, Mapping):
            types.append(dict)
        elif one in _FILE_TYPES:
            types.extend(_FILE_TYPES[one])
        else:
            raise TypeError(f"no TOML type for {one!r}: teach file_types() how the file spells it")
    return tuple(dict.fromkeys(types))


def _alternatives(hint: Any) -> tuple[Any, ...]:
    """The types of a union but None (`str | None`: `str`), or the type itself."""
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        return tuple(arg for arg in typing.get_args(hint) if arg is not type(None))
    return (hint,)


def _type_names(types: tuple[type, ...]) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "an array", dict: "a table"}
    return " or ".join(names.get(t, t.__name__) for t in types)


# -- loading --------------------------------------------------------------------------------


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
        return dataclasses.replace(config, system_prompt=dataclasses.replace(config.system_prompt, strict=True))
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


@dataclass(frozen=True)
class _File:
    """The file being read: how errors name it, and where its relative paths start."""

    name: str
    base: Path

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.name}: {key}: {problem}")

    def fail(self, key: str) -> Fail:
        """`error` for one key, for the checks that take a `fail(problem)`."""
        return lambda problem: self.error(key, problem)


def config_from_dict(data: Mapping[str, Any], file: Path | None = None) -> Config:
    """The settings of a parsed TOML document (`file`: where it came from, None for none).

    First the shape against `schema()` (tables, keys, types), then each table's reader,
    in the order of `Config`. Raises ConfigError naming the file, the key and the problem.
    """
    src = _File(str(file) if file else "<config>", file.parent if file else Path.cwd())
    tables = _check_shape(data, src)
    settings: dict[str, Any] = {}
    for name, cls in table_classes().items():
        values = tables.get(name, {})
        read = _READERS.get(name)
        settings[name] = read(values, src) if read else _build(cls, values, src, name)
    settings.update(_bridge(tables.get(BRIDGE_TABLE, {}), src))
    return Config(**settings, source=str(file) if file else None)


def _check_shape(data: Mapping[str, Any], src: _File) -> dict[str, dict[str, Any]]:
    """`data` as tables of known keys with values of the right type, or ConfigError."""
    known = schema()
    for table, values in data.items():
        if table not in known:
            what = "unknown table" if isinstance(values, dict) else "unknown key"
            raise src.error(table, f"{what} (known tables: {', '.join(known)})")
        if not isinstance(values, dict):
            raise src.error(table, "must be a table")
        for key, value in values.items():
            types = known[table].get(key)
            if types is None:
                raise src.error(f"{table}.{key}", f"unknown key (known: {', '.join(known[table])})")
            if not _is_a(value, types):
                got = "a boolean" if isinstance(value, bool) else type(value).__name__
                raise src.error(f"{table}.{key}", f"expected {_type_names(types)}, got {got}")
    return dict(data)


# One reader per table: it checks what a type cannot say (a path, a choice, a range), turns
# the file's spelling into the field's value, and leaves the rest to `_build`.


def _agent(values: dict[str, Any], src: _File) -> AgentConfig:
    values = dict(values)
    if "command" in values:
        command = values["command"]
        if isinstance(command, str):
            # "my-agent --flag" means what it means in a shell, never a program of that name.
            import shlex

            try:
                command = tuple(shlex.split(command))
            except ValueError as exc:
                raise src.error("agent.command", f"cannot be split as a shell would: {exc}") from None
        else:
            command = tuple(command)
        if not all(isinstance(arg, str) for arg in command):
            raise src.error("agent.command", "every item must be a string")
        problem = command_problem(command)
        if problem:
            raise src.error("agent.command", problem)
        values["command"] = command
    for name, value in values.get("env", {}).items():
        key = f"agent.env.{name}" if name.isprintable() else f"agent.env.{name!r}"
        if not isinstance(value, str):
            raise src.error(key, f"expected a string, got {type(value).__name__}")
        if not name or "=" in name or "\0" in name:
            raise src.error(key, "not a valid environment variable name (empty, or has = or NUL)")
        if "\0" in value:
            raise src.error(key, "has a NUL character, which an environment value cannot hold")
    if "cwd" in values:
        cwd = values["cwd"]
        _path_chars(cwd, src.fail("agent.cwd"))
        try:
            cwd = str((src.base / cwd).resolve())
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
            raise src.error("agent.cwd", f"cannot resolve {cwd}: {exc}") from None
        if not Path(cwd).is_dir():
            raise src.error("agent.cwd", f"not a directory: {cwd}")
        values["cwd"] = cwd
    return _build(AgentConfig, values, src, "agent")


def _suggestions(values: dict[str, Any], src: _File) -> SuggestionsConfig:
    return _build(SuggestionsConfig, values, src, "suggestions")  # two booleans: the types say it all


def _system_prompt(values: dict[str, Any], src: _File) -> SystemPromptConfig:
    values = dict(values)
    if "dialect" in values:
        if "on_unsupported" in values:
            raise src.error("system_prompt.dialect", "is the old name of on_unsupported; give only one")
        values["on_unsupported"] = values.pop("dialect")
    if "file" in values:
        if "text" in values:
            raise src.error("system_prompt", "give text or file, not both")
        file = values.pop("file")
        _path_chars(file, src.fail("system_prompt.file"))
        values["text"] = read_prompt_file(src.base / file, f"{src.name}: system_prompt.file")
    text = values.get("text")
    if text is not None and not text.strip():
        raise src.error("system_prompt.text", "is empty")
    for key, allowed in (("mode", SYSTEM_PROMPT_MODES), ("client_prompt", CLIENT_PROMPT_POLICIES),
                         ("on_unsupported", ON_UNSUPPORTED)):
        if key in values and values[key] not in allowed:
            raise src.error(f"system_prompt.{key}", f"{values[key]!r} is not one of {', '.join(allowed)}")
    return _build(SystemPromptConfig, values, src, "system_prompt")


def _capture(values: dict[str, Any], src: _File) -> CaptureConfig:
    values = dict(values)
    if "path" in values:
        check_capture_template(values["path"], src.fail("capture.path"))
        values["path"] = str(src.base / values["path"])
    if "redact" in values:
        from acp_bridge.core.pointer import parse_pointer  # only here: `run` imports the core later

        for pointer in values["redact"]:
            if not isinstance(pointer, str):
                raise src.error("capture.redact", f"{pointer!r} is not a JSON pointer (a string, RFC 6901)")
            try:
                parse_pointer(pointer)
            except ValueError as exc:
                raise src.error("capture.redact", str(exc)) from None
    return _build(CaptureConfig, values, src, "capture")


def _relay(values: dict[str, Any], src: _File) -> RelayConfig:
    values = dict(values)
    if values.get("parse_limit_mib", RelayConfig.parse_limit_mib) < 1:
        raise src.error("relay.parse_limit_mib",
                        f"must be a positive whole number of MiB, got {values['parse_limit_mib']}")
    if "grace_seconds" in values:
        values["grace_seconds"] = _seconds(values["grace_seconds"], src.fail("relay.grace_seconds"))
    return _build(RelayConfig, values, src, "relay")


def _bridge(values: dict[str, Any], src: _File) -> dict[str, Any]:
    """[bridge]: the settings of `Config` itself, as keyword arguments for it."""
    values = dict(values)
    if "log_file" in values:
        _path_chars(values["log_file"], src.fail("bridge.log_file"))
        values["log_file"] = str(src.base / values["log_file"])
    if not -1 <= values.get("verbosity", Config.verbosity) <= 2:
        raise src.error("bridge.verbosity", "must be -1 (quiet), 0, 1 or 2")
    return _field_values(Config, values, src, BRIDGE_TABLE)


_READERS: dict[str, Callable[[dict[str, Any], _File], object]] = {
    "agent": _agent, "suggestions": _suggestions, "system_prompt": _system_prompt,
    "capture": _capture, "relay": _relay,
}


def _build(cls: type[T], values: Mapping[str, Any], src: _File, table: str) -> T:
    """`cls` from a table's checked values; the dataclass's defaults for the keys not given."""
    return cls(**_field_values(cls, values, src, table))


def _field_values(cls: type, values: Mapping[str, Any], src: _File, table: str) -> dict[str, Any]:
    """The file's values as `cls`'s fields hold them: an array as a tuple, an integer as a
    float where the field is a float; each item of an array or table must be of its type."""
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for key, value in values.items():
        hint = hints[key]
        item_type = _item_type(hint)
        if item_type in _FILE_TYPES:
            items, what = (value.values(), "value") if isinstance(value, dict) else (value, "item")
            allowed = _FILE_TYPES[item_type]
            if not all(_is_a(item, allowed) for item in items):
                raise src.error(f"{table}.{key}", f"every {what} must be {_type_names(allowed)}")
        if isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, dict):
            value = dict(value)
        elif isinstance(value, int) and not isinstance(value, bool) and float in _alternatives(hint):
            value = float(value)
        out[key] = value
    return out


def _item_type(hint: Any) -> Any:
    """The type of each item of a `tuple[X, ...]` or `Mapping[str, X]` field, else None."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    if origin in (dict, Mapping) and len(args) == 2:
        return args[1]
    return None


def _is_a(value: Any, types: tuple[type, ...]) -> bool:
    """isinstance, except that a boolean is no integer (TOML's true is not 1)."""
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def command_problem(command: tuple[str, ...] | list[str]) -> str | None:
    """What makes an agent command line unusable before trying it, or None."""
    if not command:
        return "must not be empty"
    if not command[0]:
        return "the program (the first item) is an empty string"
    if any("\0" in arg for arg in command):
        return "has a NUL character, which a command line cannot hold"
    return None


def _seconds(value: int | float, fail: Fail) -> float:
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


def _path_chars(path: str, fail: Fail) -> None:
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


def check_capture_template(template: str, fail: Fail) -> None:
    """Raise `fail(problem)` unless `capture_path` can fill in `template` at run time."""
    from acp_bridge.capture.files import CAPTURE_FIELDS, capture_path  # only with a capture

    _path_chars(template, fail)
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise fail(f"bad template {template!r}: {exc}") from None
    unknown = names - CAPTURE_FIELDS
    if unknown:
        raise fail(f"unknown placeholder {{{sorted(unknown)[0]}}} (known: {{time}}, {{pid}})")
    try:  # a format spec or conversion that does not fit the value: {pid:s}, {time:d}
        filled = capture_path(template, 0.0, pid=4194304)
    except (ValueError, TypeError) as exc:
        raise fail(f"bad template {template!r}: {exc}") from None
    if len(filled) > 4096:
        raise fail(f"bad template {template!r}: the file name would be {len(filled)} characters long")


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
    strict: bool | None = None
    log_file: str | None = None
    verbosity: int | None = None

    def over(self, lower: Overrides) -> Overrides:
        """This layer on top of `lower`: each setting this one gives replaces lower's."""
        return Overrides(
            agent_command=_given(self.agent_command, lower.agent_command),
            capture_path=_given(self.capture_path, lower.capture_path),
            system_prompt=_given(self.system_prompt, lower.system_prompt),
            system_prompt_mode=_given(self.system_prompt_mode, lower.system_prompt_mode),
            suggestions_enabled=_given(self.suggestions_enabled, lower.suggestions_enabled),
            unlock_legacy_agent=_given(self.unlock_legacy_agent, lower.unlock_legacy_agent),
            strict=_given(self.strict, lower.strict),
            log_file=_given(self.log_file, lower.log_file),
            verbosity=_given(self.verbosity, lower.verbosity),
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
        strict=_given(given.strict, config.strict),
        log_file=_given(given.log_file, config.log_file),
        verbosity=_given(given.verbosity, config.verbosity),
    )


def _given(value: T | None, otherwise: T) -> T:
    return otherwise if value is None else value
