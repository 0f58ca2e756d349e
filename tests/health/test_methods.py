"""The findings engine and the methods of the SDK 2.4.0 schemas (`core/methods.py`): what it
knows of each by name (which close a session, which wait on a person, which v2 removed), and
that a new method's requests are timed like any other's. Table-driven, fed as `check` feeds it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.health import scenarios as sc
from tests.health.test_engine import A, C, Capture, opened


def v2_opened(cap: Capture) -> None:
    cap.add(0.0, A, sc.msg(id=0, method="initialize", params={"protocolVersion": 2, "capabilities": {}}))
    cap.add(0.1, C, sc.msg(id=0, result={"protocolVersion": 2, "capabilities": {}}), method="initialize")
    cap.add(0.2, A, sc.msg(id=1, method="session/new", params={"cwd": "/"}))
    cap.add(0.3, C, sc.msg(id=1, result={"sessionId": "s1"}), method="session/new")


def request(id_: Any, method: str, **params: Any) -> dict[str, Any]:
    return sc.msg(id=id_, method=method, params=params)


# (what opens the connection, the traffic after it as (time, direction, message, the method a
# response answers), the findings as (code, index of the message in the traffic, text)).
CASES: dict[str, tuple[Any, list[tuple[float, str, dict[str, Any], str | None]], list[tuple[str, int, str]]]] = {
    "an unanswered session/archive is overdue like any request": (opened, [
        (1.0, A, request(2, "session/archive", sessionId="s1"), None),
    ], [("request-unanswered", 0, "session/archive 2 unanswered by the agent for 99s")]),
    "a session/set_title answered in time is nothing": (opened, [
        (1.0, A, request(2, "session/set_title", sessionId="s1", title="CI"), None),
        (2.0, C, sc.msg(id=2, result={}), "session/set_title"),
    ], []),
    "auth/status_update from the agent is a notification, nothing to answer": (opened, [
        (1.0, C, sc.msg(method="auth/status_update", params={"state": "authenticated"}), None),
    ], []),
    "session/archive ends the active session as session/close does": (opened, [
        (1.0, A, request(2, "session/archive", sessionId="s1"), None),
        (1.1, C, sc.msg(id=2, result={}), "session/archive"),
        (1.2, C, sc.chunk("s1", "late"), None),
    ], [("update-closed-session", 2, "session/update for s1 after its session/archive")]),
    "a failed session/archive leaves the session open": (opened, [
        (1.0, A, request(2, "session/archive", sessionId="s1"), None),
        (1.1, C, sc.msg(id=2, error={"code": -32002, "message": "no"}), "session/archive"),
        (1.2, C, sc.chunk("s1", "still here"), None),
    ], []),
    "session/close still says session/close": (opened, [
        (1.0, A, request(2, "session/close", sessionId="s1"), None),
        (1.1, C, sc.msg(id=2, result={}), "session/close"),
        (1.2, C, sc.chunk("s1", "late"), None),
    ], [("update-closed-session", 2, "session/update for s1 after its session/close")]),
    "elicitation/create waits on a person by design": (opened, [
        (1.0, C, request("e1", "elicitation/create", sessionId="s1", message="Which branch?"), None),
    ], []),
    "logout is a v1 method, removed in v2": (v2_opened, [
        (1.0, A, request(2, "logout"), None),
        (1.1, C, sc.msg(id=2, result={}), "logout"),
    ], [("v1-shape-on-v2", 0, "method logout, removed in v2")]),
    "tool_call/cancel is v2's own": (v2_opened, [
        (1.0, A, request(2, "tool_call/cancel", sessionId="s1", toolCallId="t1"), None),
        (1.1, C, sc.msg(id=2, result={}), "tool_call/cancel"),
    ], []),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_engine_and_the_methods_of_the_schemas(case: str) -> None:
    start, traffic, expected = CASES[case]
    cap = Capture()
    start(cap)
    seqs = [cap.add(at, direction, message, method=method) for at, direction, message, method in traffic]
    report = cap.check(end=100.0)
    assert [(f.code, f.seq, f.text) for f in report.findings] == [(code, seqs[i], text) for code, i, text in expected]
