"""The rules a configuration runs, in order, each with where it comes from.

Owns: the one order (the built-ins, the `[[rewrite]]` tables in file order, `[rules] enable`,
`[rules] files`, each `--rule`), loading a rule file (a Python file that defines `rules = [...]`)
and an entry point of the group `acp_bridge.rules`, and every way that can go wrong as one
`ConfigError` naming the file (and line). A rule file is code: it is run only from a path
the user named, and an entry point only when enabled by name; nothing is found by searching.
Must never: be imported by the core, or start the agent (this runs before it, so that bad
input is exit status 2 with nothing started).
"""

from __future__ import annotations

import itertools
import os
import stat
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_bridge.config import Config
from acp_bridge.core.answers import BRIDGE
from acp_bridge.core.chain import raised
from acp_bridge.core.printable import printable
from acp_bridge.core.rewrites import build_rewrites, built_ins
from acp_bridge.core.rewrites.base import Rule
from acp_bridge.errors import ConfigError

ENTRY_POINT_GROUP = "acp_bridge.rules"
BUILT_IN = "built-in"
MAX_RULE_FILE = 4 * 1024 * 1024  # a rule file larger than this is a mistake (a device, a log)
_counter = itertools.count(1)
# Names the bridge's own work carries in captures, `stats`, `check` and telemetry, whether or
# not it runs: the built-ins (the rules, diverted stray output), its answers for a gone agent.
RESERVED = frozenset({*(built_in.name for built_in in built_ins()), BRIDGE})


@dataclass(frozen=True)
class LoadedRule:
    """A rule and where it comes from (`acp-bridge rules` prints both)."""

    rule: Rule
    origin: str


def load_rules(config: Config) -> list[LoadedRule]:
    """Every rule `config` runs, in order. Raises ConfigError (a file that cannot be loaded,
    an entry point that is not installed, two rules with one name)."""
    from acp_bridge.core.rewrites.table import TableRule

    source = config.source or "<config>"
    loaded = [LoadedRule(rule, BUILT_IN) for rule in build_rewrites(config)]
    for index, table in enumerate(config.rewrite, 1):
        where = f"{source}:{table.line}" if table.line is not None else source
        loaded.append(LoadedRule(TableRule(table), f"{where} [[rewrite]] #{index}"))
    for name in config.rules.enable:
        loaded.extend(_entry_point(name, source))
    for path in config.rules.files:
        loaded.extend(LoadedRule(rule, f"{path} ([rules] files)") for rule in load_rule_file(Path(path)))
    for path in config.rules.command_line:
        loaded.extend(LoadedRule(rule, f"{path} (--rule)") for rule in load_rule_file(Path(path)))
    seen: dict[str, str] = {}
    for one in loaded:
        if one.origin != BUILT_IN and one.rule.name in RESERVED:
            raise _error(f"{one.origin}: {one.rule.name!r} is the name of the bridge's own work, which "
                         "captures and telemetry show it by: give the rule a `name` of its own")
        if one.rule.name in seen:
            raise _error(f"{one.origin}: a rule named {one.rule.name!r} is already loaded from "
                              f"{seen[one.rule.name]}: give it a `name` of its own")
        seen[one.rule.name] = one.origin
    return loaded


def load_rule_file(path: Path) -> list[Rule]:
    """The `rules` a Python file defines. Raises ConfigError naming the file (and line)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block, a device never end
            raise _error(f"{path}: not a regular file (a rule file is a Python file)")
        if info.st_size > MAX_RULE_FILE:
            raise _error(f"{path}: larger than {MAX_RULE_FILE // (1024 * 1024)} MiB: not a rule file")
        with open(path, "rb") as file:
            source = file.read(MAX_RULE_FILE + 1)
    except FileNotFoundError:
        raise _error(f"{path}: rule file not found") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise _error(f"{path}: cannot read the rule file: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        code = compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise _error(f"{path}{f':{exc.lineno}' if exc.lineno else ''}: syntax error: {exc.msg}") from None
    module = types.ModuleType(f"acp_bridge_rule_file_{next(_counter)}")
    module.__file__ = str(path)
    # Registered while it runs: a dataclass (or anything that looks its module up) needs it.
    sys.modules[module.__name__] = module
    try:
        exec(code, module.__dict__)
    except KeyboardInterrupt:
        del sys.modules[module.__name__]
        raise
    except BaseException as exc:  # exit(), a bare BaseException: bad input, not a traceback
        del sys.modules[module.__name__]
        line = _line_in(exc, str(path))
        raise _error(f"{path}{f':{line}' if line else ''}: loading it raised {raised(exc)}") from None
    return checked_rules(module.__dict__.get("rules", _NONE), str(path))


_NONE: Any = object()


def _error(text: str) -> ConfigError:
    """One line, whatever a path or a rule file's exception holds (a newline, an escape)."""
    return ConfigError(printable(text, quote_backslash=False))


def checked_rules(value: Any, where: str) -> list[Rule]:
    """`value` as a list of rules, or ConfigError saying what is wrong with it."""
    if value is _NONE:
        raise _error(f"{where}: defines no rules: end it with `rules = [MyRule()]`, a list of rule instances")
    if not isinstance(value, (list, tuple)):
        raise _error(f"{where}: `rules` is {_what(value)}, not a list of rules")
    if not value:  # most likely a rule commented out, or a list meant to be filled in
        raise _error(f"{where}: `rules` is empty: a rule file that runs nothing is a mistake; "
                     "list at least one rule, `rules = [MyRule()]`")
    for index, rule in enumerate(value):
        try:
            problem = rule_problem(rule)
        except Exception as exc:  # a `name` or `triggers` property that raises
            problem = f"cannot be read: {type(exc).__name__}: {exc}"
        if problem:
            raise _error(f"{where}: rules[{index}] {problem}")
    return list(value)


def rule_problem(rule: Any) -> str | None:
    """Why `rule` cannot run, or None: checked once here, not on every line."""
    if isinstance(rule, type) and issubclass(rule, Rule):
        return f"is the class {rule.__name__}, not an instance: write {rule.__name__}()"
    if not isinstance(rule, Rule):
        return f"is {_what(rule)}, not a rule (an instance of acp_bridge.rules.Rule)"
    name = rule.name
    if not isinstance(name, str) or not name or not name.isprintable():
        return f"has the name {name!r}: a rule's name is a non-empty string without control characters"
    triggers = rule.triggers
    if not isinstance(triggers, (tuple, list)) or not all(isinstance(t, bytes) for t in triggers):
        return f"({name}) has triggers {triggers!r:.80}: a tuple of bytes, such as (b'\"usage_update\"',)"
    return None


def _what(value: Any) -> str:
    return f"a {type(value).__name__}"


def _entry_point(name: str, source: str) -> list[LoadedRule]:
    from importlib.metadata import entry_points  # only with [rules] enable: start-up

    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        raise _error(f"{source}: rules.enable: no installed package offers a rule named {name!r} "
                          f"(entry point group {ENTRY_POINT_GROUP})")
    point = next(iter(found))
    where = f"entry point {name} ({point.value})"
    try:
        value = point.load()
        if callable(value) and not isinstance(value, Rule):  # a class or a factory
            value = value()
        if isinstance(value, Rule):  # an entry point may name one rule
            value = [value]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise _error(f"{where}: loading it raised {raised(exc)}") from None
    return [LoadedRule(rule, where) for rule in checked_rules(value, where)]


def _line_in(exc: BaseException, filename: str) -> int | None:
    """The line of `filename` where `exc` was raised (the deepest frame in that file)."""
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return exc.lineno
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == filename]
    return lines[-1] if lines else None
