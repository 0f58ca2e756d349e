"""Chain: the ordered rewrites run over one parsed message.

Owns: which hooks each kind of message calls (only those a rewrite overrides, in the order
`build_rewrites` gave), running them with each seeing the previous one's output, and
collecting what they decided. Must never: encode, choose what goes on the wire, or catch a
rule's exception (the relay decides whether a failing rule fails open or stops the bridge).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp_bridge.core.messages import RESPONSE, Frame, Kind
from acp_bridge.core.rewrites.base import PASS, Emit, Replace, Rewrite
from acp_bridge.core.session import Pending, Session

_HOOKS = ((Kind.REQUEST, "request"), (Kind.RESPONSE, "response"), (Kind.NOTIFICATION, "notification"))


@dataclass(slots=True)
class ChainResult:
    """What the rules made of one message: `frame` as it now reads (the input itself when
    no rule changed it), whether it is dropped, what the bridge must also send (`before` it,
    and after it: `emits`), and who."""

    frame: Frame
    dropped: bool = False
    rules: list[str] = field(default_factory=list)
    emits: list[Emit] = field(default_factory=list)
    before: list[Emit] = field(default_factory=list)


class Chain:
    def __init__(self, rewrites: Sequence[Rewrite]) -> None:
        self.rewrites = tuple(rewrites)
        # Per kind, only the hooks a rewrite overrides, in chain order: no call for nothing.
        self._hooks: dict[Kind, tuple[tuple[str, Callable[..., Any]], ...]] = {
            kind: tuple(
                (rw.name, getattr(rw, hook)) for rw in self.rewrites
                if getattr(type(rw), hook) is not getattr(Rewrite, hook)
            )
            for kind, hook in _HOOKS
        }
        self.triggers = frozenset(t for rw in self.rewrites for t in rw.triggers)

    def __repr__(self) -> str:
        return f"<Chain [{', '.join(rw.name for rw in self.rewrites)}]>"

    def wants(self, kind: Kind) -> bool:
        """Does any rule look at this kind of message?"""
        return bool(self._hooks.get(kind))

    def run(self, frame: Frame, request: Pending | None, session: Session) -> ChainResult | None:
        """Run the hooks for `frame`'s kind in order; a drop stops the chain. None: every
        rule passed (the usual case, so it allocates nothing). Raises what a rule raises (a
        bug in that rule)."""
        outcome: ChainResult | None = None
        current = frame
        kind = frame.kind
        for name, hook in self._hooks[kind]:
            if kind is RESPONSE:
                result = hook(current, request, session)
            else:
                result = hook(current, session)
            if result is PASS:
                continue
            assert isinstance(result, Replace)
            if outcome is None:
                outcome = ChainResult(frame)
            outcome.rules.append(name)
            outcome.emits.extend(result.then)
            outcome.before.extend(result.before)
            if result.msg is None:
                outcome.dropped = True
                break
            if result.msg is not current.msg:  # Replace(same msg, then=...) only emits
                current = outcome.frame = current.with_msg(result.msg)
        return outcome
