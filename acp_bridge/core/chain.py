"""Chain: the ordered rewrites run over one parsed message.

Owns: which hooks each kind of message calls (only those a rewrite overrides, in the order
`build_rewrites` gave), running them with each seeing the previous one's output, and
collecting what they decided, and naming the rule that failed (`RuleError`: it raised, or
returned something that is no outcome). Must never: encode, choose what goes on the wire,
or decide what a failure means (the relay decides whether it fails open or stops the bridge).
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp_bridge.core.messages import NOTIFICATION, REQUEST, RESPONSE, Direction, Frame, Kind, id_key, is_request
from acp_bridge.core.printable import printable
from acp_bridge.core.rewrites.base import PASS, Emit, Replace, Rule
from acp_bridge.core.session import Connection, Pending
from acp_bridge.core.unparsed import has_escape
from acp_bridge.errors import BridgeError

if TYPE_CHECKING:
    from acp_bridge.core.forward import Forward
    from acp_bridge.core.lines import Opaque

_HOOKS = ((Kind.REQUEST, "request"), (Kind.RESPONSE, "response"), (Kind.NOTIFICATION, "notification"))


ERROR_SHOWN = 500  # characters of what a rule raised, in its one stderr line and each record


def raised(error: BaseException) -> str:
    """What a rule's code raised, in brief, as it is said (`TypeError: text`): its text cut
    at ERROR_SHOWN characters, and never raising itself (a rule's exception whose own
    str() fails, or recurses, is still its failure)."""
    try:
        text = str(error)
    except Exception:
        text = "<str() failed>"
    if len(text) > ERROR_SHOWN:
        text = f"{text[:ERROR_SHOWN]}... ({len(text)} characters)"
    return f"{type(error).__name__}: {text}"


class RuleError(BridgeError):
    """Rule `rule` raised `error` (its `__cause__`), or returned something that is no
    outcome. Fails open; with strict, it stops the bridge, and this names the rule.
    `detail`: the error in brief (a rule may raise with a whole message in its text, and
    each failing line's capture record carries it)."""

    def __init__(self, rule: str, error: BaseException) -> None:
        self.detail = raised(error)
        super().__init__(printable(f"rule {rule!r} failed: {self.detail}", quote_backslash=False))
        self.rule = rule
        self.error = error
        # What the same input made before the line the rule failed on (the relay fills it
        # in): sent before the bridge stops, as it would have been one line at a time.
        self.sent_first: list[Forward] = []
        # The complete lines the same input held after that one, not yet looked at (the
        # relay fills it in): the bridge stops on it, and answers the client requests among
        # them as it answers every later one (`Relay.refuse_rest`).
        self.rest: list[bytes | Opaque] = []


class _Shown(reprlib.Repr):
    def repr_instance(self, x: object, level: int) -> str:
        try:
            text = repr(x)
        except Exception:  # the rule's own class: its repr may raise or recurse
            return f"<{type(x).__name__} instance>"  # (reprlib's own would show an address)
        return text if len(text) <= self.maxother else text[:self.maxother - 3] + "..."


_SHOWN = _Shown()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 80, 80


def _shown(value: object) -> str:
    """What a rule returned, in brief: bounded in depth (a plain repr of a list nested
    100,000 deep raises RecursionError), and never raising (a repr of the rule's own
    class may)."""
    try:
        return _SHOWN.repr(value)
    except Exception:  # reprlib catches an instance's, not a container's
        return f"<{type(value).__name__} instance>"


def not_an_outcome(result: object) -> TypeError | None:
    """Why a hook's return value is no outcome, or None when it is one (PASS and None, which
    passes too, are checked before: this runs only for what a rule changes)."""
    if not isinstance(result, Replace):
        return TypeError(f"returned {_shown(result):.80}, not an outcome (PASS, DROP, Replace)")
    if result.msg is not None and not isinstance(result.msg, dict):
        return TypeError(f"Replace({type(result.msg).__name__}): the message must be a dict (a JSON object)")
    for key, emits in (("then", result.then), ("before", result.before)):
        if not isinstance(emits, (tuple, list)):
            return TypeError(f"Replace({key}={type(emits).__name__}): {key}= takes a tuple of Emit")
        for emit in emits:
            if not (isinstance(emit, Emit) and isinstance(emit.direction, Direction) and isinstance(emit.msg, dict)):
                return TypeError(f"{key}= holds {_shown(emit):.80}, not an Emit(Direction, dict)")
    return None


def shown_to(raw: bytes, triggers: tuple[bytes, ...]) -> bool:
    """Is a notification line shown to a rule with these triggers? When it holds one, or an
    escape, which could spell any of them (as the relay decides what to parse)."""
    for trigger in triggers:  # a loop: any() with a generator costs more per line
        if trigger in raw:
            return True
    return has_escape(raw)


@dataclass(slots=True)
class ChainResult:
    """What the rules made of one message: `frame` as it now reads (the input itself when
    no rule changed it), whether it is dropped, what the bridge must also send (`before` it,
    and after it: `emits`), and who. `id_by`: of a request, the last rule that changed its
    id or made it something else (a notification)."""

    frame: Frame
    dropped: bool = False
    rules: list[str] = field(default_factory=list)
    emits: list[Emit] = field(default_factory=list)
    before: list[Emit] = field(default_factory=list)
    id_by: str | None = None


def _same_id(msg: dict[str, Any], was: dict[str, Any] | None) -> bool:
    """Is `msg` (what a rule made of the request `was`) still a request, with its id?"""
    if was is None or is_request(msg) is not is_request(was):
        return False
    return id_key(msg.get("id")) == id_key(was.get("id"))


class Chain:
    def __init__(self, rewrites: Sequence[Rule]) -> None:
        self.rewrites = tuple(rewrites)
        # Per kind, only the hooks a rewrite overrides, in chain order: no call for nothing.
        # A notification hook comes with its rule's triggers: a line parsed for another
        # rule's is not shown to it (docs/rules.md promises as much).
        self._hooks: dict[Kind, tuple[tuple[str, Callable[..., Any], tuple[bytes, ...] | None], ...]] = {
            kind: tuple(
                (rw.name, getattr(rw, hook), tuple(rw.triggers) if kind is NOTIFICATION else None)
                for rw in self.rewrites
                if getattr(type(rw), hook) is not getattr(Rule, hook)
            )
            for kind, hook in _HOOKS
        }
        self.triggers = frozenset(t for rw in self.rewrites for t in rw.triggers)

    def __repr__(self) -> str:
        return f"<Chain [{', '.join(rw.name for rw in self.rewrites)}]>"

    def wants(self, kind: Kind) -> bool:
        """Does any rule look at this kind of message?"""
        return bool(self._hooks.get(kind))

    def run(self, frame: Frame, request: Pending | None, session: Connection) -> ChainResult | None:
        """Run the hooks for `frame`'s kind in order; a drop stops the chain. None: every
        rule passed (the usual case, so it allocates nothing). Raises `RuleError` naming
        the rule that raised or returned no outcome (a bug in that rule)."""
        outcome: ChainResult | None = None
        current = frame
        kind = frame.kind
        for name, hook, triggers in self._hooks[kind]:
            # Once a rule has changed the message, every later rule sees what it made.
            if triggers is not None and current is frame and not shown_to(frame.raw, triggers):
                continue
            try:  # free unless it raises (Python 3.11+)
                if kind is RESPONSE:
                    result = hook(current, request, session)
                else:
                    result = hook(current, session)
            except KeyboardInterrupt:  # Ctrl-C while a hook runs: the user's, not the rule's
                raise
            except BaseException as exc:  # exit(), GeneratorExit, BaseException(): that rule's bug only
                raise RuleError(name, exc) from exc
            if result is PASS or result is None:  # None: a hook that returns nothing passes
                continue
            wrong = not_an_outcome(result)
            if wrong is not None:
                raise RuleError(name, wrong)
            if outcome is None:
                outcome = ChainResult(frame)
            outcome.rules.append(name)
            outcome.emits.extend(result.then)
            outcome.before.extend(result.before)
            if result.msg is None:
                outcome.dropped = True
                break
            if result.msg is not current.msg:  # Replace(same msg, then=...) only emits
                if kind is REQUEST and not _same_id(result.msg, current.msg):
                    outcome.id_by = name
                current = outcome.frame = current.with_msg(result.msg)
        return outcome
