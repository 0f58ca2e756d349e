"""What `-v` and `-vv` say of the traffic, a line per message the rules touched (or every one).

Owns: the log lines about forwards: at `-v` (INFO) what the rules did (a rewrite, a drop,
the bridge's own messages, a rule's failure) and a response that pairs with no request; at
`-vv` (DEBUG) a line for every message. Logged under the bridge's logger, as the rest of
the shell's relay is. Must never: log a message's content (its method and id only), or
cost anything per message when neither level is on beyond a verdict check.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from acp_bridge.core import Forward, Kind, Verdict, classify
from acp_bridge.core.messages import brief

log = logging.getLogger("acp_bridge.shell.bridge")

_NOTEWORTHY = frozenset({Verdict.REWRITE, Verdict.DROP, Verdict.EMIT, Verdict.ERROR})


def log_forwards(forwards: Sequence[Forward]) -> None:
    """-v: what the rules did (rewrites, drops, the bridge's own messages, rule failures)
    and unpaired responses; -vv: a line for every message."""
    every = log.isEnabledFor(logging.DEBUG)
    for fwd in forwards:
        if fwd.verdict in _NOTEWORTHY:
            log.info("%s %s %s by %s (%d -> %d bytes)", fwd.direction.arrow, fwd.verdict.value,
                     _what(fwd), ", ".join(fwd.rules) or "-", len(fwd.raw), len(fwd.data))
        elif fwd.frame is not None and fwd.frame.kind is Kind.RESPONSE and fwd.request is None:
            log.info("%s response %s pairs with no request", fwd.direction.arrow, _what(fwd))
        elif every:
            for line in fwd.lines():
                log.debug("%s %s %s (%d bytes)", line.direction.arrow, line.verdict.value,
                          _what(line), len(line.raw))


def _what(fwd: Forward) -> str:
    frame = fwd.frame
    if frame is None and fwd.verdict is Verdict.EMIT:
        frame = classify(fwd.direction, fwd.data)
    if frame is None or frame.msg is None:
        return "line"
    if frame.kind is Kind.RESPONSE:
        method = fwd.request.method if fwd.request is not None else "?"
        return f"response id {brief(frame.id)} ({method})"
    return f"{frame.method} id {brief(frame.id)}" if frame.kind is Kind.REQUEST else str(frame.method)
