"""The rewrite registry: `build_rewrites(config)` is the one place that sets their order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp_bridge.core.rewrites.base import DROP, EVERY_LINE, PASS, Emit, Outcome, Replace, Rewrite

if TYPE_CHECKING:
    from acp_bridge.config import Config

__all__ = ["DROP", "EVERY_LINE", "PASS", "Emit", "Outcome", "Replace", "Rewrite", "build_rewrites"]


def build_rewrites(config: Config) -> list[Rewrite]:
    """The rewrites a configuration asks for, in the order they run."""
    from acp_bridge.core.rewrites.suggestions import PromptSuggestions
    from acp_bridge.core.rewrites.system_prompt import SystemPrompt

    rewrites: list[Rewrite] = []
    if config.suggestions.enabled:
        rewrites.append(PromptSuggestions(config.suggestions))
    if config.system_prompt.text is not None:
        rewrites.append(SystemPrompt(config.system_prompt))
    return rewrites
