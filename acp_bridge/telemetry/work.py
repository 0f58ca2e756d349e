"""The bridge's own work as span events: suggestion updates converted, dropped or sent, and
the dialect that carried the system prompt (docs/telemetry.md, "Events").

Owns: reading what the rules did from a line's verdict, its rules and what went out.
Must never: look at lines no rule touched (the builder calls it only for those), do IO, or
raise on any shape from the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.answers import BRIDGE
from acp_bridge.core.rewrites.suggestions import PromptSuggestions
from acp_bridge.core.rewrites.system_prompt_options import NAME as SYSTEM_PROMPT
from acp_bridge.core.session import Pending
from acp_bridge.telemetry import spans as s
from acp_bridge.telemetry.fields import add_event, suggestion_count
from acp_bridge.telemetry.spans import SpanRecord, Timed

SpanOf = Callable[[Any], SpanRecord | None]
_OWN_EVENTS = frozenset({PromptSuggestions.name, SYSTEM_PROMPT, BRIDGE})  # events of their own (bridge: its answers)
RequestSpanOf = Callable[[Pending | None], SpanRecord | None]


class BridgeWork:
    """Events for what the rules did, on spans the builder looks up.

    Args:
        current: a session's open turn span, else its session span (None: unknown session).
        session: a session's span.
        request: the span of a request in flight, by the relay's `Pending` for it.
    """

    def __init__(self, current: SpanOf, session: SpanOf, request: RequestSpanOf) -> None:
        self.current, self.session, self.request = current, session, request
        # A suggestion update just dropped: converted, if the bridge sends its other form next.
        self._dropped: tuple[SpanRecord, float, dict[str, Any]] | None = None

    def feed(self, timed: Timed) -> None:
        msg = timed.msg if type(timed.msg) is dict else {}
        session_id = read.session_id_of(msg)
        if PromptSuggestions.name in timed.rules and timed.verdict in ("rewrite", "drop", "emit"):
            self._suggestion(timed, session_id)
        if SYSTEM_PROMPT in timed.rules and timed.verdict == "rewrite":
            self._system_prompt(timed, msg, session_id)
        for rule in timed.rules:
            if rule not in _OWN_EVENTS or timed.verdict == "error":
                self._rule(timed, rule, session_id)

    def _rule(self, timed: Timed, rule: str, session_id: Any) -> None:
        """Any other rule (the user's: `[[rewrite]]`, `--rule`), or a rule that failed: an
        event naming it and its verdict, on the request's span or the session's current one."""
        span = self.request(timed.request) if timed.request is not None else None
        if span is None:
            span = self.current(session_id)
        if span is not None:
            add_event(span, s.RULE_EVENT, timed.wall, {s.RULE_NAME: rule, s.RULE_VERDICT: timed.verdict})

    def _system_prompt(self, timed: Timed, msg: dict[str, Any], session_id: Any) -> None:
        method = msg.get("method")
        dialect = read.system_prompt_dialect(method, timed.sent)
        if dialect is None:
            return
        if method == p.SESSION_PROMPT:
            span = self.current(session_id)
            session = self.session(session_id)
            if session is not None:
                session.attributes.setdefault(s.DIALECT, dialect)
        else:  # session setup: on its request span; the session takes it when it starts
            span = self.request(timed.request)
            if span is not None:
                span.attributes[s.DIALECT] = dialect
        if span is not None:
            add_event(span, "acp_bridge.system_prompt", timed.wall, {s.DIALECT: dialect})

    def _suggestion(self, timed: Timed, session_id: Any) -> None:
        """An event per suggestion update the bridge changed: converted (rewritten in place,
        or dropped and sent again in the other form, in the same read), dropped, or sent by
        the bridge itself (a withdrawal: `acp_bridge.suggestions` 0)."""
        span = self.current(session_id)
        if span is None:
            return
        count = suggestion_count(timed.msg)
        last, self._dropped = self._dropped, None
        if timed.verdict == "emit" and last is not None and last[0] is span and last[1] == timed.wall:
            last[2].update({s.BRIDGE_ACTION: "converted", s.SUGGESTIONS: count})
            return
        action = {"rewrite": "converted", "drop": "dropped", "emit": "sent"}[timed.verdict]
        attrs: dict[str, Any] = {s.BRIDGE_ACTION: action, s.SUGGESTIONS: count}
        add_event(span, "acp_bridge.suggestion", timed.wall, attrs)
        if timed.verdict == "drop":
            self._dropped = (span, timed.wall, attrs)
