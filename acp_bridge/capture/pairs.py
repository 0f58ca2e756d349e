"""Requests and their responses paired over a capture's records, as the live bridge pairs
them (core/session.py, `Connection`'s pending table): `stats`, the exported page, the replay's
turns, script and client side all pair through `Pairs`.

Owns: the key of a request in flight, its direction and its id as written (`id_key`: `1`,
`1.0`, `true` and `"1"` are all different ids, and both sides may number from 0), and which
request a response answers: the oldest one in flight with its id that travelled the other
way. A request whose id is already in flight from the same side (a peer's bug) waits behind
it for its own answer, as in the live `Connection`.
Must never: read a message (callers hand in the direction and id of a record), or hold more
than `max_open` requests when given one (the oldest in flight is then forgotten).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from acp_bridge.core.messages import id_key

T = TypeVar("T")
TO_AGENT, TO_CLIENT = "to-agent", "to-client"


def answered_by(direction: Any) -> str:
    """The direction of the requests a response travelling `direction` answers (a record's
    direction as written: anything but "to-client" is taken for "to-agent")."""
    return TO_AGENT if direction == TO_CLIENT else TO_CLIENT


def _key(direction: Any, id_: Any) -> tuple[Any, ...]:
    """The key of a request in flight: its direction and its id as written, in one tuple and
    the direction as the one string of its name (a record's own copy of "to-agent" is
    another 57 bytes per request in flight: `stats` may hold a million)."""
    side = TO_AGENT if direction == TO_AGENT else TO_CLIENT if direction == TO_CLIENT else str(direction)
    return (side, *id_key(id_))


class Pairs(Generic[T]):
    """The requests in flight, each as whatever the caller keeps of it (`T`: a record, a
    row's index, a message), until a response pairs with it."""

    def __init__(self, max_open: int | None = None) -> None:
        self.max_open = max_open
        self._pending: dict[tuple[Any, ...], T] = {}
        # requests whose id was already in flight from the same side, in the order they came
        self._same_id: dict[tuple[Any, ...], list[T]] = {}
        self._waiting = 0  # how many `_same_id` holds

    def __repr__(self) -> str:
        return f"<Pairs open={len(self)}>"

    def __len__(self) -> int:
        return len(self._pending) + self._waiting

    def request(self, direction: Any, id_: Any, item: T) -> None:
        """A request that travelled `direction` with `id_`, kept as `item` until answered."""
        key = _key(direction, id_)
        if key in self._pending:
            self._same_id.setdefault(key, []).append(item)
            self._waiting += 1
        else:
            self._pending[key] = item
        if self.max_open is not None and len(self) > self.max_open:
            self._forget_oldest()

    def response(self, direction: Any, id_: Any) -> T | None:
        """What was kept of the request a response travelling `direction` with `id_`
        answers, at most once; None when none in flight has its id."""
        key = _key(answered_by(direction), id_)
        item = self._pending.pop(key, None)
        if item is not None and self._same_id:
            self._promote(key)
        return item

    def open(self) -> list[T]:
        """The requests still in flight (those waiting behind the same id last)."""
        return [*self._pending.values(), *(item for later in self._same_id.values() for item in later)]

    def _promote(self, key: tuple[Any, ...]) -> None:
        later = self._same_id.get(key)
        if later:
            self._pending[key] = later.pop(0)
            self._waiting -= 1
            if not later:
                del self._same_id[key]

    def _forget_oldest(self) -> None:
        key = next(iter(self._pending))
        del self._pending[key]
        if self._same_id:
            self._promote(key)
