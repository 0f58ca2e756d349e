"""The optional extras (pyproject.toml): whether the modules one brings can be imported, and
the one line that says how to get them. Imports nothing of the package, so a command can ask
before importing anything of the feature."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence


def install(extra: str) -> str:
    """The pip command that installs `extra`, from the package index and from a clone."""
    return f"pip install 'acp-bridge-proxy[{extra}]' (in a clone: pip install '.[{extra}]')"


def missing(modules: Sequence[str], needs: str, extra: str) -> str | None:
    """None when every one of `modules` can be imported; else one line: `needs` (what needs
    them), the first one missing, and the pip command that installs the extra."""
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package missing, or a broken install
            found = False
        if not found:
            return f"{needs}, which is not installed ({name} not found): {install(extra)}"
    return None
