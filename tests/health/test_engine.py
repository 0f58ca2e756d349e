"""The findings engine, fed capture records as `acp-bridge check` feeds it (pure, fast):
each rule with the traffic that provokes it and the traffic that must not, the caps that
bound its memory, and the listener a telemetry exporter can hang on it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.config import HealthConfig
from acp_bridge.core.messages import Direction
from acp_bridge.core.session import Pending
from acp_bridge.health.engine import Engine
from acp_bridge.health.findings import Finding, Level
from acp_bridge.health.offline import Report, analyse
from tests.health import scenarios as sc

FAST = HealthConfig(request_seconds=10, prompt_seconds=30, client_request_seconds=5, cancel_seconds=2)
A, C = "to-agent", "to-client"


class Capture:
    """Message records, numbered as the bridge numbers them."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = [{"type": "header", "format": 1, "mono": 0.0}]

    def add(self, at: float, direction: str, message: dict[str, Any], *, method: str | None = None,
            verdict: str = "pass", rules: tuple[str, ...] = (), out: dict[str, Any] | None = None,
            error: str | None = None) -> int:
        kind = ("request" if "id" in message else "notification") if "method" in message else "response"
        params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
        seq = len(self.records)
        record: dict[str, Any] = {
            "type": "message", "seq": seq, "time": at, "mono": at, "direction": direction, "kind": kind,
            "verdict": verdict, "method": message.get("method", method), "id": message.get("id"),
            "session": params.get("sessionId"), "rules": list(rules)}
        if verdict != "emit":
            record["raw"] = orjson.dumps(message).decode() + "\n"
        if out is not None:
            record["out"] = orjson.dumps(out).decode() + "\n"
        if error is not None:
            record["error"] = error
        self.records.append(record)
        return seq

    def check(self, end: float, config: HealthConfig = FAST) -> Report:
        return analyse("c.jsonl", [*self.records, {"type": "end", "mono": end}], config)


def found(report: Report) -> list[tuple[str, int | None]]:
    return [(f.code, f.seq) for f in sorted(report.findings, key=lambda f: (f.seq or 0, f.code))]


def opened(cap: Capture, session: str = "s1") -> None:
    cap.add(0.0, A, sc.msg(id=0, method="initialize", params=sc.NEW_CLIENT))
    cap.add(0.1, C, sc.msg(id=0, result=sc.AGENT_V1_INIT), method="initialize")
    cap.add(0.2, A, sc.msg(id=1, method="session/new", params={"cwd": "/", "mcpServers": []}))
    cap.add(0.3, C, sc.msg(id=1, result={"sessionId": session}), method="session/new")


def prompt(id_: int, session: str = "s1") -> dict[str, Any]:
    return sc.msg(id=id_, method="session/prompt", params={"sessionId": session, "prompt": []})


def test_ordinary_traffic_gives_nothing() -> None:
    cap = Capture()
    opened(cap)
    cap.add(1.0, A, prompt(2))
    for i in range(50):  # a turn of a minute: each update keeps the prompt alive
        cap.add(1.0 + i * 1.2, C, sc.chunk("s1", f"t{i}"))
    cap.add(61.0, C, sc.msg(id=2, result={"stopReason": "end_turn"}), method="session/prompt")
    assert found(cap.check(end=100.0)) == []


def test_a_request_unanswered_past_its_threshold() -> None:
    cap = Capture()
    opened(cap)
    slow = cap.add(1.0, A, sc.msg(id=5, method="x/slow", params={}))
    assert found(cap.check(end=10.9)) == []
    assert found(cap.check(end=11.0)) == [("request-unanswered", slow)]
    cap.add(12.0, C, sc.msg(id=5, result={}), method="x/slow")  # a late answer: still the one finding
    assert found(cap.check(end=20.0)) == [("request-unanswered", slow)]


def test_a_prompt_counts_from_the_agents_last_output() -> None:
    cap = Capture()
    opened(cap)
    turn = cap.add(1.0, A, prompt(2))
    cap.add(25.0, C, sc.chunk("s1", "still working"))
    assert found(cap.check(end=54.9)) == []  # 30 s of silence only at 55
    assert found(cap.check(end=55.0)) == [("prompt-stalled", turn)]


