"""The system-prompt rule's settings: `[system_prompt]` (interface.md) and the values its
keys take.

Owns: `SystemPromptConfig` and the modes, client-prompt policies and fallbacks a file or
an option may name. Apart from the rule's shapes (`system_prompt_shapes.py`, which
re-exports them) because the configuration, which every run loads, needs these and not
the dialects, plans and request edits that only a configured prompt uses (issue 17:
start-up). Must never: import the rule or its shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

SYSTEM_PROMPT_MODES = ("append", "override")
CLIENT_PROMPT_POLICIES = ("merge", "keep", "replace")
ON_UNSUPPORTED = ("auto", "meta", "first-prompt", "error", "skip")


@dataclass(frozen=True)
class SystemPromptConfig:
    """`[system_prompt]` (interface.md); read and checked by `acp_bridge.config`."""

    text: str | None = None  # None: injection off
    mode: str = "append"  # SYSTEM_PROMPT_MODES
    client_prompt: str = "merge"  # CLIENT_PROMPT_POLICIES
    on_unsupported: str = "auto"  # ON_UNSUPPORTED
    strict: bool = False
