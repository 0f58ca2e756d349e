"""Findings on the bridge's own work, not the peers' traffic: a rule that failed on a
message, and a system prompt sent through a fallback because the agent lacks the
`systemPrompt` capability.

Owns: `rule-failed` (one finding per rule whatever the sessions, every failure counted, the
error quoted cut short) and `system-prompt-fallback`, and how a `rule-failed` finding names
what failed. A mixin of `engine.Engine`, which owns counting and telling; kept apart so that
the engine holds the rules that read the traffic. Must never: do IO, read a clock, or format
a failure it only counts.
"""

from __future__ import annotations

from typing import Any

from acp_bridge.core import shapes as read
from acp_bridge.core.messages import TO_AGENT, Direction
from acp_bridge.core.protocol import Json

RULE_FAILED = "rule-failed"
ERROR_SHOWN = 200  # characters of a rule's error in its finding


def rule_key(rule: str | None) -> tuple[str, str | None]:
    """What `rule-failed` is counted by instead of a session: the rule (never a session's
    key, which is a (type, value) pair)."""
    return ("rule", rule)


def failed_rule(rule: str | None) -> str:
    """What failed, as a `rule-failed` finding says it (None: the rules were not asked)."""
    return f"rule {rule!r} failed" if rule else "the rules could not change a message"


class WorkRules:
    """The findings on the bridge's own work (see the module docstring); `Engine` mixes them in."""

    counts: dict[tuple[str, Any], int]

    def flag(self, code: str, session: Any, at: float, seq: int | None, text: str, *args: Any,
             direction: Direction | None = None, method: str | None = None, id_: Any = None,
             per: Any = None) -> None:
        raise NotImplementedError  # Engine.flag

    def rule_failed(self, rule: str | None, error: Any, session: Any, at: float, seq: int | None = None, *,
                    direction: Direction | None = None, method: str | None = None, id_: Any = None) -> None:
        """A rule failed on a message, which went on as it came (verdict `error`; `rule` None:
        the rules were not asked, since nothing they made of it could be written back). One
        finding per rule, whatever the sessions; every failure is counted."""
        key = (RULE_FAILED, rule_key(rule))
        n = self.counts.get(key)
        if n is not None:  # told already: a rule failing on every line is counted, not formatted
            self.counts[key] = n + 1
            return
        why = str(error) if error is not None else "?"
        if len(why) > ERROR_SHOWN:
            why = why[:ERROR_SHOWN] + "…"
        self.flag(RULE_FAILED, session, at, seq, f"{failed_rule(rule)}: {{}} (the message went on as it came)", why,
                  direction=direction, method=method, id_=id_, per=key[1])

    def system_prompt_sent(self, method: str | None, request: Json | None, out: Any, at: float,
                           seq: int | None) -> None:
        """The system-prompt rule rewrote `request` into `out`: note the dialect when it is not
        the spec's, with the request's id and session (none yet for a `session/new`)."""
        dialect = read.system_prompt_dialect(method, out)
        if dialect in ("meta", "first-prompt"):
            request = request or {}
            self.flag("system-prompt-fallback", read.session_id_of(request), at, seq,
                      f"the system prompt went through {dialect}: the agent lacks the systemPrompt capability",
                      direction=TO_AGENT, method=method, id_=request.get("id"))
