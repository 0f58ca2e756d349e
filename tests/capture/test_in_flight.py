"""`InFlight`: what `stats` keeps of a request until its answer, packed, gives back the fields
the record had, as a dict of them kept whole did."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.in_flight import KEPT, MAX_NAME, MAX_NAMES, InFlight
from acp_bridge.capture.pairs import Pairs
from acp_bridge.core.protocol import Json

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=False),
                    st.sampled_from(["s1", "to-agent", "to-client", "m" * (MAX_NAME + 1)]), st.text(max_size=3),
                    st.lists(st.integers(0, 2), max_size=2))
_SIDES = st.sampled_from(["to-agent", "to-client"])


@st.composite
def _records(draw: st.DrawFn) -> Json:
    record: Json = {"type": "message", "kind": draw(st.sampled_from(["request", "response"])),
                    "direction": draw(_SIDES), "id": draw(st.sampled_from([1, "1", 2, True, 1 << 64, 2.5]))}
    plain = {"seq": draw(st.integers(-(1 << 63), (1 << 63) - 1)), "time": draw(st.floats(0, 2e9)),
             "mono": draw(st.floats(0, 1e6)), "method": draw(st.sampled_from(["a", "b", None])),
             "session": draw(st.sampled_from(["s1", 7, None]))}
    for key in ("seq", "time", "mono", "method", "session", "direction"):
        if draw(st.booleans()):  # most fields as a bridge writes them, some odd or absent
            if key in plain:
                record[key] = plain[key]
        elif draw(st.booleans()):  # the reader leaves a seq that is an integer, or none
            record[key] = draw(st.integers(-(1 << 70), 1 << 70) if key == "seq" else _VALUES)
        else:
            record.pop(key, None)
    return record


@given(st.lists(_records(), max_size=40))
def test_the_fields_kept_are_those_a_dict_of_each_kept(records: list[Json]) -> None:
    """The model: a dict of the record's fields per request (what `stats` kept before), sorted
    by seq (0 when absent) for the list; the answers pair with the same requests."""
    kept, model = InFlight(), Pairs[Json]()
    for record in records:
        if record["kind"] == "request":
            kept.request(record.get("direction"), record)
            model.request(record.get("direction"), record.get("id"), {k: record[k] for k in KEPT if k in record})
        else:
            assert kept.response(record.get("direction"), record["id"]) == \
                model.response(record.get("direction"), record["id"])
    everything = sorted(model.open(), key=lambda r: r.get("seq", 0))
    assert list(kept.each()) == everything
    assert list(kept.each(3)) == everything[:3]
    assert len(kept) == len(everything)


def _request(seq: int, **fields: Any) -> Json:
    return {"type": "message", "seq": seq, "time": 1.5, "mono": 0.5, "direction": "to-agent", "kind": "request",
            "method": "session/prompt", "id": seq, "session": "s1", **fields}


def test_a_request_as_a_bridge_writes_it_is_packed_and_its_names_kept_once() -> None:
    """The shortcut is taken: 44 bytes per request; a time written as an integer, an id past 64
    bits or a long method is kept as written, in a tuple."""
    kept = InFlight()
    for seq in range(1, 4):
        kept.request("to-agent", _request(seq))
    kept.request("to-agent", _request(4, time=2))
    kept.request("to-agent", _request(5, id=1 << 64))
    kept.request("to-agent", _request(6, method="m" * (MAX_NAME + 1)))
    assert [type(item) for item in kept._pairs.open()] == [bytes] * 3 + [tuple] * 3
    assert {len(item) for item in kept._pairs.open()} == {44, 7}
    assert kept._names[1:] == ["to-agent", "session/prompt", "s1"]
    assert [(r["time"], r["id"]) for r in list(kept.each())[3:5]] == [(2, 4), (1.5, 1 << 64)]


def test_names_past_the_bound_are_kept_per_request() -> None:
    """A capture edited to hold a new session on every request holds no more than
    MAX_NAMES names for the whole read: the rest go with their request."""
    kept = InFlight()
    for seq in range(MAX_NAMES + 10):
        kept.request("to-agent", _request(seq, session=f"s{seq}"))
        kept.response("to-client", seq)
    assert (len(kept._names), len(kept)) == (MAX_NAMES, 0)
    kept.request("to-agent", _request(1, session="new"))
    assert list(kept.each()) == [{**{k: v for k, v in _request(1, session="new").items() if k in KEPT}}]
    assert type(kept._pairs.open()[0]) is tuple