def test_a_load_or_resume_that_replays_history_counts_from_the_agents_last_output() -> None:
    """session/load (and v2 session/resume with replayFrom) streams the whole history as
    updates before it answers: a long history sent steadily is not a request left
    unanswered; one the agent went silent on is."""
    for method, params in (("session/load", {"sessionId": "old", "cwd": "/", "mcpServers": []}),
                           ("session/resume", {"sessionId": "old", "cwd": "/", "replayFrom": {"type": "start"}})):
        cap = Capture()
        opened(cap)
        load = cap.add(1.0, A, sc.msg(id=2, method=method, params=params))
        for i in range(40):  # 40 s of history, an update every second (request_seconds is 10)
            cap.add(1.5 + i, C, sc.chunk("old", f"turn {i}"))
        assert found(cap.check(end=50.4)) == []  # the last update at 40.5, 10 s of silence only at 50.5
        assert found(cap.check(end=50.5)) == [("request-unanswered", load)]
        cap.add(45.0, C, sc.msg(id=2, result={}), method=method)
        assert found(cap.check(end=100.0)) == []


def test_agent_requests_the_client_leaves_unanswered() -> None:
    cap = Capture()
    opened(cap)
    read = cap.add(1.0, C, sc.msg(id="r1", method="fs/read_text_file", params={"sessionId": "s1", "path": "/a"}))
    cap.add(1.0, C, sc.msg(id="p1", method="session/request_permission", params={"sessionId": "s1"}))
    assert found(cap.check(end=100.0)) == [("client-request-unanswered", read)]  # a permission waits on a person
    waits = HealthConfig(client_request_seconds=5, methods={"session/request_permission": 60.0,
                                                            "fs/read_text_file": 0.0})
    assert [code for code, _ in found(cap.check(end=100.0, config=waits))] == ["client-request-unanswered"]
    assert found(cap.check(end=100.0, config=waits))[0][1] == read + 1


def test_ids_reused_answered_twice_or_never_asked() -> None:
    cap = Capture()
    opened(cap)
    cap.add(1.0, A, sc.msg(id=7, method="x/a", params={}))
    again = cap.add(1.1, A, sc.msg(id=7, method="x/b", params={}))
    cap.add(1.2, C, sc.msg(id=7, result={}), method="x/a")
    cap.add(1.3, C, sc.msg(id=7, result={}), method="x/b")  # answers the second: no finding
    twice = cap.add(1.4, C, sc.msg(id=7, result={}))
    nobody = cap.add(1.5, C, sc.msg(id="7", result={}))  # "7" is not 7
    both = cap.add(1.6, A, sc.msg(id="q", result={}, error={"code": 1, "message": "x"}))
    assert found(cap.check(end=2.0)) == [("request-id-reused", again), ("response-duplicate", twice),
                                         ("response-unknown-id", nobody), ("response-result-and-error", both),
                                         ("response-unknown-id", both)]


def test_updates_for_sessions_unknown_closed_or_malformed() -> None:
    cap = Capture()
    cap.add(0.0, A, sc.msg(id=0, method="initialize", params=sc.NEW_CLIENT))
    cap.add(0.1, A, sc.msg(id=1, method="session/new", params={"cwd": "/"}))
    cap.add(0.2, C, sc.chunk("s1", "early"))  # before the response that creates s1: fine
    ghost = cap.add(0.3, C, sc.chunk("ghost", "boo"))
    cap.add(0.4, C, sc.msg(id=1, result={"sessionId": "s1"}), method="session/new")
    cap.add(0.5, A, sc.msg(id=2, method="session/load", params={"sessionId": "old", "cwd": "/"}))
    cap.add(0.6, C, sc.chunk("old", "replayed"))  # a load replays before it answers: fine
    cap.add(0.7, A, sc.msg(id=3, method="session/close", params={"sessionId": "s1"}))
    cap.add(0.8, C, sc.msg(id=3, result={}), method="session/close")
    late = cap.add(0.9, C, sc.chunk("s1", "late"))
    bad = cap.add(1.0, C, sc.update(None, sessionUpdate="plan"))
    worse = cap.add(1.1, C, sc.msg(method="session/update", params={"sessionId": "old"}))
    assert found(cap.check(end=2.0)) == [("update-unknown-session", ghost), ("update-closed-session", late),
                                         ("update-malformed", bad), ("update-malformed", worse)]


