"""What a pure module must not do (import trio, click or the IO modules, read a clock or a time
zone, open a file), which modules are pure, and the check that reads them."""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
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


def problems_of(tree: ast.AST, pure: frozenset[str] = frozenset()) -> list[str]:
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
        found = problems_of(ast.parse(Path(spec.origin).read_text(encoding="utf-8")), pure)
        if found:
            problems[name] = found
    return problems
