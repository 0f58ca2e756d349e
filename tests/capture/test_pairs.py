"""`Pairs`: requests and responses paired over records as the live `Connection` pairs them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.pairs import Pairs, answered_by
from acp_bridge.capture.reader import load_record
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.core.messages import Direction, classify
from acp_bridge.core.session import Connection

# (kind, direction, id, name): a request is kept under its name; a response expects the
# name of the request it answers (None: none)
STREAMS = [
    pytest.param([("q", "to-agent", 1, "a"), ("r", "to-client", 1, "a")], id="answered"),
    pytest.param([("q", "to-agent", 1, "a"), ("r", "to-client", "1", None), ("r", "to-client", 1.0, None),
                  ("r", "to-client", True, None), ("r", "to-client", 1, "a")], id="1-is-not-'1'-1.0-or-true"),
    pytest.param([("q", "to-agent", 0, "client"), ("q", "to-client", 0, "agent"), ("r", "to-agent", 0, "agent"),
                  ("r", "to-client", 0, "client")], id="both-sides-number-from-0"),
    pytest.param([("q", "to-agent", 1, "a"), ("r", "to-agent", 1, None), ("r", "to-client", 1, "a")],
                 id="answered-by-the-other-direction-only"),
    pytest.param([("q", "to-agent", 7, "first"), ("q", "to-agent", 7, "second"), ("r", "to-client", 7, "first"),
                  ("r", "to-client", 7, "second"), ("r", "to-client", 7, None)], id="same-id-in-flight-oldest-first"),
    pytest.param([("q", "to-agent", 1, "a"), ("r", "to-client", 1, "a"), ("r", "to-client", 1, None)],
                 id="at-most-once"),
    pytest.param([("q", "to-agent", {"b": 1, "a": 2}, "a"), ("r", "to-client", {"a": 2, "b": 1}, "a")],
                 id="an-object-id-as-a-json-value"),
    pytest.param([("q", "to-agent", 10**30, "a"), ("r", "to-client", 10**30 + 1, None),
                  ("r", "to-client", 10**30, "a")], id="an-id-past-64-bits"),
]


@pytest.mark.parametrize("stream", STREAMS)
def test_each_response_pairs_with_the_request_it_answers(stream: list[tuple[str, str, Any, str | None]]) -> None:
    pairs: Pairs[str] = Pairs()
    for kind, direction, id_, name in stream:
        if kind == "q":
            assert name is not None
            pairs.request(direction, id_, name)
        else:
            assert pairs.response(direction, id_) == name
    assert pairs.open() == [] and len(pairs) == 0


def test_what_is_open_and_the_bound() -> None:
    pairs: Pairs[str] = Pairs(max_open=3)
    for id_, name in [(1, "a"), (2, "b"), (2, "b2"), (3, "c")]:  # over the bound: the oldest, a, is forgotten
        pairs.request("to-agent", id_, name)
    assert (pairs.open(), len(pairs)) == (["b", "c", "b2"], 3)
    assert pairs.response("to-client", 1) is None
    pairs.request("to-agent", 4, "d")  # b forgotten, b2 moves up in its place
    assert (pairs.open(), pairs.response("to-client", 2), pairs.open()) == (["c", "d", "b2"], "b2", ["c", "d"])


@pytest.mark.parametrize(("direction", "answers"), [("to-client", "to-agent"), ("to-agent", "to-client"),
                                                    ("sideways", "to-client"), (None, "to-client")])
def test_a_response_answers_the_other_direction(direction: Any, answers: str) -> None:
    """As `stats` and the page read a record's direction: anything but to-client is to-agent."""
    assert answered_by(direction) == answers


def test_stats_pairs_a_reused_id_as_the_bridge_did() -> None:
    """Two requests with one id in flight: the first answer is the first request's (as the
    live bridge paired it), and the second stays unanswered until its own answer."""
    stats = CaptureStats()
    for seq, (kind, direction, method, mono) in enumerate([("request", "to-agent", "a", 1.0),
                                                            ("request", "to-agent", "b", 2.0),
                                                            ("response", "to-client", None, 5.0)], 1):
        stats.add({"type": "message", "seq": seq, "kind": kind, "direction": direction, "id": 7,
                   "method": method, "mono": mono})
    assert dict(stats.latency) == {"a": [4.0]}
    assert [r["method"] for r in stats.unanswered] == ["b"]


# One id past 64 bits: the live Connection reads such ids as floats, so two of them that round
# alike would pair there (a capture's reader reads them exactly)
IDS = st.one_of(st.integers(-2, 3), st.sampled_from(["0", "1", "x", 1.0, 2.5, True, False, None, 2**64 + 1]))
EVENTS = st.lists(st.tuples(st.booleans(), st.sampled_from(list(Direction)), IDS), max_size=40)


@given(EVENTS)
def test_pairs_pair_as_the_live_session_pairs(events: list[tuple[bool, Direction, Any]]) -> None:
    """For any stream of requests and responses, each response pairs with the request the
    live `Connection` pairs it with, fed the same messages."""
    session = Connection()
    pairs: Pairs[int] = Pairs()
    for number, (is_request, direction, id_) in enumerate(events):
        body = {"method": "m", "params": {"n": number}} if is_request else {"result": number}
        line = json.dumps({"jsonrpc": "2.0", "id": id_, **body}).encode()
        frame = classify(direction, line + b"\n")
        record = load_record(line[:-1] + b', "type": "message"}')
        assert record is not None
        record_id = record["id"]  # the id as a capture record holds it (past 64 bits, exactly)
        if is_request:
            session.on_request(frame)
            pairs.request(direction.value, record_id, number)
        else:
            live = session.on_response(frame)
            assert pairs.response(direction.value, record_id) == (None if live is None else live.params["n"])
    assert sorted(pairs.open()) == sorted(p.params["n"] for d in Direction for p in session.pending(d))
