"""Connection: the connection's facts that the rules and the observers read (core/session.py)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from acp_bridge.core.messages import Direction, classify
from acp_bridge.core.session import Connection, HeldStates

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


def initialize(session: Connection, asked: Any, answer: Any) -> None:
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": asked}}
    session.on_request(classify(A, orjson.dumps(request) + b"\n"))
    if answer is not None:
        session.on_response(classify(C, orjson.dumps({"jsonrpc": "2.0", "id": 0, **answer}) + b"\n"))


@pytest.mark.parametrize(("asked", "answer", "negotiated", "agent"), [
    pytest.param(2, None, 2, None, id="before-the-answer-the-client-asked"),
    pytest.param(2, {"result": {"protocolVersion": 1}}, 1, 1, id="the-agent-answers"),
    pytest.param(2, {"result": {}}, 2, None, id="an-answer-naming-none"),
    pytest.param(2, {"result": {"protocolVersion": True}}, 2, None, id="true-is-no-version"),
    pytest.param(1, {"error": {"code": -32603, "message": "no"}}, 1, None, id="refused"),
])
def test_the_agents_version_is_its_answer_alone(asked: Any, answer: Any, negotiated: int | None,
                                                 agent: int | None) -> None:
    """Health judges v1 shapes by what the agent answered (a version only asked for is not
    negotiated); the rules fall back to what the client asked."""
    session = Connection()
    initialize(session, asked, answer)
    assert (session.protocol_version, session.agent_version) == (negotiated, agent)


def test_versions_follow_a_second_initialize() -> None:
    session = Connection()
    initialize(session, 1, {"result": {"protocolVersion": 1}})
    assert (session.protocol_version, session.agent_version) == (1, 1)
    initialize(session, 2, {"result": {"protocolVersion": 2}})
    assert (session.protocol_version, session.agent_version) == (2, 2)


def test_initialize_facts_are_kept_from_both_sides() -> None:
    session = Connection()
    initialize(session, 2, {"result": {"protocolVersion": 2, "agentInfo": {"name": "a"}}})
    assert session.client_init == {"protocolVersion": 2}
    assert session.agent_init == {"protocolVersion": 2, "agentInfo": {"name": "a"}}
    assert session.agent_info == {"name": "a"}
    assert session.client_caps == {} and session.agent_caps == {}


class _Held:
    pass


def test_held_states_forget_the_session_used_longest_ago_and_let_closed_ones_go() -> None:
    session = Connection()
    held = HeldStates(_Held, limit=2)
    a, b = held.get(session, "a"), held.get(session, "b")
    assert held.existing(session, "a") is a  # "a" used last: "b" is the one used longest ago
    held.get(session, "c")
    assert [session.existing_state(_Held, s) is not None for s in ("a", "b", "c")] == [True, False, True]
    assert held.get(session, "a") is a and len(held) == 2
    session.drop_state(_Held, "c")  # as Connection does when "c" closes
    held.closed(session, "c")
    assert len(held) == 1 and held.existing(session, "b") is None and b is not held.get(session, "b")
    session.drop_state(_Held, "a")  # forgotten without `closed`: found stale when room is made
    held.get(session, "d")
    assert len(held) == 2 and session.existing_state(_Held, "b") is not None
