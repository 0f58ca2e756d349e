"""The configuration file: TOML read into a `Config`, every key checked before anything starts.

Owns: reading the file against its schema (`config/schema.py`, derived from the dataclasses
of `config/model.py`), one reader per table for what a type cannot say (paths, choices,
ranges), and reading the files a config names (the system prompt file). What makes a path
usable (no NUL, a capture template that fills in) is checked by `config/paths.py`.
An unknown key, a wrong type or a missing file is a `ConfigError` naming the file and key.
Must never: start anything, or accept a value that would fail later in a session.
"""

from __future__ import annotations

import math
import os
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from acp_bridge.config import (
    AgentConfig,
    CaptureConfig,
    Config,
    HealthConfig,
    RelayConfig,
    SuggestionsConfig,
    SystemPromptConfig,
    TelemetryConfig,
    command_problem,
)
from acp_bridge.config.paths import check_capture_target, check_capture_template, check_path_chars
from acp_bridge.config.schema import (
    ARRAY_TABLES,
    BRIDGE_TABLE,
    FILE_TYPES,
    Fail,
    alternatives,
    field_types,
    schema,
    table_classes,
    type_names,
)
from acp_bridge.config.text_files import read_prompt_file, read_text_file
from acp_bridge.core.rewrites import built_ins
from acp_bridge.core.rewrites.options import CHOICE
from acp_bridge.core.rewrites.settings import CLIENT_PROMPT_POLICIES, ON_UNSUPPORTED
from acp_bridge.errors import ConfigError

T = TypeVar("T")


def read_config(path: str | os.PathLike[str] | None) -> Config:
    """One layer: the TOML file as written, validated but not yet made `effective`. Raises ConfigError."""
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
    return config_from_dict(data, file, text)


class _File:
    """The file being read: how errors name it, and where its relative paths start. (A
    plain class: building a dataclass costs every `run` start-up, and nothing compares,
    copies or prints this one.)"""

    __slots__ = ("base", "name")

    def __init__(self, name: str, base: Path) -> None:
        self.name = name
        self.base = base

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.name}: {key}: {problem}")

    def fail(self, key: str) -> Fail:
        """`error` for one key, for the checks that take a `fail(problem)`."""
        return lambda problem: self.error(key, problem)

    def path(self, given: str) -> Path:
        """Where a path the file gives leads: a leading `~` or `~user` is a home folder (no
        shell reads this file), and a relative path starts at the file's folder."""
        return self.base / os.path.expanduser(given)


def config_from_dict(data: Mapping[str, Any], file: Path | None = None, text: str | None = None) -> Config:
    """The settings of a parsed TOML document (`file`: where it came from, None for none;
    `text`: the document, which tells the lines of its [[rewrite]] tables).

    First the shape against `schema()` (tables, keys, types), then each table's reader,
    in the order of `Config`. Raises ConfigError naming the file, the key and the problem.
    """
    src = _File(str(file) if file else "<config>", file.parent if file else Path.cwd())
    tables = _check_shape(data, src)
    settings: dict[str, Any] = {}
    for name, cls in table_classes().items():
        values = tables.get(name, {})
        if name == "rules":
            continue  # below
        read = _READERS.get(name)
        if read is None:
            _check_choices(name, values, src)
        settings[name] = read(values, src) if read else _build(cls, values, src, name)
    settings.update(_bridge(tables.get(BRIDGE_TABLE, {}), src))
    # The rule tables ([rules], [[rewrite]]): config/rule_tables.py, which imports the core.
    from acp_bridge.config.rule_tables import read_rewrites, read_rules

    settings["rules"] = read_rules(tables.get("rules", {}), src.path, src.error)
    if "rewrite" in data:
        settings["rewrite"] = read_rewrites(data["rewrite"], text, src.error)
    return Config(**settings, source=str(file) if file else None)


def _check_shape(data: Mapping[str, Any], src: _File) -> dict[str, dict[str, Any]]:
    """`data` as tables of known keys with values of the right type, or ConfigError."""
    known = schema()
    for table, values in data.items():
        if table in ARRAY_TABLES:  # checked table by table where it is read
            continue
        if table not in known:
            what = "unknown table" if isinstance(values, dict) else "unknown key"
            raise src.error(table, f"{what} (known tables: {', '.join([*known, *ARRAY_TABLES])})")
        if not isinstance(values, dict):
            raise src.error(table, "must be a table")
        for key, value in values.items():
            types = known[table].get(key)
            if types is None:
                raise src.error(f"{table}.{key}", f"unknown key (known: {', '.join(known[table])})")
            if not _is_a(value, types):
                got = "a boolean" if isinstance(value, bool) else type(value).__name__
                raise src.error(f"{table}.{key}", f"expected {type_names(types)}, got {got}")
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
        check_path_chars(cwd, src.fail("agent.cwd"))
        try:
            cwd = str(src.path(cwd).resolve())
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
        check_path_chars(file, src.fail("system_prompt.file"))
        values["text"] = read_prompt_file(src.path(file), f"{src.name}: system_prompt.file")
    text = values.get("text")
    if text is not None and not text.strip():
        raise src.error("system_prompt.text", "is empty")
    _check_choices("system_prompt", values, src, (("client_prompt", CLIENT_PROMPT_POLICIES),
                                                  ("on_unsupported", ON_UNSUPPORTED)))
    return _build(SystemPromptConfig, values, src, "system_prompt")


