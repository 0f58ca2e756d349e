"""The configuration file's schema (config/schema.py) is derived from the dataclasses of
`Config`: every field is a key, of the TOML types its Python type allows.

The tables here are written out by hand, on purpose: they are what a user may put in the
file (spec/interface.md). The first test checks that they name every field of every
dataclass, so a field added without a key, or a key that reads into nothing, fails here.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from acp_bridge.config import IN_FILE, Config
from acp_bridge.config.file import read_config
from acp_bridge.config.schema import FILE_ONLY_KEYS, file_types, schema
from tests.config.conftest import field_value, refused, write

# "table.key": (the TOML value, the field it sets, the value that field then has). Each value
# differs from the field's default, so reading it proves the key reaches its field.
SAMPLES: dict[str, tuple[str, str, Any]] = {
    "agent.command": ('["agent", "--flag"]', "agent.command", ("agent", "--flag")),
    "agent.env": ('{ A = "1", B = "" }', "agent.env", {"A": "1", "B": ""}),
    "agent.cwd": ('"work"', "agent.cwd", "<real>/work"),
    "suggestions.enabled": ("false", "suggestions.enabled", False),
    "suggestions.unlock_legacy_agent": ("true", "suggestions.unlock_legacy_agent", True),
    "system_prompt.text": ('"Be brief."', "system_prompt.text", "Be brief."),
    "system_prompt.file": ('"prompt.md"', "system_prompt.text", "From a file."),
    "system_prompt.mode": ('"override"', "system_prompt.mode", "override"),
    "system_prompt.client_prompt": ('"keep"', "system_prompt.client_prompt", "keep"),
    "system_prompt.on_unsupported": ('"meta"', "system_prompt.on_unsupported", "meta"),
    "system_prompt.dialect": ('"first-prompt"', "system_prompt.on_unsupported", "first-prompt"),
    "system_prompt.strict": ("true", "system_prompt.strict", True),
    "capture.path": ('"c-{pid}.jsonl"', "capture.path", "<tmp>/c-{pid}.jsonl"),
    "capture.redact": ('["/params/x", "/a~1b"]', "capture.redact", ("/params/x", "/a~1b")),
    "capture.include_system_prompt": ("true", "capture.include_system_prompt", True),
    "capture.required": ("true", "capture.required", True),
    "relay.parse_limit_mib": ("3", "relay.parse_limit_mib", 3),
    "relay.grace_seconds": ("2", "relay.grace_seconds", 2.0),
    "relay.stray_output": ('"stderr"', "relay.stray_output", "stderr"),
    "commands.mirror_initial": ("false", "commands.mirror_initial", False),
    "repair.close_tool_calls": ("true", "repair.close_tool_calls", True),
    "telemetry.enabled": ("true", "telemetry.enabled", True),
    "telemetry.content": ("true", "telemetry.content", True),
    "telemetry.endpoint": ('"http://127.0.0.1:4318"', "telemetry.endpoint", "http://127.0.0.1:4318"),
    "telemetry.protocol": ('"grpc"', "telemetry.protocol", "grpc"),
    "telemetry.flush_seconds": ("5", "telemetry.flush_seconds", 5.0),
    "health.enabled": ("false", "health.enabled", False),
    "health.request_seconds": ("30", "health.request_seconds", 30.0),
    "health.prompt_seconds": ("1200.5", "health.prompt_seconds", 1200.5),
    "health.client_request_seconds": ("5", "health.client_request_seconds", 5.0),
    "health.cancel_seconds": ("0", "health.cancel_seconds", 0.0),
    "health.methods": ('{ "session/new" = 5, "x/y" = 0.5 }', "health.methods", {"session/new": 5.0, "x/y": 0.5}),
    "rules.files": ('["r/x.py"]', "rules.files", ("<tmp>/r/x.py",)),
    "rules.enable": ('["x"]', "rules.enable", ("x",)),
    "bridge.strict": ("true", "strict", True),
    "bridge.log_file": ('"b.log"', "log_file", "<tmp>/b.log"),
    "bridge.verbosity": ("2", "verbosity", 2),
}

# "table.key": (a TOML value of the wrong type, what the error says about it)
WRONG_TYPES: dict[str, tuple[str, str]] = {
    "agent.command": ("5", "expected an array or a string, got int"),
    "agent.env": ('"A=1"', "expected a table, got str"),
    "agent.cwd": ("1", "expected a string, got int"),
    "suggestions.enabled": ("1", "expected a boolean, got int"),
    "suggestions.unlock_legacy_agent": ('"yes"', "expected a boolean, got str"),
    "system_prompt.text": ("true", "expected a string, got a boolean"),
    "system_prompt.file": ("[]", "expected a string, got list"),
    "system_prompt.mode": ("1", "expected a string, got int"),
    "system_prompt.client_prompt": ("1.5", "expected a string, got float"),
    "system_prompt.on_unsupported": ("{}", "expected a string, got dict"),
    "system_prompt.dialect": ("false", "expected a string, got a boolean"),
    "system_prompt.strict": ('"true"', "expected a boolean, got str"),
    "capture.path": ("1979-05-27", "expected a string, got date"),
    "capture.redact": ('"/x"', "expected an array, got str"),
    "capture.include_system_prompt": ("0", "expected a boolean, got int"),
    "capture.required": ("[]", "expected a boolean, got list"),
    "relay.parse_limit_mib": ("1.5", "expected an integer, got float"),
    "relay.grace_seconds": ('"5"', "expected an integer or a number, got str"),
    "relay.stray_output": ("true", "expected a string, got a boolean"),
    "commands.mirror_initial": ('"false"', "expected a boolean, got str"),
    "repair.close_tool_calls": ("1", "expected a boolean, got int"),
    "telemetry.enabled": ('"yes"', "expected a boolean, got str"),
    "telemetry.content": ("1", "expected a boolean, got int"),
    "telemetry.endpoint": ("4318", "expected a string, got int"),
    "telemetry.protocol": ("[]", "expected a string, got list"),
    "telemetry.flush_seconds": ('"2"', "expected an integer or a number, got str"),
    "health.enabled": ('"no"', "expected a boolean, got str"),
    "health.request_seconds": ("true", "expected an integer or a number, got a boolean"),
    "health.prompt_seconds": ("[]", "expected an integer or a number, got list"),
    "health.client_request_seconds": ('"5"', "expected an integer or a number, got str"),
    "health.cancel_seconds": ("{}", "expected an integer or a number, got dict"),
    "health.methods": ("5", "expected a table, got int"),
    "rules.files": ('"x.py"', "expected an array, got str"),
    "rules.enable": ("{}", "expected an array, got dict"),
    "bridge.strict": ("1", "expected a boolean, got int"),
    "bridge.log_file": ("true", "expected a string, got a boolean"),
    "bridge.verbosity": ('"2"', "expected an integer, got str"),
}


def every_key() -> set[str]:
    """What the file may say, from the dataclasses themselves (not from `schema()`)."""
    hints = typing.get_type_hints(Config)
    keys: set[str] = set()
    for field in dataclasses.fields(Config):
        # `source`: where the settings came from; `rewrite`: an array of tables (tested in
        # tests/config/test_rule_tables.py)
        if field.name in ("source", "rewrite"):
            continue
        cls = hints[field.name]
        if dataclasses.is_dataclass(cls):
            keys.update(f"{field.name}.{item.name}" for item in dataclasses.fields(cls)
                        if item.metadata.get(IN_FILE, True))  # `rules.command_line`: --rule only
        else:
            keys.add(f"bridge.{field.name}")
    keys.update(f"{table}.{key}" for table, extra in FILE_ONLY_KEYS.items() for key in extra)
    return keys


def test_the_tables_here_name_every_field() -> None:
    assert set(SAMPLES) == every_key()
    assert set(WRONG_TYPES) == every_key()


def test_the_schema_has_a_key_for_every_field() -> None:
    assert {f"{table}.{key}" for table, keys in schema().items() for key in keys} == every_key()
    assert list(schema()) == ["agent", "suggestions", "system_prompt", "capture", "relay", "telemetry", "health", "commands",
                            "repair", "rules", "bridge"]


def expected_value(value: Any, tmp_path: Path) -> Any:
    """`value`, with "<tmp>" the config file's folder ("<real>": resolved, as a cwd is)."""
    if isinstance(value, str):
        return value.replace("<tmp>", str(tmp_path)).replace("<real>", str(tmp_path.resolve()))
    if isinstance(value, tuple):
        return tuple(expected_value(item, tmp_path) for item in value)
    return value


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_each_key_sets_its_field(tmp_path: Path, key: str) -> None:
    toml, path, expected = SAMPLES[key]
    table, name = key.split(".")
    config = read_config(write(tmp_path, f"[{table}]\n{name} = {toml}\n"))
    value = field_value(config, path)
    assert value == expected_value(expected, tmp_path)
    assert type(value) is type(expected)  # a tuple for an array, a float for a number
    assert field_value(Config(), path) != value


