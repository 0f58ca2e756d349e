"""The configuration file's schema, derived from the dataclasses of `config/model.py`.

Owns: which tables and keys the file has and which TOML types each key takes. A field of
`Config` whose type is a dataclass is a table ([agent], [relay], ...), each of its fields a
key; the other fields of `Config` are the bridge's own settings, the keys of [bridge]. So
a new field is a new key, and the two cannot drift. Must never: read a file.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping
from types import UnionType
from typing import Any

from acp_bridge.config import IN_FILE, Config, RewriteConfig
from acp_bridge.core.rewrites import built_ins
from acp_bridge.core.rewrites.options import FILE

#
# Derived from the dataclasses, so that a field is a key: a field of `Config` whose type is a
# dataclass is a table ([agent], [relay], ...), each of its fields a key; the other fields of
# `Config` are the bridge's own settings, the keys of [bridge].

Schema = dict[str, dict[str, tuple[type, ...]]]
Fail = Callable[[str], Exception]

BRIDGE_TABLE = "bridge"
# Keys of the file that are no field of their table's dataclass: a built-in rule's text as a
# file (its FILE option: the system prompt's `file`, read into `text`), and the old name of
# `on_unsupported`.
FILE_ONLY_KEYS: dict[str, dict[str, tuple[type, ...]]] = {}
for _option in (option for built_in in built_ins() for option in built_in.options if option.kind == FILE):
    FILE_ONLY_KEYS.setdefault(_option.table, {})[_option.field] = (str,)
FILE_ONLY_KEYS.setdefault("system_prompt", {})["dialect"] = (str,)
# A second shape the file may give a field in: a command line as one string, split as a
# shell would (`shlex.split`, see `_agent`).
ALSO_ACCEPTED: dict[tuple[str, str], tuple[type, ...]] = {("agent", "command"): (str,)}
# The TOML values that can stand for each Python type (TOML's integers are numbers too).
FILE_TYPES: dict[Any, tuple[type, ...]] = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


# Arrays of tables ([[rewrite]]): each element is a table of its dataclass's keys, and the
# `Config` field of the same name holds them in file order.
ARRAY_TABLES: dict[str, type[Any]] = {"rewrite": RewriteConfig}


@functools.cache
def array_schema() -> Schema:
    """Each array of tables, and the keys of its elements."""
    return {name: _keys(name, cls) for name, cls in ARRAY_TABLES.items()}


def table_classes() -> dict[str, type[Any]]:
    """The tables of the file and the dataclass each one reads into, in the order of `Config`."""
    return {name: hint for name, hint in settable_fields(Config).items()
            if isinstance(hint, type) and dataclasses.is_dataclass(hint)}


@functools.cache
def schema() -> Schema:
    """Every table of the file, its keys, and the TOML types each key accepts."""
    tables = {name: _keys(name, cls) for name, cls in table_classes().items()}
    tables[BRIDGE_TABLE] = {name: file_types(hint) for name, hint in settable_fields(Config).items()
                            if name not in tables}
    return tables


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """`cls`'s field types, resolved (this module postpones annotations)."""
    return typing.get_type_hints(cls)


def settable_fields(cls: type) -> dict[str, Any]:
    """`cls`'s fields that the file may set, with their types."""
    hints = field_types(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.metadata.get(IN_FILE, True)}


def _keys(table: str, cls: type[Any]) -> dict[str, tuple[type, ...]]:
    keys = {name: file_types(hint) for name, hint in settable_fields(cls).items()}
    for (also_table, name), types in ALSO_ACCEPTED.items():
        if also_table == table:
            keys[name] = (*keys[name], *types)
    return {**keys, **FILE_ONLY_KEYS.get(table, {})}


def file_types(hint: Any) -> tuple[type, ...]:
    """The TOML values a field of type `hint` is given as: `float` takes 1 and 1.5, a tuple
    an array, a mapping a table; None is the absence of the key, so `str | None` is `str`."""
    types: list[type] = []
    for one in alternatives(hint):
        origin = typing.get_origin(one) or one
        if origin in (tuple, list):
            types.append(list)
        elif origin in (dict, Mapping):
            types.append(dict)
        elif one in FILE_TYPES:
            types.extend(FILE_TYPES[one])
        else:
            raise TypeError(f"no TOML type for {one!r}: teach file_types() how the file spells it")
    return tuple(dict.fromkeys(types))


def alternatives(hint: Any) -> tuple[Any, ...]:
    """The types of a union but None (`str | None`: `str`), or the type itself."""
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        return tuple(arg for arg in typing.get_args(hint) if arg is not type(None))
    return (hint,)


def type_names(types: tuple[type, ...]) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "an array", dict: "a table"}
    return " or ".join(names.get(t, t.__name__) for t in types)
