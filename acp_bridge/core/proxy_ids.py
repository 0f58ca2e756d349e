"""The ids a proxy link puts on the wire, and what each one stands for.

Owns: the one counter of the link's own ids, and three tables, each kept both ways (our id
-> the id it stands for, and that id, in one spelling per value, -> ours): the envelopes
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


@dataclass
class LinkIds:
    """One link's ids (sans-IO): a new one for each request the link sends under its own,
    and the id it stands for given back once, when it is answered."""

    _next: int = 0
    _wrapped: dict[int, bytes] = field(default_factory=dict)  # our envelope id -> the client's id
    _wrapped_ids: dict[bytes, int] = field(default_factory=dict)  # the client's id -> our envelope id
    _upstream: dict[int, bytes] = field(default_factory=dict)  # our id upstream -> the conductor's envelope id
    _upstream_ids: dict[bytes, int] = field(default_factory=dict)  # the conductor's envelope id -> ours
    _unsent: set[int] = field(default_factory=set)  # our ids upstream not yet written toward the client
    _emitted: dict[int, bytes] = field(default_factory=dict)  # our id -> a rule's id for its request to the client
    _emitted_ids: dict[bytes, int] = field(default_factory=dict)  # a rule's id (`id_key`) -> ours, for its cancel

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
        ours = self._own_id()
        self._wrapped[ours] = client_id
        self._wrapped_ids[id_key(client_id)] = ours
        return ours

    def wrapped_answer(self, raw_id: bytes) -> bytes | None:
        """The client's id for the request whose envelope the answer `raw_id` answers, once."""
        value = our_id_in(raw_id)
        if value not in self._wrapped:
            return None
        client_id = self._wrapped.pop(value)
        if self._wrapped_ids.get(key := id_key(client_id)) == value:  # not a later request under the same id
            del self._wrapped_ids[key]
        return client_id

    def envelope_of(self, client_key: bytes) -> int | None:
        """The envelope that carries the client's request `client_key` (`id_key`), if it waits."""
        return self._wrapped_ids.get(client_key)

    # -- the successor's requests, unwrapped toward the client ---------------------------

    def upstream_request(self, envelope_id: bytes) -> int:
        """The id we give the client for the successor's request in envelope `envelope_id`."""
        ours = self._own_id()
        self._upstream[ours] = envelope_id
        self._upstream_ids[id_key(envelope_id)] = ours
        self._unsent.add(ours)
        return ours

    def upstream_answer(self, raw_id: bytes) -> bytes | None:
        """The envelope a client's answer with id `raw_id` answers, once; None if none."""
        value = our_id_in(raw_id)
        if value not in self._upstream:
            return None
        envelope_id = self._upstream.pop(value)
        if self._upstream_ids.get(key := id_key(envelope_id)) == value:  # not a later envelope under the same id
            del self._upstream_ids[key]
        self._unsent.discard(value)  # a rule answered it in its place
        return envelope_id

    def upstream_of(self, envelope_key: bytes) -> int | None:
        """Our id for the successor's request in the envelope `envelope_key` (`id_key`), if it waits."""
        return self._upstream_ids.get(envelope_key)

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
        ours = self._own_id()
        self._emitted[ours] = rule_id
        self._emitted_ids[id_key(rule_id)] = ours
        return ours

    def emitted_answer(self, raw_id: bytes) -> bytes | None:
        """The id a rule gave its request to the client, which the answer `raw_id` answers; once."""
        value = our_id_in(raw_id)
        rule_id = self._emitted.pop(value, None) if value is not None else None
        if rule_id is not None and self._emitted_ids.get(key := id_key(rule_id)) == value:
            del self._emitted_ids[key]
        return rule_id

    def emitted_of(self, rule_key: bytes) -> int | None:
        """Our id for the rule's request `rule_key` (`id_key`), if it waits."""
        return self._emitted_ids.get(rule_key)

    @property
    def any_emitted(self) -> bool:
        """A rule's request to the client waits for its answer (its cancel may come)."""
        return bool(self._emitted_ids)
