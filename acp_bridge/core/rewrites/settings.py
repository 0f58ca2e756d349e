"""What each built-in rule is configured with, as the rule reads it.

Owns: the choices a system-prompt setting may take, and the settings each rule's constructor
takes, as protocols: `acp_bridge.config.model`'s dataclasses are one implementation, so the
core never imports the configuration (which sits above it) and the configuration's model
imports nothing of the package. Must never: import a rule (the configuration's file reader
imports this module to check the choices, and a run without a prompt loads no rule's shapes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

SYSTEM_PROMPT_MODES = ("append", "override")
CLIENT_PROMPT_POLICIES = ("merge", "keep", "replace")
ON_UNSUPPORTED = ("auto", "meta", "first-prompt", "error", "skip")


class SuggestionsSettings(Protocol):
    """`[suggestions]` (interface.md)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def unlock_legacy_agent(self) -> bool: ...


class SystemPromptSettings(Protocol):
    """`[system_prompt]` (interface.md); `text` None turns injection off."""

    @property
    def text(self) -> str | None: ...

    @property
    def mode(self) -> str: ...  # SYSTEM_PROMPT_MODES

    @property
    def client_prompt(self) -> str: ...  # CLIENT_PROMPT_POLICIES

    @property
    def on_unsupported(self) -> str: ...  # ON_UNSUPPORTED

    @property
    def strict(self) -> bool: ...


class CommandsSettings(Protocol):
    """`[commands]` (interface.md): the commands mirror (bridge-rules 6.1)."""

    @property
    def mirror_initial(self) -> bool: ...


class RepairSettings(Protocol):
    """`[repair]` (interface.md): repairs of what agents leave undone (bridge-rules 6.2)."""

    @property
    def close_tool_calls(self) -> bool: ...


REWRITE_DIRECTIONS = ("to-client", "to-agent", "both")


class RewriteSettings(Protocol):
    """One `[[rewrite]]` table (interface.md): which messages (`direction`, `method`,
    `update`: `params.update.sessionUpdate`, `where`: JSON pointers that must equal these
    values) and what to do with them (`drop`, else `set` then `remove`, by JSON pointer)."""

    @property
    def name(self) -> str: ...

    @property
    def direction(self) -> str: ...  # REWRITE_DIRECTIONS

    @property
    def method(self) -> str | None: ...

    @property
    def update(self) -> str | None: ...

    @property
    def where(self) -> Mapping[str, Any]: ...

    @property
    def drop(self) -> bool: ...

    @property
    def set(self) -> Mapping[str, Any]: ...

    @property
    def remove(self) -> tuple[str, ...]: ...
