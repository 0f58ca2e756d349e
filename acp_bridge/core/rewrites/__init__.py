"""The built-in rules' registry: `built_ins()` is the one place that lists them and sets their
order, each declared in its own module (the user's rules come after them, in the order
`acp_bridge.config.rules` sets); `build_rewrites(config)` makes those a configuration turns on."""

from __future__ import annotations

from typing import Protocol

from acp_bridge.core.rewrites.base import DROP, EVERY_LINE, PASS, Emit, Outcome, Replace, Rule
from acp_bridge.core.rewrites.options import BuiltIn
from acp_bridge.core.rewrites.settings import (
    CommandsSettings,
    RepairSettings,
    SuggestionsSettings,
    SystemPromptSettings,
)

__all__ = ["DROP", "EVERY_LINE", "PASS", "BuiltIn", "Emit", "Outcome", "Replace", "Rule", "RuleSettings",
           "build_rewrites", "built_ins"]


class RuleSettings(Protocol):
    """What the rules are configured from (`acp_bridge.config.Config` is one)."""

    @property
    def suggestions(self) -> SuggestionsSettings: ...

    @property
    def system_prompt(self) -> SystemPromptSettings: ...

    @property
    def commands(self) -> CommandsSettings: ...

    @property
    def repair(self) -> RepairSettings: ...


def built_ins() -> tuple[BuiltIn, ...]:
    """Every built-in's declaration (`DECLARED` in its module), in the order they see each
    message: stray output first (the relay's own repair, before any rule), then the rules.
    The command line, the file's checks, `acp-bridge rules` and the reserved names are made
    from these: a new built-in is its module and one entry here."""
    from acp_bridge.core.rewrites import commands, stray_output, suggestions, system_prompt_options, tool_calls

    return (stray_output.DECLARED, suggestions.DECLARED, system_prompt_options.DECLARED, commands.DECLARED,
            tool_calls.DECLARED)


def build_rewrites(config: RuleSettings) -> list[Rule]:
    """The rewrites a configuration asks for, in the order they run."""
    return [built_in.make(config) for built_in in built_ins() if built_in.rule is not None and built_in.is_on(config)]
