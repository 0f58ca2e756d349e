"""The `[[rewrite]]` rule: one table of the configuration file, a rule written without Python.

    [[rewrite]]
    name = "no-usage-updates"
    direction = "to-client"
    update = "usage_update"
    drop = true

Before: {"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update",...}}}
After:  nothing (the notification is not forwarded)

Owns: `Match`, the one matcher of a message (`direction`, `method`, `update`, `where`), for a
table and for a rule written in Python (`acp_bridge.rules`); what a table does to one (`drop`,
else `set` then `remove`); and the trigger bytes that let the relay leave every other
notification unparsed. Must never: change a message in place (the pointer helpers
copy along the path), re-encode a message it does not change, or fail on a message's shape:
a pointer that runs through a non-object leaves the message as it came, said once.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from acp_bridge.core.messages import Direction, Frame
from acp_bridge.core.pointer import (
    PointerError,
    Tokens,
    get_pointer,
    json_equal,
    parse_pointer,
    remove_pointer,
    same_json,
    set_pointer,
)
from acp_bridge.core.protocol import Json
from acp_bridge.core.rewrites.base import DROP, EVERY_LINE, PASS, Outcome, Replace, Rule
from acp_bridge.core.rewrites.settings import RewriteSettings
from acp_bridge.core.session import Connection

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
    """What a notification must contain for the table to concern it (`match_triggers`)."""
    return match_triggers(settings.method, settings.update)


def match_triggers(method: str | None, update: str | None) -> tuple[bytes, ...]:
    """What a notification must contain to match: its update kind, else its method; a match
    that names neither looks at every notification (EVERY_LINE)."""
    for text in (update, method):
        if text is not None:
            trigger = trigger_for(text)
            if trigger is not None:
                return (trigger,)
    return EVERY_LINE


H = TypeVar("H", bound=Callable[..., Any])


class Match:
    """Which messages a rule concerns, as a `[[rewrite]]` table names them: `direction`
    ("to-client", "to-agent", "both" or a `Direction`), `method`, `update` (the update
    kind, `params.update.sessionUpdate`) and `where` (JSON pointers whose values must equal
    these, as JSON means it). Every condition given must hold; none given matches every
    message. As mitmproxy's filters, test a message with `.matches(msg)`, or decorate a
    hook, which is then called only with the messages that match (the others pass):

        class NoUsageUpdates(Rule):
            @Match(direction="to-client", update="usage_update")
            def notification(self, msg, session):
                return DROP

    `triggers`: the bytes a matching notification contains; a rule whose `notification` is
    decorated takes them as its own when it names none. Raises ValueError for a direction
    it does not know, a method or update kind that is no string, or a `where` key that is no
    JSON pointer.
    """

    __slots__ = ("_where", "directions", "method", "triggers", "update", "where")

    def __init__(self, direction: str | Direction = "both", method: str | None = None,
                 update: str | None = None, where: Mapping[str, Any] | None = None) -> None:
        if isinstance(direction, Direction):
            self.directions = frozenset({direction})
        elif isinstance(direction, str) and direction in DIRECTIONS:
            self.directions = DIRECTIONS[direction]
        else:
            raise ValueError(f"direction {direction!r} is not one of {', '.join(DIRECTIONS)} or a Direction")
        for key, text in (("method", method), ("update", update)):
            if text is not None and not isinstance(text, str):
                raise ValueError(f"{key} {text!r} is not a string")
        self.method = method
        self.update = update
        self._where = dict(where or {})  # as given, for repr
        self.where = tuple((parse_pointer(pointer), value) for pointer, value in self._where.items())
        self.triggers = match_triggers(method, update)

    @classmethod
    def of_table(cls, settings: RewriteSettings) -> Match:
        """The match a `[[rewrite]]` table names."""
        return cls(settings.direction, settings.method, settings.update, settings.where)

    def __repr__(self) -> str:
        direction = next(iter(self.directions)).value if len(self.directions) == 1 else "both"
        named = [f"direction={direction!r}"]
        named += [f"{key}={value!r}" for key, value in (("method", self.method), ("update", self.update)) if value]
        if self._where:
            named.append(f"where={self._where!r}")
        return f"Match({', '.join(named)})"

    def matches(self, msg: Frame) -> bool:
        """Does this parsed line (a hook's `msg`) meet every condition?"""
        parsed = msg.msg
        if parsed is None or msg.direction not in self.directions:
            return False
        if self.method is not None and parsed.get("method") != self.method:
            return False
        if self.update is not None:
            kind = get_pointer(parsed, UPDATE_KIND)
            if type(kind) is not str or kind != self.update:
                return False
        return all(json_equal(get_pointer(parsed, tokens), value) for tokens, value in self.where)

    def __call__(self, hook: H) -> H:
        """`hook`, called only with the messages that match; the others pass."""
        matches = self.matches

        @functools.wraps(hook)
        def matched(rule: Any, msg: Frame, *rest: Any) -> Any:
            return hook(rule, msg, *rest) if matches(msg) else PASS

        matched.triggers = self.triggers  # type: ignore[attr-defined]  # read by Rule.__init_subclass__
        return matched  # type: ignore[return-value]


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

    triggers = EVERY_LINE  # each instance names its own (its `Match`'s)

    def __init__(self, settings: RewriteSettings) -> None:
        self.name = settings.name
        self.match = Match.of_table(settings)
        self.drop = settings.drop
        self.sets = tuple((parse_pointer(pointer), value) for pointer, value in settings.set.items())
        self.removes = tuple(parse_pointer(pointer) for pointer in settings.remove)
        self.triggers = self.match.triggers
        self.unfit = 0  # messages a pointer could not be applied to (the first is said)

    def request(self, frame: Frame, session: Connection) -> Outcome:
        return self._apply(frame)

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        return self._apply(frame)

    def _apply(self, frame: Frame) -> Outcome:
        msg = frame.msg
        if msg is None or not self.match.matches(frame):
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
        if same_json(changed, msg):  # already so: the line goes on as it came, bytes and all
            return PASS
        return Replace(changed)
