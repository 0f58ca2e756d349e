"""The `[[rewrite]]` rule: one table of the configuration file, a rule written without Python.

    [[rewrite]]
    name = "no-usage-updates"
    direction = "to-client"
    update = "usage_update"
    drop = true

Before: {"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update",...}}}
After:  nothing (the notification is not forwarded)

Owns: matching a message against a table (`direction`, `method`, `update`, `where`), what it
does to one (`drop`, else `set` then `remove`), and the trigger bytes that let the relay leave
every other notification unparsed. Must never: change a message in place (the pointer helpers
copy along the path), re-encode a message it does not change, or fail on a message's shape:
a pointer that runs through a non-object leaves the message as it came, said once.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from acp_bridge.core.messages import Direction, Frame
from acp_bridge.core.pointer import (
    PointerError,
    Tokens,
    get_pointer,
    json_equal,
    parse_pointer,
    remove_pointer,
    set_pointer,
)
from acp_bridge.core.protocol import Json
from acp_bridge.core.rewrites.base import DROP, EVERY_LINE, PASS, Outcome, Replace, Rule
from acp_bridge.core.rewrites.settings import RewriteSettings
from acp_bridge.core.session import Session

log = logging.getLogger("acp_bridge.rules")

UPDATE_KIND: Tokens = ("params", "update", "sessionUpdate")
DIRECTIONS = {"to-client": frozenset({Direction.TO_CLIENT}), "to-agent": frozenset({Direction.TO_AGENT}),
              "both": frozenset(Direction)}
# Characters a JSON string may spell in more than one way (`\/` is `/`): a trigger must not
# span them. (`\u` escapes need no care here: the relay parses every line that has one.)
_SPELT_TWO_WAYS = re.compile(r'[/"\\\x00-\x1f\x7f]')


def trigger_for(text: str) -> bytes | None:
    """Bytes every line that has the JSON string `text` contains, or None for none.

    `"usage_update"` quoted whole; for `session/update`, whose `/` may be written `\\/`, the
    part after the last such character with its closing quote (`update"`), which is what
    tells one method from another. None when nothing is left (`text` ends with a `/`).
    """
    if not _SPELT_TWO_WAYS.search(text):
        return b'"' + text.encode() + b'"'
    last = _SPELT_TWO_WAYS.split(text)[-1]
    return last.encode() + b'"' if last else None


def table_triggers(settings: RewriteSettings) -> tuple[bytes, ...]:
    """What a notification must contain for the table to concern it: its update kind, else
    its method; a table that names neither looks at every notification (EVERY_LINE)."""
    for text in (settings.update, settings.method):
        if text is not None:
            trigger = trigger_for(text)
            if trigger is not None:
                return (trigger,)
    return EVERY_LINE


def matches(msg: Json, direction: Direction, table: TableRule) -> bool:
    """Does the message travelling `direction` meet every condition of the table?"""
    if direction not in table.directions:
        return False
    if table.method is not None and msg.get("method") != table.method:
        return False
    if table.update is not None:
        kind = get_pointer(msg, UPDATE_KIND)
        if type(kind) is not str or kind != table.update:
            return False
    return all(json_equal(get_pointer(msg, tokens), value) for tokens, value in table.where)


def edited(msg: Json, sets: tuple[tuple[Tokens, Any], ...], removes: tuple[Tokens, ...]) -> Json:
    """`msg` with each `set` made, then each `remove`; copied along the paths only.

    Raises PointerError when a pointer runs through a non-object.
    """
    for tokens, value in sets:
        msg = set_pointer(msg, tokens, value)
    for tokens in removes:
        msg = remove_pointer(msg, tokens)
    return msg


class TableRule(Rule):
    """One `[[rewrite]]` table. Requests and notifications only: a response carries no
    method to match (responses are for rules written in Python, which get the request)."""

    triggers = EVERY_LINE  # each instance names its own (`table_triggers`)

    def __init__(self, settings: RewriteSettings) -> None:
        self.name = settings.name
        self.directions = DIRECTIONS[settings.direction]
        self.method = settings.method
        self.update = settings.update
        self.where = tuple((parse_pointer(pointer), value) for pointer, value in settings.where.items())
        self.drop = settings.drop
        self.sets = tuple((parse_pointer(pointer), value) for pointer, value in settings.set.items())
        self.removes = tuple(parse_pointer(pointer) for pointer in settings.remove)
        self.triggers = table_triggers(settings)
        self.unfit = 0  # messages a pointer could not be applied to (the first is said)

    def request(self, frame: Frame, session: Session) -> Outcome:
        return self._apply(frame)

    def notification(self, frame: Frame, session: Session) -> Outcome:
        return self._apply(frame)

    def _apply(self, frame: Frame) -> Outcome:
        msg = frame.msg
        if msg is None or not matches(msg, frame.direction, self):
            return PASS
        if self.drop:
            return DROP
        try:
            changed = edited(msg, self.sets, self.removes)
        except PointerError as exc:
            self.unfit += 1
            if self.unfit == 1:
                log.warning("rule %r: %s in %r; it went on as it came (further ones are not reported)",
                            self.name, exc, frame)
            return PASS
        if json_equal(changed, msg):  # already so: the line goes on as it came, bytes and all
            return PASS
        return Replace(changed)
