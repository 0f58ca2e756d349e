"""Keep session update kinds a client does not know from reaching it.

A strict client (one that validates against the schema it was built with) fails on a
`sessionUpdate` it has never heard of. This rule lets through only the kinds in KNOWN, toward
the client; edit the set to what your client knows. For a single kind, a `[[rewrite]]` table
does the same without Python (configs/no-usage-updates.toml).

Use:   acp-bridge run --rule configs/rules/known_updates_only.py -- my-agent
Cost:  its trigger is `"sessionUpdate"`, so every session/update line is parsed (a few
       microseconds each); a rule about one kind should name that kind as its trigger.
"""

from acp_bridge.rules import DROP, PASS, Direction, Message, Outcome, Rule, SessionFacts, get_pointer

KNOWN = frozenset({
    "user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update",
    "plan", "available_commands_update", "current_mode_update",
})


class KnownUpdatesOnly(Rule):
    """Before: {"method":"session/update","params":{"update":{"sessionUpdate":"usage_update",...}}}
    After:  nothing (the notification is not forwarded)"""

    name = "known-updates-only"
    triggers = (b'"sessionUpdate"',)

    def notification(self, msg: Message, session: SessionFacts) -> Outcome:
        if msg.direction is not Direction.TO_CLIENT or msg.method != "session/update":
            return PASS
        kind = get_pointer(msg.msg, "/params/update/sessionUpdate")
        return PASS if kind in KNOWN or not isinstance(kind, str) else DROP


rules = [KnownUpdatesOnly()]
