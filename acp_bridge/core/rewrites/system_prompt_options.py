"""The system-prompt rule's declaration (`core/rewrites/options.py`): its name and its options.

Owns: what `run`, the configuration and the observers know of the rule without loading it.
Apart from the rule (`system_prompt.py`) because that and its shapes are imported only when a
system prompt is configured: a plain run must not pay for them (tests/commands/test_run_imports.py).
Must never: import the rule (it is named by its path, loaded by `BuiltIn.make`).
"""

from __future__ import annotations

from acp_bridge.core.rewrites.options import CHOICE, FILE, TEXT, BuiltIn, Option
from acp_bridge.core.rewrites.settings import SYSTEM_PROMPT_MODES

NAME = "system-prompt"

DECLARED = BuiltIn(
    NAME, switch="system_prompt.text", rule="acp_bridge.core.rewrites.system_prompt:SystemPrompt",
    settings="system_prompt", rank=10,
    options=(
        Option("system_prompt", "system_prompt.text", "--system-prompt", "ACP_BRIDGE_SYSTEM_PROMPT",
               "System prompt text to inject into session setup.", TEXT, metavar="TEXT"),
        Option("system_prompt_file", "system_prompt.file", "--system-prompt-file", "ACP_BRIDGE_SYSTEM_PROMPT_FILE",
               "Read the system prompt from FILE (UTF-8; trailing newlines dropped). Text or file: the "
               "command line replaces the environment, which replaces the config file.", FILE, metavar="FILE"),
        Option("system_prompt_mode", "system_prompt.mode", "--system-prompt-mode", "ACP_BRIDGE_SYSTEM_PROMPT_MODE",
               "append (default) adds to the agent's instructions; override replaces them.", CHOICE,
               default="append", choices=SYSTEM_PROMPT_MODES),
    ),
)
