"""System prompt injection (bridge-rules.md section 3). Placeholder until issue 4 lands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp_bridge.core.rewrites.base import Rewrite

if TYPE_CHECKING:
    from acp_bridge.config import SystemPromptConfig


class SystemPrompt(Rewrite):
    name = "system-prompt"

    def __init__(self, config: SystemPromptConfig) -> None:
        self.config = config
