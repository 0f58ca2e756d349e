"""The configuration's rule tables: `[rules]` and each `[[rewrite]]`, checked at load time.

Owns: what a type cannot say about them: pointers that parse, values that are JSON, a
direction among the three, a table that does something and says what to, paths resolved
against the config file, and the line of each `[[rewrite]]` header (for errors and
`acp-bridge rules`). Must never: import a rule file or an entry point (that runs code:
`config/rules.py` does it, once the whole configuration is known), or start anything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from acp_bridge.config import RewriteConfig, RulesConfig
from acp_bridge.config.schema import array_schema, type_names
from acp_bridge.core.pointer import parse_pointer
from acp_bridge.core.rewrites.settings import REWRITE_DIRECTIONS
from acp_bridge.errors import ConfigError

Error = Callable[[str, str], ConfigError]  # (key, problem) -> the error naming the file
_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*(?:rewrite|\"rewrite\"|'rewrite')[ \t]*\]\]", re.MULTILINE)


def header_lines(text: str | None, count: int) -> list[int | None]:
    """The line of each `[[rewrite]]` header, when the text shows one per table (an inline
    `rewrite = [{...}]`, or a header inside a multi-line string, leaves them unknown)."""
    if text is None:
        return [None] * count
    found = [text.count("\n", 0, match.start()) + 1 for match in _HEADER.finditer(text)]
    return list(found) if len(found) == count else [None] * count


def read_rules(values: Mapping[str, Any], path: Callable[[str], Path], error: Error) -> RulesConfig:
    """[rules]: `files` (`path`: where each leads, from the config file's folder), `enable`
    entry-point names."""
    files = values.get("files", ())
    enable = values.get("enable", ())
    for key, items in (("files", files), ("enable", enable)):
        for item in items:
            if not isinstance(item, str) or not item or "\0" in item:
                raise error(f"rules.{key}", f"{item!r} is not a {'path' if key == 'files' else 'name'}")
    return RulesConfig(files=tuple(str(path(file)) for file in files), enable=tuple(enable))


def read_rewrites(tables: Any, text: str | None, error: Error) -> tuple[RewriteConfig, ...]:
    """Each `[[rewrite]]` table, in file order. Raises ConfigError naming the table (by its
    position and, when known, its line) and the key."""
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise error("rewrite", "must be an array of tables ([[rewrite]] headers)")
    known = array_schema()["rewrite"]
    out = []
    for index, (table, line) in enumerate(zip(tables, header_lines(text, len(tables)), strict=True), 1):
        where = f"rewrite[{index}]" + (f" (line {line})" if line is not None else "")

        def fail(key: str, problem: str, where: str = where) -> ConfigError:
            return error(f"{where}.{key}" if key else where, problem)

        for key, value in table.items():
            types = known.get(key)
            if types is None:
                raise fail(key, f"unknown key (known: {', '.join(known)})")
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise fail(key, f"expected {type_names(types)}, got {type(value).__name__}")
        out.append(_rewrite(table, index, line, fail))
    return tuple(out)


def _rewrite(table: dict[str, Any], index: int, line: int | None,
             fail: Callable[[str, str], ConfigError]) -> RewriteConfig:
    name = table.get("name", f"rewrite-{index}")
    if not name or not name.isprintable():
        raise fail("name", f"{name!r} is not a name (not empty, no control characters)")
    direction = table.get("direction", "both")
    if direction not in REWRITE_DIRECTIONS:
        raise fail("direction", f"{direction!r} is not one of {', '.join(REWRITE_DIRECTIONS)}")
    for key in ("method", "update"):
        if key in table and not table[key]:
            raise fail(key, "is empty")
    where = _pointers(table.get("where", {}), "where", fail, whole_ok=True)
    sets = _pointers(table.get("set", {}), "set", fail, whole_ok=False)
    remove = table.get("remove", [])
    for pointer in remove:
        if not isinstance(pointer, str):
            raise fail("remove", f"{pointer!r} is not a JSON pointer (a string, RFC 6901)")
        _pointer(pointer, "remove", fail, whole_ok=False)
    drop = table.get("drop", False)
    if drop and (sets or remove):
        raise fail("drop", "drops the message: set and remove would never apply; give one or the other")
    if not drop and not sets and not remove:
        raise fail("", "does nothing: give drop = true, set = {...} or remove = [...]")
    if drop and not ("method" in table or "update" in table or where):
        raise fail("drop", "with no method, update or where, this would drop every message")
    return RewriteConfig(name=name, direction=direction, method=table.get("method"), update=table.get("update"),
                         where=where, drop=drop, set=sets, remove=tuple(remove), line=line)


def _pointers(values: Mapping[str, Any], key: str, fail: Callable[[str, str], ConfigError], *,
              whole_ok: bool) -> dict[str, Any]:
    for pointer, value in values.items():
        _pointer(pointer, key, fail, whole_ok=whole_ok)
        problem = not_json(value)
        if problem:
            raise fail(f"{key}.{pointer!r}", problem)
    return dict(values)


def _pointer(pointer: str, key: str, fail: Callable[[str, str], ConfigError], *, whole_ok: bool) -> None:
    try:
        parse_pointer(pointer)
    except ValueError as exc:
        raise fail(key, str(exc)) from None
    if pointer == "" and not whole_ok:
        raise fail(key, '"" is the whole message: a rule replaces or drops a message, not sets it')


def not_json(value: Any, depth: int = 0) -> str | None:
    """Why a TOML value cannot stand in a JSON message (a date, a time, nan, inf, an integer
    past 64 bits), or None."""
    if depth > 64:
        return "nested too deeply"
    if isinstance(value, (str, bool)):
        return None
    if isinstance(value, int):  # TOML's are 64-bit; tomllib reads any, which orjson cannot write
        return None if -(2**63) <= value < 2**63 else f"{value} is beyond TOML's 64-bit integers (write it as a string)"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number"
    if isinstance(value, list):
        return next((p for p in (not_json(v, depth + 1) for v in value) if p), None)
    if isinstance(value, dict):
        return next((p for p in (not_json(v, depth + 1) for v in value.values()) if p), None)
    return f"a TOML {type(value).__name__} is not a JSON value (write it as a string)"
