"""The public surface for writing a rule: what a rule file (`run --rule FILE.py`, `[rules]
files`) or a package (entry-point group `acp_bridge.rules`) imports. docs/rules.md is its
guide.

    from acp_bridge.rules import DROP, Match, Rule

    class NoUsageUpdates(Rule):
        @Match(direction="to-client", update="usage_update")
        def notification(self, msg, session):
            return DROP

    rules = [NoUsageUpdates()]

Owns: nothing but names. The built-in rules are written against the same classes (in
`acp_bridge.core.rewrites.base`), so a user's rule runs exactly as they do. What may change
between API versions, and what may not, is in docs/rules.md; `API_VERSION` grows by one
when anything here changes in a way a rule could notice. Must never: hold behaviour of its
own (a second, slightly different rule API), or import anything above the core.
"""

from __future__ import annotations

from acp_bridge.core.messages import Direction, Kind
from acp_bridge.core.messages import Frame as Message
from acp_bridge.core.pointer import MISSING, PointerError, get_pointer, json_equal, remove_pointer, set_pointer
from acp_bridge.core.rewrites.base import DROP, EVERY_LINE, PASS, Emit, Outcome, Replace, Rule, SessionFacts
from acp_bridge.core.rewrites.table import Match
from acp_bridge.core.session import Pending

API_VERSION = 1

__all__ = [
    "API_VERSION", "DROP", "EVERY_LINE", "MISSING", "PASS", "Direction", "Emit", "Kind", "Match", "Message", "Outcome",
    "Pending", "PointerError", "Replace", "Rule", "SessionFacts", "get_pointer", "json_equal", "remove_pointer",
    "set_pointer",
]
