"""A capture as telemetry (`export --otlp`): its records paired by a `Connection` as the relay
paired them, and that session held to the builder's caps."""

from __future__ import annotations

import random
from typing import Any

import orjson

from acp_bridge.telemetry import tree
from acp_bridge.telemetry.builder import TraceBuilder
from acp_bridge.telemetry.offline import capture_spans
from tests.telemetry.helpers import T0, A, C, ok, req, shape


def message(at: float, direction: str, msg: Any, verdict: str = "pass", **fields: Any) -> dict[str, Any]:
    return {"type": "message", "time": T0 + at, "direction": direction, "verdict": verdict,
            "raw": orjson.dumps(msg).decode() + "\n", **fields}


def spans_of(records: list[dict[str, Any]]) -> list[tuple[str, str, float, float]]:
    return shape(list(capture_spans(records, TraceBuilder(rng=random.Random(3)))))


def test_a_dropped_request_is_not_in_flight_and_the_bridges_answers_pair() -> None:
    """A request a rule dropped reached nobody (the relay forgets it): the next request with
    its id is the one answered. The bridge's own answer (an emit) ends what it answers."""
    assert spans_of([
        message(0.0, A, req(1, "x/dropped"), "drop", rules=["r"]),
        message(1.0, A, req(1, "x/sent")),
        message(2.0, C, ok(1)),
        message(3.0, A, req(2, "x/unanswered")),
        {"type": "message", "time": T0 + 4, "direction": C, "verdict": "emit", "rules": ["bridge"],
         "out": orjson.dumps({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "gone"}}).decode()},
    ]) == [("x/sent", "", 1.0, 2.0), ("x/unanswered", "", 3.0, 4.0)]


def test_what_the_builder_evicts_its_session_forgets() -> None:
    """Past MAX_PENDING requests in flight the oldest span is evicted, and the session pairing
    the capture forgets its request: a later request reusing its id gets the next answer
    (and the session holds no more than the builder does)."""
    records = [message(i, A, req(i, "x/slow")) for i in range(tree.MAX_PENDING + 1)]
    records += [message(1000.0, A, req(0, "x/again")), message(1001.0, C, ok(0)),
                {"type": "end", "time": T0 + 2000}]
    spans = spans_of(records)
    assert spans[:3] == [
        ("x/slow", "", 0.0, tree.MAX_PENDING),  # evicted by request #MAX_PENDING
        ("x/slow", "", 1.0, 1000.0),  # evicted by x/again
        ("x/again", "", 1000.0, 1001.0),
    ]
    assert len(spans) == tree.MAX_PENDING + 2
    assert {span[3] for span in spans[3:]} == {2000.0}  # the rest: unfinished at the end
