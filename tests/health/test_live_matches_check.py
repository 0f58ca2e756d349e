"""The watchdog (live, behind a real Relay, writing into a real capture encoder) and `check`
(afterwards, from the records) find the same: for any traffic whose lines come one per
read, the first finding of each code and session is the same message in both."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import orjson
from hypothesis import example, given
from hypothesis import strategies as st

from acp_bridge.capture.reader import load_record
from acp_bridge.capture.records import CaptureEncoder, dumps
from acp_bridge.config import Config
from acp_bridge.core.forward import Forward
from acp_bridge.core.messages import Direction
from acp_bridge.core.relay import Relay
from acp_bridge.health.findings import Finding
from acp_bridge.health.offline import analyse
from acp_bridge.health.watchdog import Watchdog
from tests.health import scenarios as sc

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


class MemoryCapture:
    """What the watchdog is given of a CaptureFile, writing into a list."""

    def __init__(self) -> None:
        self.encoder = CaptureEncoder()
        self.closed = False
        self.lines: list[bytes] = [dumps({"type": "header", "format": 1, "mono": 0.0})]

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        self.lines += self.encoder.encode_batch(wall, mono, forwards).splitlines()

    def finding(self, wall: float, finding: Finding) -> None:
        self.lines.append(dumps(finding.record(wall)).rstrip(b"\n"))

    def last_seq(self) -> int:
        return self.encoder.seq


ids = st.sampled_from([1, 2, "1", "x"])
sessions = st.sampled_from(["s1", "s2", "ghost", None])
messages = st.one_of(
    st.tuples(st.just(A), st.builds(lambda i, m, s: sc.msg(id=i, method=m, params={"sessionId": s}),
                                    ids, st.sampled_from(["session/new", "session/load", "session/close",
                                                          "session/prompt", "x/y"]), sessions)),
    st.tuples(st.just(A), st.builds(lambda s: sc.msg(method="session/cancel", params={"sessionId": s}), sessions)),
    st.tuples(st.sampled_from([A, C]), st.builds(lambda i, s: sc.msg(id=i, result={"sessionId": s}), ids, sessions)),
    st.tuples(st.just(C), st.builds(lambda i: sc.msg(id=i, result={}, error={"code": 1, "message": "m"}), ids)),
    st.tuples(st.just(C), st.builds(lambda i, m: sc.msg(id=i, method=m, params={"sessionId": "s1"}), ids,
                                    st.sampled_from(["fs/read_text_file", "session/request_permission"]))),
    st.tuples(st.just(C), st.builds(lambda s: sc.chunk(s, "t"), sessions)),
    st.tuples(st.just(C), st.just(sc.LEGACY)),
    st.tuples(st.just(C), st.just(sc.NEW_FORM)),
    st.tuples(st.just(A), st.sampled_from([sc.msg(id=0, method="initialize", params=sc.AIR_ONLY),
                                           sc.msg(id=0, method="initialize", params=sc.NEW_CLIENT)])),
)


_CANCEL_S1 = (A, sc.msg(method="session/cancel", params={"sessionId": "s1"}))
_NEW_ID_1 = (A, sc.msg(id=1, method="session/new", params={"sessionId": "s1"}))


# A prompt cancelled at 1s and answered (with an error) at 11s, when the cancel's 10s were
# up: the watchdog's timer had not run, `check` had scanned; both must say the cancel was
# ignored, of the cancel. (The session/new requests reuse id 1; the answer is the prompt's.)
@example(traffic=[(A, sc.msg(id=1, method="session/prompt", params={"sessionId": "s1"})), _CANCEL_S1,
                  _NEW_ID_1, _NEW_ID_1, _CANCEL_S1, _NEW_ID_1, _NEW_ID_1, _NEW_ID_1, _NEW_ID_1,
                  (C, sc.LEGACY), _CANCEL_S1, (C, sc.msg(id=1, result={}, error={"code": 1, "message": "m"}))])
@given(traffic=st.lists(messages, max_size=25))
def test_live_and_afterwards_agree_on_each_first_finding(traffic: list[tuple[Direction, dict[str, Any]]]) -> None:
    relay = Relay()
    capture = MemoryCapture()
    dog = Watchdog(Config(), relay.session, tell=capture.finding, last_seq=capture.last_seq)
    for n, (direction, message) in enumerate(traffic):
        forwards = relay.feed(direction, orjson.dumps(message) + b"\n", float(n))
        capture.record(0.0, float(n), forwards)
        dog.record(0.0, float(n), forwards)
    dog.close(0.0, float(len(traffic)))
    records = [r for r in map(load_record, capture.lines) if r is not None]
    live = {(r["code"], r["session"], r["about"]) for r in records
            if r["type"] == "finding" and not r.get("total")}
    report = analyse("c", records)
    first: dict[tuple[str, Any], int | None] = {}
    for finding in sorted(report.findings, key=lambda f: f.seq or 0):
        first.setdefault((finding.code, finding.session), finding.seq)
    assert live == {(code, session, seq) for (code, session), seq in first.items()}


@given(traffic=st.lists(messages, max_size=40), cuts=st.lists(st.integers(1, 6000), max_size=6))
def test_in_big_reads_what_the_watchdog_finds_is_a_message_check_finds_too(
        traffic: list[tuple[Direction, dict[str, Any]]], cuts: list[int]) -> None:
    """Read in big chunks, the watchdog samples the runs of lines no rule looks at, so it
    may miss a finding; but each it makes names the same message `check` finds (the seq
    counted across runs of lines, pieces of lines and messages the rules parsed)."""
    relay = Relay(run_min=64)  # runs of untouched lines even in these small reads
    capture = MemoryCapture()
    dog = Watchdog(Config(), relay.session, tell=capture.finding, last_seq=capture.last_seq)
    for direction in (A, C):
        data = b"".join(orjson.dumps(m) + b"\n" for d, m in traffic if d is direction)
        points = sorted({0, len(data), *(c for c in cuts if c < len(data))})
        for n, (start, end) in enumerate(itertools.pairwise(points)):
            forwards = relay.feed(direction, data[start:end], float(n))
            capture.record(0.0, float(n), forwards)
            dog.record(0.0, float(n), forwards)
    dog.close(0.0, 100.0)
    records = [r for r in map(load_record, capture.lines) if r is not None]
    live = {(r["code"], r["session"], r["about"]) for r in records
            if r["type"] == "finding" and not r.get("total")}
    after = {(f.code, f.session, f.seq) for f in analyse("c", records).findings}
    assert live <= after


def test_two_initializes_in_one_read_are_each_judged_by_their_own_params() -> None:
    """Live, the watchdog sees a read after the relay has handled all of it: the second
    `initialize` of the read must not decide what the first one was."""
    relay = Relay()
    capture = MemoryCapture()
    dog = Watchdog(Config(), relay.session, tell=capture.finding, last_seq=capture.last_seq)
    data = b"".join(orjson.dumps(sc.msg(id=n, method="initialize", params=params)) + b"\n"
                    for n, params in enumerate([sc.NEW_CLIENT, sc.AIR_ONLY]))
    forwards = relay.feed(A, data, 0.0)
    capture.record(0.0, 0.0, forwards)
    dog.record(0.0, 0.0, forwards)
    records = [r for r in map(load_record, capture.lines) if r is not None]
    found = [(r["code"], r["about"]) for r in records if r["type"] == "finding"]
    assert found == [("air-only-client", 2)]
    assert [(f.code, f.seq) for f in analyse("c", records).findings] == found


def live_and_after(traffic: list[tuple[Direction, bytes]]) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, Any, Any]]]:
    """(code, session, seq) of each first finding live, and of each finding `check` makes,
    for traffic given as reads (one read per item)."""
    relay = Relay()
    capture = MemoryCapture()
    dog = Watchdog(Config(), relay.session, tell=capture.finding, last_seq=capture.last_seq)
    for n, (direction, data) in enumerate(traffic):
        forwards = relay.feed(direction, data, float(n))
        capture.record(0.0, float(n), forwards)
        dog.record(0.0, float(n), forwards)
    dog.close(0.0, float(len(traffic)))
    records = [r for r in map(load_record, capture.lines) if r is not None]
    live = [(r["code"], r["session"], r["about"]) for r in records if r["type"] == "finding" and not r.get("total")]
    return live, [(f.code, f.session, f.seq) for f in analyse("c", records).findings]


def test_an_error_with_id_null_answers_a_line_its_peer_could_not_read_and_is_no_unknown_id() -> None:
    """JSON-RPC 2.0: a request that cannot be parsed (or whose id cannot be read) is
    answered with an error whose id is null. That answer is valid: it is not a response for an
    id nobody asked. (A result with id null, or an error with an id nobody asked, still is.)"""
    traffic = [(A, sc.wire(sc.msg(id=0, method="initialize", params=sc.NEW_CLIENT))),
               (C, sc.wire(sc.msg(id=0, result=sc.AGENT_V1_INIT))),
               (A, b'{"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {\n'),
               (C, sc.wire(sc.msg(id=None, error={"code": -32700, "message": "Parse error"}))),
               (A, b'{"jsonrpc": "2.0", "method": 5}\n'),
               (C, sc.wire(sc.msg(id=None, error={"code": -32600, "message": "Invalid Request"})))]
    assert live_and_after(traffic) == ([], [])
    wrong = [*traffic, (C, sc.wire(sc.msg(id=None, result={}))), (C, sc.wire(sc.msg(id=4, error={"code": 1, "message": "m"})))]
    assert live_and_after(wrong) == ([("response-unknown-id", None, 7)],
                                     [("response-unknown-id", None, 7), ("response-unknown-id", None, 8)])


V2_OPEN = [(A, sc.wire(sc.msg(id=0, method="initialize", params={"protocolVersion": 2, "info": {"name": "c", "version": "1"}}))),
           (C, sc.wire(sc.msg(id=0, result={"protocolVersion": 2, "info": {"name": "a", "version": "1"},
                                             "capabilities": {"session": {"fork": {}}}}))),
           (A, sc.wire(sc.msg(id=1, method="session/new", params={"cwd": "/"}))),
           (C, sc.wire(sc.msg(id=1, result={"sessionId": "s1"})))]


def batch(*messages: dict[str, Any]) -> bytes:
    return orjson.dumps(list(messages)) + b"\n"


def test_sessions_forked_or_closed_in_a_v2_batch_are_known_live_as_afterwards() -> None:
    """v2 allows a batch of requests on one line (not of lifecycle ones; session/fork and
    session/close may be batched), answered in a batch or one by one. The session a batched
    fork creates is open, live as in `check`; one closed in a batch is closed."""
    forked = [*V2_OPEN,
              (A, batch(sc.msg(id=2, method="session/fork", params={"sessionId": "s1", "cwd": "/"}),
                        sc.msg(id=3, method="session/list", params={}))),
              (C, batch(sc.msg(id=2, result={"sessionId": "f1"}), sc.msg(id=3, result={"sessions": []}))),
              (C, sc.wire(sc.chunk("f1", "hi")))]
    assert live_and_after(forked) == ([], [])
    one_by_one = [*V2_OPEN,
                  (A, batch(sc.msg(id=2, method="session/fork", params={"sessionId": "s1", "cwd": "/"}),
                            sc.msg(id=3, method="session/list", params={}))),
                  (C, sc.wire(sc.chunk("f1", "replayed while the fork is in flight"))),
                  (C, sc.wire(sc.msg(id=3, result={"sessions": []}))),
                  (C, sc.wire(sc.msg(id=2, result={"sessionId": "f1"})))]
    assert live_and_after(one_by_one) == ([], [])
    closed = [*V2_OPEN,
              (A, batch(sc.msg(id=2, method="session/close", params={"sessionId": "s1"}))),
              (C, batch(sc.msg(id=2, result={}))),
              (C, sc.wire(sc.chunk("s1", "late")))]
    assert live_and_after(closed) == ([("update-closed-session", "s1", 7)], [("update-closed-session", "s1", 7)])


def test_notifications_in_a_v2_batch_are_judged_live_and_afterwards() -> None:
    """An update (or a cancel) inside a batch is read like one on its own line."""
    traffic = [*V2_OPEN, (C, batch(sc.chunk("ghost", "a"), sc.update("s1", sessionUpdate="state_update", state="running"))),
               (A, batch(sc.msg(method="session/cancel", params={"sessionId": "s1"}))),
               (C, batch(sc.update("s1", sessionUpdate="state_update", state="idle", stopReason="end_turn")))]
    live, after = live_and_after(traffic)
    assert live == [("update-unknown-session", "ghost", 5), ("cancel-ignored", "s1", 7)]
    assert sorted(after, key=lambda f: f[2]) == live


def test_a_load_replaying_a_long_history_is_no_request_unanswered_live() -> None:
    """90 s of history at one update a second (request_seconds is 60): live, the timer's
    scan at the end finds nothing overdue either."""
    relay = Relay()
    dog = Watchdog(Config(), relay.session)
    found: list[Finding] = []
    dog.engine.listeners.append(found.append)
    dog.record(0.0, 0.0, relay.feed(A, sc.wire(sc.msg(id=1, method="session/load", params={
        "sessionId": "old", "cwd": "/", "mcpServers": []})), 0.0))
    for n in range(90):
        dog.record(0.0, 1.0 + n, relay.feed(C, sc.wire(sc.chunk("old", f"turn {n}")), 1.0 + n))
    dog.engine.advance(95.0)
    assert found == []
    dog.engine.advance(150.0)
    assert [(f.code, f.method) for f in found] == [("request-unanswered", "session/load")]