def test_cancel_v1_honoured_ignored_or_never_answered() -> None:
    def cancelled(reason: str | None, end: float) -> list[tuple[str, int | None]]:
        cap = Capture()
        opened(cap)
        cap.add(1.0, A, prompt(2))
        cap.add(2.0, A, sc.msg(method="session/cancel", params={"sessionId": "s1"}))
        if reason is not None:
            cap.add(3.0, C, sc.msg(id=2, result={"stopReason": reason}), method="session/prompt")
        return found(cap.check(end=end))

    assert cancelled("cancelled", 10.0) == []
    assert cancelled("end_turn", 10.0) == [("cancel-ignored", 7)]  # the answer that ignored it
    assert cancelled(None, 3.9) == []
    assert cancelled(None, 4.0) == [("cancel-ignored", 6)]  # the cancel left unanswered


def test_cancel_seconds_zero_turns_the_timeout_off_but_not_the_stop_reason_check() -> None:
    def cancelled(reason: str | None) -> list[tuple[str, int | None]]:
        cap = Capture()
        opened(cap)
        cap.add(1.0, A, prompt(2))
        cap.add(2.0, A, sc.msg(method="session/cancel", params={"sessionId": "s1"}))
        if reason is not None:
            cap.add(300.0, C, sc.msg(id=2, result={"stopReason": reason}), method="session/prompt")
        return found(cap.check(end=600.0, config=dataclasses.replace(FAST, cancel_seconds=0, prompt_seconds=0)))

    assert cancelled(None) == []
    assert cancelled("cancelled") == []
    assert cancelled("end_turn") == [("cancel-ignored", 7)]


def test_a_cancel_overdue_when_its_turn_ends_is_said_of_the_cancel_without_a_scan() -> None:
    """Whether a timer scan came between the deadline and the answer (post hoc it does,
    live the timer task may come after the read) does not change the finding."""
    def answered(at: float) -> list[tuple[str, int | None]]:
        told: list[Finding] = []
        engine = Engine(FAST, notify=1)
        engine.listeners.append(told.append)
        engine.request(engine.session.track(Pending(Direction.TO_AGENT, 2, "session/prompt", "s1", at=1.0)), 5)
        engine.notification(Direction.TO_AGENT, sc.msg(method="session/cancel", params={"sessionId": "s1"}), 2.0, 6)
        answer = sc.msg(id=2, result={"stopReason": "end_turn"})
        request = engine.session.pair(Direction.TO_CLIENT, 2)
        assert request is not None
        engine.answered(request, answer, at, 7)
        return [(f.code, f.seq) for f in told]

    assert answered(3.9) == [("cancel-ignored", 7)]  # in time: the answer ignored it
    assert answered(4.0) == [("cancel-ignored", 6)]  # the cancel's 2s were up: it went unanswered


def test_cancel_v2_waits_for_an_idle_state_of_a_running_turn() -> None:
    def cancelled(state: list[dict[str, Any]], end: float) -> list[str]:
        cap = Capture()
        cap.add(0.0, A, sc.V2_CLIENT_INIT)
        cap.add(0.1, C, sc.msg(id=0, result={"protocolVersion": 2, "capabilities": {}, "info": {}}),
                method="initialize")
        cap.add(0.2, A, sc.msg(id=1, method="session/new", params={"cwd": "/"}))
        cap.add(0.3, C, sc.msg(id=1, result={"sessionId": "s1"}), method="session/new")
        cap.add(1.0, A, prompt(2))
        cap.add(1.1, C, sc.msg(id=2, result={"messageId": "m"}), method="session/prompt")
        cap.add(1.2, C, sc.update("s1", sessionUpdate="state_update", state="running"))
        cap.add(2.0, A, sc.msg(method="session/cancel", params={"sessionId": "s1"}))
        for i, update in enumerate(state):
            cap.add(2.5 + i, C, sc.update("s1", sessionUpdate="state_update", **update))
        return [code for code, _ in found(cap.check(end=end))]

    assert cancelled([{"state": "idle", "stopReason": "cancelled"}], 10.0) == []
    assert cancelled([{"state": "idle", "stopReason": "end_turn"}], 10.0) == ["cancel-ignored"]
    assert cancelled([], 10.0) == ["cancel-ignored"]


