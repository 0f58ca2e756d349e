"""The migration report: what the suggestion and system-prompt rules met on one connection.

Owns: the counts of which suggestion form each side used and how often, what the bridge
wrote or took out, which system-prompt dialect carried the prompt, which rules changed or
failed on messages, the form the client reads, and the one-sentence verdict drawn from them.
Must never: read records or feed the findings engine (`health/offline.py` does, and counts
here), do IO, or read a clock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.protocol import Json
from acp_bridge.core.rewrites.suggestions import PromptSuggestions
from acp_bridge.core.session import Connection

UNWRITABLE = "(cannot be written back)"  # `failed_by_rule`'s name for a message no rule was asked about


@dataclass
class Migration:
    """What the suggestion and system-prompt rules met on one connection."""

    client_form: str = "unknown"  # new, legacy (AIR only), both, none, unknown (no initialize seen)
    # The form the client reads as the suggestions rule decides it (`core/shapes.client_form`:
    # NEW, LEGACY or None), what the verdict goes by; None too while no initialize was seen.
    reads: str | None = None
    agent_legacy: int = 0  # suggestion updates the agent sent, per form
    agent_new: int = 0
    client_legacy: int = 0  # suggestion updates the client received, per form
    client_new: int = 0
    written: int = 0  # suggestion updates the bridge wrote (conversions, withdrawals)
    withdrawals: int = 0  # of those, empty lists
    taken_out: int = 0  # agent suggestion updates not forwarded as they came
    dialects: Counter[str] = field(default_factory=Counter)  # spec, meta, first-prompt, refused
    changed: Counter[str] = field(default_factory=Counter)  # messages changed or written, per rule
    # Messages a rule failed on (verdict error), per rule ("": what the rules made of it
    # could not be written back, so they were not asked).
    failed: Counter[str] = field(default_factory=Counter)
    # Changes the pair does not need: the bridge's withdrawal on a prompt when the agent then
    # withdrew as well, and the agent's own withdrawals the bridge held back as repeats.
    redundant: int = 0
    _awaiting: dict[Any, int] = field(default_factory=dict)  # session -> bridge withdrawals not yet echoed

    def as_json(self) -> Json:
        return {
            "client_form": self.client_form,
            "agent_sent": {"legacy": self.agent_legacy, "new": self.agent_new},
            "client_received": {"legacy": self.client_legacy, "new": self.client_new},
            "bridge_wrote": self.written, "withdrawals": self.withdrawals, "taken_out": self.taken_out,
            "system_prompt": dict(self.dialects), "changed_by_rule": dict(self.changed),
            "needed_by_rule": dict(self.needed()),
            "failed_by_rule": {rule or UNWRITABLE: n for rule, n in self.failed.items()},
        }

    def needed(self) -> Counter[str]:
        """`changed` without the redundant changes."""
        needed = Counter(self.changed)
        needed[PromptSuggestions.name] -= self.redundant
        return +needed

    def verdict(self) -> str:
        """One sentence: does this pair still need the bridge, and why. Never that it can be
        removed while a rule failed: what the rule would have done is not known."""
        failed = ", ".join(f"{rule or 'a message they could not change'} {n}x"
                           for rule, n in sorted(self.failed.items(), key=lambda item: (not item[0], item[0])))
        if not self.needed():
            if failed:
                return (f"rules failed ({failed}): what they would have done is not known, so whether the "
                        "bridge can be removed is not either; fix them and check a new capture")
            return "nothing was rewritten: the bridge can be removed"
        reasons = []
        known = self.client_form != "unknown"
        if self.agent_legacy and self.reads == read.NEW:
            reasons.append(f"the agent sends suggestions in the legacy form ({self.agent_legacy}x), "
                           "converted for a client that reads the new form")
        if self.agent_new and self.reads == read.LEGACY:
            reasons.append(f"the client reads only the legacy form and the agent sends the new form "
                           f"({self.agent_new}x)")
        if known and self.reads is None and (self.agent_legacy or self.agent_new):
            reasons.append("the client reads no suggestions and the agent sends them (taken out)")
        if self.taken_out and not reasons:  # the forms match: the lifetime rules took them out
            reasons.append(f"the bridge took out suggestions the agent sent where the client must not get "
                           f"them ({self.taken_out}x: during history replay, or for a turn already over)")
        unechoed = sum(self._awaiting.values())
        if unechoed:
            reasons.append(f"the bridge withdrew suggestions on the next prompt ({unechoed}x), which the agent "
                           "did not do")
        fallback = [d for d in ("meta", "first-prompt") if self.dialects.get(d)]
        if fallback:
            reasons.append(f"the agent lacks the systemPrompt capability (the prompt went through "
                           f"{' and '.join(fallback)})")
        elif self.dialects.get("spec"):
            reasons.append("the system prompt comes from the bridge's configuration")
        if self.dialects.get("refused"):
            reasons.append("the bridge refused session setup it could not give the system prompt to")
        if not reasons:
            rules = ", ".join(f"{rule} {n}x" for rule, n in sorted(self.needed().items()))
            reasons.append(f"it changed or wrote messages ({rules})")
        if failed:
            reasons.append(f"and rules failed ({failed}), so it may need it for more")
        return "this pair still needs the bridge because " + "; ".join(reasons)


def suggestions_out(migration: Migration, msg: Json, *, written: bool, form: str | None = None) -> None:
    """A suggestion update that reached the client (`form`: its form, when known)."""
    form = form or suggestion_form(msg)
    if form is None:
        return
    if form == "legacy":
        migration.client_legacy += 1
    else:
        migration.client_new += 1
    if written:
        migration.written += 1
        if suggestions(msg, form) == []:
            migration.withdrawals += 1
            session = read.session_id_of(msg)
            migration._awaiting[session] = migration._awaiting.get(session, 0) + 1


def suggestion_form(msg: Any) -> str | None:
    """The form of suggestions a `session/update` carries (`core/shapes.suggestion_form`)."""
    if type(msg) is not dict or msg.get("method") != p.SESSION_UPDATE:
        return None
    return read.suggestion_form(read.update_of(msg))


def suggestions(msg: Any, form: str) -> Any:
    return read.suggestion_items(read.update_of(msg), form)


# `Migration.client_form` for each form the rule reads (`core/shapes.client_form`).
FORM_NAMES = {read.NEW: "new", read.LEGACY: "legacy (AIR only)", None: "none"}


def client_form(session: Connection) -> tuple[str | None, str]:
    """What the client reads, as the suggestions rule decides it (`core/shapes.client_form`),
    and its name in the report: "both" names a client that reads the new form and carries
    the AIR marker too; "unknown", a capture with no initialize."""
    if not session.client_ready:
        return None, "unknown"
    caps = session.client_caps  # what the rule reads: the client's initialize as the session kept it
    form = read.client_form(caps)
    if form == read.NEW and read.air_marker(caps):
        return form, "both"
    return form, FORM_NAMES[form]
