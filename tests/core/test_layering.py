"""The pure parts stay pure: every module of acp_bridge.core, and every module of
acp_bridge.capture but its shell, imports neither trio nor click, and reads no clock, time
zone, file, process or socket (the shell passes times in and does the IO)."""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import acp_bridge.capture
import acp_bridge.core

# The capture's shell: the file, the commands, the page, the path template and local time;
# the catalog of the folders `ui` and `mcp` serve (it lists them and opens captures).
CAPTURE_SHELL = frozenset({"acp_bridge.capture.files", "acp_bridge.capture.html", "acp_bridge.capture.catalog"})
# Modules of the package that import nothing of it, which a pure module may import too.
LEAVES = frozenset({"acp_bridge", "acp_bridge.errors"})
# Modules a pure module must not import, and names it must not use: the clock and the time
# zone (datetime.now, time.localtime...), processes, sockets and the file system.
FORBIDDEN_MODULES = frozenset({"os", "subprocess", "socket", "time", "zoneinfo", "shutil", "pathlib"})
FORBIDDEN_CALLS = frozenset({"now", "utcnow", "today", "localtime", "mktime", "tzset", "astimezone"})  # x.now()
FORBIDDEN_BUILTINS = frozenset({"open", "input"})


def pure_modules() -> list[str]:
    core = [m.name for m in pkgutil.walk_packages(acp_bridge.core.__path__, "acp_bridge.core.")]
    capture = [m.name for m in pkgutil.walk_packages(acp_bridge.capture.__path__, "acp_bridge.capture.")]
    return ["acp_bridge.core", *core, "acp_bridge.capture", *(m for m in capture if m not in CAPTURE_SHELL)]


def test_the_walk_finds_the_modules() -> None:
    names = pure_modules()
    assert len(names) >= 15  # core/, rewrites/, capture/
    assert {"acp_bridge.core.relay", "acp_bridge.core.rewrites.base", "acp_bridge.capture.records",
            "acp_bridge.capture.redaction", "acp_bridge.capture.spellings", "acp_bridge.capture.reader", "acp_bridge.capture.stats"} <= set(names)
    assert CAPTURE_SHELL.isdisjoint(names)
    for name in CAPTURE_SHELL:  # the shell list names real modules
        assert importlib.util.find_spec(name) is not None


def test_pure_modules_import_neither_trio_nor_click() -> None:
    code = (
        "import sys, importlib\n"
        f"for name in {pure_modules()!r}: importlib.import_module(name)\n"
        "bad = [m for m in ('trio', 'click', 'subprocess', 'socket', 'acp_bridge.config') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _problems(tree: ast.AST, pure: frozenset[str] = frozenset()) -> list[str]:
    """What in `tree` a pure module must not do; `pure`: the package modules it may import."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"from {node.module} import ...")
            elif node.module.startswith("acp_bridge.") and node.module not in pure:
                found.append(f"from {node.module} import ...: not pure")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_CALLS:
            found.append(f".{node.attr}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS:
            found.append(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("fromtimestamp", "fromordinal") and len(node.args) < 2 \
                and not any(k.arg == "tz" for k in node.keywords):
            found.append(f".{node.func.attr}() without a time zone: local time")
    return found


def problems_in(names: Iterable[str], pure: frozenset[str]) -> dict[str, list[str]]:
    """What each of the modules `names` does that a pure module must not (none: left out)."""
    problems = {}
    for name in names:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        found = _problems(ast.parse(Path(spec.origin).read_text(encoding="utf-8")), pure)
        if found:
            problems[name] = found
    return problems


def test_pure_modules_read_no_clock_time_zone_file_or_process() -> None:
    pure = frozenset(pure_modules())
    assert problems_in(pure, pure | LEAVES) == {}


def test_the_check_sees_what_it_forbids() -> None:
    for source in ("import os", "import time", "from os import path", "import subprocess as sp",
                   "from socket import socket", "x = datetime.now()", "time.localtime(1)",
                   "datetime.fromtimestamp(1)", "open('f')", "from acp_bridge.capture.files import local_clock"):
        assert _problems(ast.parse(source), frozenset({"acp_bridge.capture.records"})), source
    for source in ("import json", "now = 1.5", "datetime.fromtimestamp(1, timezone.utc)",
                   "datetime.fromtimestamp(1, tz=timezone.utc)", "from acp_bridge.core import os_like",
                   "from acp_bridge import __version__", "from acp_bridge.capture.records import dumps"):
        assert not _problems(ast.parse(source), frozenset({"acp_bridge.core", "acp_bridge.capture.records"})), source