def test_every_key_at_once(tmp_path: Path) -> None:
    """All keys in one file (less the second spelling of a setting: file and dialect)."""
    tables: dict[str, list[str]] = {}
    for key, (toml, _, _) in SAMPLES.items():
        table, name = key.split(".")
        if key not in ("system_prompt.file", "system_prompt.dialect"):
            tables.setdefault(table, []).append(f"{name} = {toml}")
    text = "".join(f"[{table}]\n" + "\n".join(lines) + "\n" for table, lines in tables.items())
    config = read_config(write(tmp_path, text))
    for key, (_, path, expected) in SAMPLES.items():
        if key not in ("system_prompt.file", "system_prompt.dialect"):
            assert field_value(config, path) == expected_value(expected, tmp_path), key
    assert config.source == str(tmp_path / "c.toml")


@pytest.mark.parametrize("key", sorted(WRONG_TYPES))
def test_a_wrong_type_names_the_key_and_the_expected_type(tmp_path: Path, key: str) -> None:
    toml, problem = WRONG_TYPES[key]
    table, name = key.split(".")
    assert refused(tmp_path, f"[{table}]\n{name} = {toml}\n") == f"{key}: {problem}"


@pytest.mark.parametrize("table", ["agent", "suggestions", "system_prompt", "capture", "relay", "telemetry", "health", "commands",
                            "repair", "rules", "bridge"])
