"""Turn a stop reason the client does not know into `end_turn`.

A `session/prompt` response ends a turn with a `stopReason`; a client built against an older
schema may reject one it does not know. The response is matched with the request it answers
(the `request` argument), so only prompt turns are touched, and only toward the client.

Use:   acp-bridge run --rule configs/rules/stop_reason.py -- my-agent
"""

from acp_bridge.rules import PASS, Direction, Message, Outcome, Pending, Replace, Rule, SessionFacts, set_pointer

KNOWN = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})


class KnownStopReasons(Rule):
    """Before: {"id":3,"result":{"stopReason":"paused"}}
    After:  {"id":3,"result":{"stopReason":"end_turn","_meta":{"stopReason":"paused"}}}"""

    name = "known-stop-reasons"

    def response(self, msg: Message, request: Pending, session: SessionFacts) -> Outcome:
        if msg.direction is not Direction.TO_CLIENT or request.method != "session/prompt":
            return PASS
        result = msg.msg.get("result") if msg.msg else None
        reason = result.get("stopReason") if isinstance(result, dict) else None
        if not isinstance(reason, str) or reason in KNOWN:
            return PASS
        changed = set_pointer(msg.msg, "/result/stopReason", "end_turn")
        return Replace(set_pointer(changed, "/result/_meta/stopReason", reason))  # kept, for whoever reads _meta


rules = [KnownStopReasons()]
