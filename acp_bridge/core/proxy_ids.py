"""The ids a proxy link puts on the wire, and what each one stands for.

Owns: the one counter of the link's own ids, and three tables, each kept both ways
(`BothWays`: our id -> the id it stands for, and that id, in one spelling per value, ->
ours): the envelopes
that carry the client's requests to the successor, the successor's requests given to the
client under ids of ours (and which of those are not yet written toward the client), and
the requests a rule sends the client, which go under ids of ours too. Each answer is taken
once. Must never: give one id of ours to two requests, let a later request under a reused
id lose its entry to an earlier one's answer, or keep an entry once it is answered.

core/proxy_link.py and core/proxy_to_client.py read and write these ids; what goes in and
out of an envelope is theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acp_bridge.core.proxy_wire import id_key, our_id_in


class BothWays:
    """Ids of ours, each standing for another id, kept both ways: ours -> that id (its
    text), and that id (`id_key`, one spelling per value) -> ours. A later entry under the
    same other id takes the reverse lookup; the earlier one's answer does not remove it."""

    __slots__ = ("_by_ours", "_by_theirs")

    def __init__(self) -> None:
        self._by_ours: dict[int, bytes] = {}
        self._by_theirs: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._by_ours)

    def __contains__(self, ours: object) -> bool:
        return ours in self._by_ours

    def add(self, ours: int, theirs: bytes) -> int:
        self._by_ours[ours] = theirs
        self._by_theirs[id_key(theirs)] = ours
        return ours

    def answered(self, ours: int | None) -> bytes | None:
        """The id `ours` stands for, taken once (None when it stands for none)."""
        if ours is None or ours not in self._by_ours:
            return None
        theirs = self._by_ours.pop(ours)
        if self._by_theirs.get(key := id_key(theirs)) == ours:  # not a later one under the same id
            del self._by_theirs[key]
        return theirs

    def ours(self, theirs_key: bytes) -> int | None:
        """Ours for the other id `theirs_key` (`id_key`), while it waits."""
        return self._by_theirs.get(theirs_key)


@dataclass
class LinkIds:
    """One link's ids (sans-IO): a new one for each request the link sends under its own,
    and the id it stands for given back once, when it is answered."""

    _next: int = 0
    _wrapped: BothWays = field(default_factory=BothWays)  # our envelope id <-> the client's id
    _upstream: BothWays = field(default_factory=BothWays)  # our id upstream <-> the conductor's envelope id
    _unsent: set[int] = field(default_factory=set)  # our ids upstream not yet written toward the client
    _emitted: BothWays = field(default_factory=BothWays)  # our id <-> a rule's id for its request to the client

    @property
    def in_flight(self) -> int:
        """Envelopes waiting for an answer, both ways."""
        return len(self._wrapped) + len(self._upstream)

    def _own_id(self) -> int:
        self._next += 1
        return self._next

    # -- the client's requests, in envelopes to the successor ----------------------------

    def wrapped_request(self, client_id: bytes) -> int:
        """The id of the envelope that carries the client's request `client_id`."""
        return self._wrapped.add(self._own_id(), client_id)

    def wrapped_answer(self, raw_id: bytes) -> bytes | None:
        """The client's id for the request whose envelope the answer `raw_id` answers, once."""
        return self._wrapped.answered(our_id_in(raw_id))

    def envelope_of(self, client_key: bytes) -> int | None:
        """The envelope that carries the client's request `client_key` (`id_key`), if it waits."""
        return self._wrapped.ours(client_key)

    # -- the successor's requests, unwrapped toward the client ---------------------------

    def upstream_request(self, envelope_id: bytes) -> int:
        """The id we give the client for the successor's request in envelope `envelope_id`."""
        ours = self._upstream.add(self._own_id(), envelope_id)
        self._unsent.add(ours)
        return ours

    def upstream_answer(self, raw_id: bytes) -> bytes | None:
        """The envelope a client's answer with id `raw_id` answers, once; None if none."""
        value = our_id_in(raw_id)
        envelope_id = self._upstream.answered(value)
        if envelope_id is not None:
            self._unsent.discard(value)  # a rule answered it in its place
        return envelope_id

    def upstream_of(self, envelope_key: bytes) -> int | None:
        """Our id for the successor's request in the envelope `envelope_key` (`id_key`), if it waits."""
        return self._upstream.ours(envelope_key)

    def first_sending(self, value: int | None) -> bool:
        """Is `value` our id for a successor's request not yet written toward the client?
        It counts as written from now on."""
        if value is None or value not in self._unsent:
            return False
        self._unsent.discard(value)
        return True

    # -- a rule's own requests to the client ---------------------------------------------

    def emitted_request(self, rule_id: bytes) -> int:
        """The id of ours a rule's request to the client goes under (the link owns the ids
        it puts on the wire: a rule's own could be one of our envelopes' and take its answer)."""
        return self._emitted.add(self._own_id(), rule_id)

    def emitted_answer(self, raw_id: bytes) -> bytes | None:
        """The id a rule gave its request to the client, which the answer `raw_id` answers; once."""
        return self._emitted.answered(our_id_in(raw_id))

    def emitted_of(self, rule_key: bytes) -> int | None:
        """Our id for the rule's request `rule_key` (`id_key`), if it waits."""
        return self._emitted.ours(rule_key)

    @property
    def any_emitted(self) -> bool:
        """A rule's request to the client waits for its answer (its cancel may come)."""
        return len(self._emitted) > 0
