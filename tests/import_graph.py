"""The package's import graph, read from its source: every module, and the modules of the
package each one imports (anywhere in it: inside functions and under TYPE_CHECKING too)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import acp_bridge

PACKAGE = Path(acp_bridge.__file__).parent


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["acp_bridge", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = modules()


def _resolve(name: str) -> str | None:
    while name not in MODULES:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(path: Path) -> Iterator[str]:
    """The package's modules that `path` imports, anywhere in it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target is not None:
                yield target


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's imports of the package (parsed when a test first asks, not at
    collection: every xdist worker collects this module)."""
    return {name: set(imports_of(path)) - {name} for name, path in MODULES.items()}