def _capture(values: dict[str, Any], src: _File) -> CaptureConfig:
    values = dict(values)
    if "path" in values:
        check_capture_template(values["path"], src.fail("capture.path"))
        values["path"] = _template_path(src, values["path"])
        check_capture_target(values["path"], src.fail("capture.path"))
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
    _check_choices("relay", values, src)
    return _build(RelayConfig, values, src, "relay")


def _telemetry(values: dict[str, Any], src: _File) -> TelemetryConfig:
    values = dict(values)
    if values.get("protocol", "http/protobuf") not in ("http/protobuf", "grpc"):
        raise src.error("telemetry.protocol", f"{values['protocol']!r} is not one of http/protobuf, grpc")
    endpoint = values.get("endpoint")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise src.error("telemetry.endpoint", f"{endpoint!r} is not an http:// or https:// URL")
    if "flush_seconds" in values:
        values["flush_seconds"] = _seconds(values["flush_seconds"], src.fail("telemetry.flush_seconds"))
        if values["flush_seconds"] > 60:
            raise src.error("telemetry.flush_seconds", f"must be at most 60, got {values['flush_seconds']:g}")
    return _build(TelemetryConfig, values, src, "telemetry")


def _health(values: dict[str, Any], src: _File) -> HealthConfig:
    values = dict(values)
    for key in ("request_seconds", "prompt_seconds", "client_request_seconds", "cancel_seconds"):
        if key in values:
            values[key] = _seconds(values[key], src.fail(f"health.{key}"))
    methods = values.get("methods", {})
    for method, seconds in methods.items():
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
            raise src.error(f"health.methods.{method}", f"expected a number of seconds, got {type(seconds).__name__}")
    values["methods"] = {method: _seconds(seconds, src.fail(f"health.methods.{method}"))
                         for method, seconds in methods.items()}
    return _build(HealthConfig, values, src, "health")


def _bridge(values: dict[str, Any], src: _File) -> dict[str, Any]:
    """[bridge]: the settings of `Config` itself, as keyword arguments for it."""
    values = dict(values)
    if "log_file" in values:
        check_path_chars(values["log_file"], src.fail("bridge.log_file"))
        values["log_file"] = str(src.path(values["log_file"]))
    if not -1 <= values.get("verbosity", Config.verbosity) <= 2:
        raise src.error("bridge.verbosity", "must be -1 (quiet), 0, 1 or 2")
    return _field_values(Config, values, src, BRIDGE_TABLE)


def _check_choices(table: str, values: dict[str, Any], src: _File,
                   more: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> None:
    """Each key of `table` that takes one of some choices (the built-in rules' declared
    options, then `more`) holds one of them."""
    declared = [(option.field, option.choices) for built_in in built_ins() for option in built_in.options
                if option.kind == CHOICE and option.table == table]
    for key, allowed in (*declared, *more):
        if key in values and values[key] not in allowed:
            raise src.error(f"{table}.{key}", f"{values[key]!r} is not one of {', '.join(allowed)}")


_READERS: dict[str, Callable[[dict[str, Any], _File], object]] = {
    "agent": _agent, "suggestions": _suggestions, "system_prompt": _system_prompt,
    "capture": _capture, "relay": _relay, "telemetry": _telemetry, "health": _health,
}


def _build(cls: type[T], values: Mapping[str, Any], src: _File, table: str) -> T:
    """`cls` from a table's checked values; the dataclass's defaults for the keys not given."""
    return cls(**_field_values(cls, values, src, table))


def _field_values(cls: type, values: Mapping[str, Any], src: _File, table: str) -> dict[str, Any]:
    """The file's values as `cls`'s fields hold them: an array as a tuple, an integer as a
    float where the field is a float; each item of an array or table must be of its type."""
    hints = field_types(cls)
    out: dict[str, Any] = {}
    for key, value in values.items():
        hint = hints[key]
        item_type = _item_type(hint)
        if item_type in FILE_TYPES:
            items, what = (value.values(), "value") if isinstance(value, dict) else (value, "item")
            allowed = FILE_TYPES[item_type]
            if not all(_is_a(item, allowed) for item in items):
                raise src.error(f"{table}.{key}", f"every {what} must be {type_names(allowed)}")
        if isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, dict):
            value = dict(value)
        elif isinstance(value, int) and not isinstance(value, bool) and float in alternatives(hint):
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


def _template_path(src: _File, template: str) -> str:
    """Where a capture template the file gives leads (`_File.path`), still a template: the
    file's folder and a home folder put before it have their braces doubled, so that only
    the template's own `{time}` and `{pid}` are filled in (a folder named `p{x}`)."""
    user, slash, rest = template.partition("/")
    home = os.path.expanduser(user) if user.startswith("~") else user
    if home != user:
        template = _braces_doubled(home) + slash + rest
    return str(Path(_braces_doubled(str(src.base))) / template)


def _braces_doubled(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")
