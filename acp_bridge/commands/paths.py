"""`UserPath`: a path option or argument of a command that an editor or an MCP client starts
(`run`, `setup`, `doctor`, `mcp`), where a leading `~` or `~user` is a home folder as a
shell would have made it.

Such a program starts the command with no shell, and nobody expands an environment
variable's value: `"args": ["run", "--capture", "~/acp/{time}.jsonl", ...]` in an editor's
settings made a folder named `~` in the editor's working directory. The config file's paths
are expanded the same way (config/file.py). Must never: expand anything else ($VAR, a glob),
which a file name may hold literally.
"""

from __future__ import annotations

import os
from typing import Any

import click


class UserPath(click.Path):
    """click.Path, after `os.path.expanduser`."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            value = os.path.expanduser(value)
        return super().convert(value, param, ctx)
