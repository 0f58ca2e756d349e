"""Prompt suggestions (bridge-rules.md section 2). Placeholder until issue 3 lands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp_bridge.core.rewrites.base import Rewrite

if TYPE_CHECKING:
    from acp_bridge.config import SuggestionsConfig


class PromptSuggestions(Rewrite):
    name = "suggestions"

    def __init__(self, config: SuggestionsConfig) -> None:
        self.config = config