def test_migration_facts_and_v1_shapes_on_v2() -> None:
    cap = Capture()
    cap.add(0.0, A, sc.msg(id=0, method="initialize", params=sc.AIR_ONLY))
    cap.add(0.1, C, sc.msg(id=0, result={**sc.AGENT_V1_INIT, "protocolVersion": 2}), method="initialize")
    cap.add(0.2, A, sc.msg(id=1, method="session/load", params={"sessionId": "s1", "cwd": "/"}))
    cap.add(0.3, C, sc.NEW_FORM)
    cap.add(0.4, C, sc.LEGACY)
    cap.add(0.5, C, sc.update("s1", sessionUpdate="current_mode_update", currentModeId="x"))
    cap.add(0.6, A, prompt(2), verdict="rewrite", rules=("system-prompt",),
            out=prompt(2) | {"params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "S"}]}})
    assert found(cap.check(end=1.0)) == [
        ("air-only-client", 1), ("v1-shape-on-v2", 2), ("v1-shape-on-v2", 3), ("suggestions-unadvertised", 4),
        ("legacy-suggestions", 5), ("v1-shape-on-v2", 6), ("system-prompt-fallback", 7)]


def test_the_system_prompt_fallback_carries_the_requests_id_and_session() -> None:
    """Through _meta on session/new (no session yet: only the id), and through the first
    prompt of a session/load (both)."""
    cap = Capture()
    cap.add(0.0, A, sc.msg(id=0, method="initialize", params=sc.NEW_CLIENT))
    cap.add(0.1, C, sc.msg(id=0, result=sc.AGENT_V1_INIT), method="initialize")
    new = sc.msg(id="n", method="session/new", params={"cwd": "/", "mcpServers": []})
    cap.add(0.2, A, new, verdict="rewrite", rules=("system-prompt",),
            out=new | {"params": {"cwd": "/", "mcpServers": [], "_meta": {"systemPrompt": "S"}}})
    cap.add(0.3, C, sc.msg(id="n", result={"sessionId": "s0"}), method="session/new")
    cap.add(0.4, A, sc.msg(id=1, method="session/load", params={"sessionId": "s1", "cwd": "/"}))
    cap.add(0.5, C, sc.msg(id=1, result={}), method="session/load")
    cap.add(0.6, A, prompt(7), verdict="rewrite", rules=("system-prompt",),
            out=prompt(7) | {"params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "S"}]}})
    assert [(f.seq, f.session, f.id, f.method) for f in cap.check(end=1.0).findings
            if f.code == "system-prompt-fallback"] == [(3, None, "n", "session/new"), (7, "s1", 7, "session/prompt")]


def test_a_failing_rule_is_one_error_finding_per_rule_with_every_failure_counted() -> None:
    """Verdict `error` names the rule that failed: one finding per rule (its first failure,
    whatever the session), every failure counted; a message the rules were not asked about
    because it could not be written back is one too. The verdict never says the bridge can go."""
    cap = Capture()
    opened(cap)
    first = cap.add(1.0, A, prompt(2), verdict="error", rules=("boom",), error="ValueError: kaboom")
    for i in range(3, 1000):
        cap.add(1.0 + i, A, prompt(i, f"s{i % 2}"), verdict="error", rules=("boom",), error="ValueError: kaboom")
    other = cap.add(2000.0, C, sc.chunk("s1", "x"), verdict="error", rules=("mine",), error="KeyError: 'x'")
    deep = cap.add(2001.0, A, prompt(5000), verdict="error", error="cannot re-encode: nested deeper than can be "
                                                                       "written back")
    report = cap.check(end=2002.0, config=HealthConfig(request_seconds=0, prompt_seconds=0))
    assert report.counts == {"rule-failed": 1000}
    assert [(f.code, f.level, f.seq, f.session, f.text) for f in report.findings] == [
        ("rule-failed", Level.ERROR, first, "s1", "rule 'boom' failed: ValueError: kaboom (the message went on as it came)"),
        ("rule-failed", Level.ERROR, other, "s1", "rule 'mine' failed: KeyError: 'x' (the message went on as it came)"),
        ("rule-failed", Level.ERROR, deep, "s1", "the rules could not change a message: cannot re-encode: nested "
                                                 "deeper than can be written back (the message went on as it came)"),
    ]
    assert report.migration.verdict() == ("rules failed (boom 998x, mine 1x, a message they could not change 1x): "
                                          "what they would have done is not known, so whether the bridge can be "
                                          "removed is not either; fix them and check a new capture")


def test_each_code_and_session_is_told_once_then_counted() -> None:
    told: list[Finding] = []
    engine = Engine(FAST, notify=1)
    engine.listeners.append(told.append)  # what an OpenTelemetry exporter would hang here
    for i in range(1000):
        engine.unpaired(Direction.TO_CLIENT, i, float(i))
        engine.notification(Direction.TO_CLIENT, sc.chunk(f"ghost{i % 3}", "x"), float(i))
    assert [(f.code, f.session, f.count) for f in told] == [
        ("response-unknown-id", None, 1), ("update-unknown-session", "ghost0", 1),
        ("update-unknown-session", "ghost1", 1), ("update-unknown-session", "ghost2", 1)]
    assert engine.summary() == {"response-unknown-id": 1000, "update-unknown-session": 1000}


def test_memory_stays_bounded_with_many_sessions_and_requests() -> None:
    engine = Engine(FAST, notify=0, max_tracked=100, max_sessions=50, max_counted=20)
    session = engine.session
    for i in range(5000):
        engine.request(session.track(Pending(Direction.TO_AGENT, i, "session/load", f"s{i}", b"", 0.0)), i)
        engine.notification(Direction.TO_CLIENT, sc.chunk(f"other{i}", "x"), 0.0)
    assert len(engine._sessions) == 50 and len(engine.seqs) == 100
    assert len(engine.counts) == 21  # 20 code-and-session pairs, then one "(more sessions)" per code
    assert engine.summary() == {"update-unknown-session": 50}  # past the session cap nothing is unknown
    engine.advance(100.0)
    assert len(engine._reported) == 100 and engine.summary()["request-unanswered"] == 100


@given(ids=st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=2), st.booleans(), st.none()), max_size=20),
       twice=st.sets(st.integers(0, 19)))
def test_answers_are_duplicates_exactly_when_an_id_was_answered_before(ids: list[Any], twice: set[int]) -> None:
    """Whatever the ids (1, True and "1" all differ), each request answered once gives no
    finding, and each answer sent again is one duplicate."""
    cap = Capture()
    unique = list({orjson.dumps(i): i for i in ids}.values())
    for n, id_ in enumerate(unique):
        cap.add(float(n), A, sc.msg(id=id_, method="x/y", params={}))
    for n, id_ in enumerate(unique):
        cap.add(50.0 + n, C, sc.msg(id=id_, result={}), method="x/y")
        if n in twice:
            cap.add(50.0 + n, C, sc.msg(id=id_, result={}))
    report = cap.check(end=60.0, config=HealthConfig(request_seconds=1000))
    assert report.counts == ({"response-duplicate": len(twice & set(range(len(unique))))}
                             if twice & set(range(len(unique))) else {})


def test_an_id_past_64_bits_is_kept_as_written_in_a_finding() -> None:
    """orjson reads an integer past 64 bits as a float: a finding names the id as the peer
    wrote it, all 100 digits, and a request so numbered pairs with its answer."""
    long_id = int("9" * 100)
    cap = Capture()
    opened(cap)
    unknown = len(cap.records)
    cap.records.append({"type": "message", "seq": unknown, "time": 1.0, "mono": 1.0, "direction": C,
                        "kind": "response", "verdict": "pass", "method": None, "id": long_id, "session": None,
                        "rules": [], "raw": f'{{"jsonrpc":"2.0","id":{long_id},"result":{{}}}}\n'})
    asked = len(cap.records)
    cap.records.append({"type": "message", "seq": asked, "time": 2.0, "mono": 2.0, "direction": A,
                        "kind": "request", "verdict": "pass", "method": "x/slow", "id": long_id + 1,
                        "session": None, "rules": [],
                        "raw": f'{{"jsonrpc":"2.0","id":{long_id + 1},"method":"x/slow","params":{{}}}}\n'})
    report = cap.check(end=100.0)
    assert [(f.code, f.seq, f.id, f.text) for f in report.findings] == [
        ("response-unknown-id", unknown, long_id, f"response for id {long_id}, which no request in flight has"),
        ("request-unanswered", asked, long_id + 1, f"x/slow {long_id + 1} unanswered by the agent for 98s"),
    ]
    assert f'"id": {long_id}}}' in json.dumps(report.as_json())  # what check --json prints


# The methods of the SDK 2.4.0 schemas (core/methods.py): what the engine knows of each by name
# (which close a session, which wait on a person, which v2 removed), and that a new method's
# requests are timed like any other's.

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