def test_an_unknown_key_names_its_path_and_the_known_keys(tmp_path: Path, table: str) -> None:
    message = refused(tmp_path, f"[{table}]\nfoo = 1\n")
    known = [key.split(".")[1] for key in SAMPLES if key.startswith(f"{table}.")]
    assert message.startswith(f"{table}.foo: unknown key (known: "), message
    assert sorted(message.removeprefix(f"{table}.foo: unknown key (known: ").rstrip(")").split(", ")) == sorted(known)


@pytest.mark.parametrize(("toml", "message"), [
    pytest.param("[nope]\n", "nope: unknown table (known tables: agent, suggestions, system_prompt, capture, "
                 "relay, telemetry, health, commands, repair, rules, bridge, rewrite)", id="table"),
    pytest.param("verbosity = 2\n", "verbosity: unknown key (known tables: agent, suggestions, system_prompt, "
                 "capture, relay, telemetry, health, commands, repair, rules, bridge, rewrite)", id="top-level-key"),
    pytest.param("source = 'x'\n", "source: unknown key (known tables: agent, suggestions, system_prompt, "
                 "capture, relay, telemetry, health, commands, repair, rules, bridge, rewrite)", id="source-is-no-key"),
    pytest.param("[bridge]\nsource = 'x'\n", "bridge.source: unknown key (known: strict, log_file, verbosity)",
                 id="source-is-not-in-bridge-either"),
    pytest.param("relay = []\n", "relay: must be a table", id="not-a-table"),
])
def test_unknown_tables_and_shapes(tmp_path: Path, toml: str, message: str) -> None:
    assert refused(tmp_path, toml) == message


@pytest.mark.parametrize(("hint", "types"), [
    (bool, (bool,)),
    (int, (int,)),
    (float, (int, float)),
    (str, (str,)),
    (str | None, (str,)),
    (float | None, (int, float)),
    (tuple[str, ...], (list,)),
    (Mapping[str, str], (dict,)),
    (dict[str, int], (dict,)),
    (int | str, (int, str)),
])
def test_file_types_of_a_field(hint: Any, types: tuple[type, ...]) -> None:
    assert file_types(hint) == types


def test_a_field_type_the_file_cannot_spell_is_a_bug_not_a_silent_key() -> None:
    with pytest.raises(TypeError, match="no TOML type"):
        file_types(datetime.date)
