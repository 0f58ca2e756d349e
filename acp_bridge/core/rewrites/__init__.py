"""The built-in rules' registry: `build_rewrites(config)` is the one place that sets their order
(the user's rules come after them, in the order `acp_bridge.config.rules` sets)."""

from __future__ import annotations

from typing import Protocol

from acp_bridge.core.rewrites.base import DROP, EVERY_LINE, PASS, Emit, Outcome, Replace, Rewrite, Rule
from acp_bridge.core.rewrites.settings import (
    CommandsSettings,
    RepairSettings,
    SuggestionsSettings,
    SystemPromptSettings,
)

__all__ = ["DROP", "EVERY_LINE", "PASS", "Emit", "Outcome", "Replace", "Rewrite", "Rule", "RuleSettings",
           "build_rewrites"]


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


def build_rewrites(config: RuleSettings) -> list[Rewrite]:
    """The rewrites a configuration asks for, in the order they run."""
    from acp_bridge.core.rewrites.suggestions import PromptSuggestions

    rewrites: list[Rewrite] = []
    if config.suggestions.enabled:
        rewrites.append(PromptSuggestions(config.suggestions))
    if config.system_prompt.text is not None:
        from acp_bridge.core.rewrites.system_prompt import SystemPrompt  # only then: start-up

        rewrites.append(SystemPrompt(config.system_prompt))
    if config.commands.mirror_initial:
        from acp_bridge.core.rewrites.commands import MirrorCommands

        rewrites.append(MirrorCommands())
    if config.repair.close_tool_calls:
        from acp_bridge.core.rewrites.tool_calls import CloseToolCalls

        rewrites.append(CloseToolCalls())
    return rewrites
