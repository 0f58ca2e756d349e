"""The live watchdog in process, behind a real Relay: what it reads of a read, its timer,
and that a failure of its own turns it off without touching the traffic."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import trio

from acp_bridge.capture.reader import load_record
from acp_bridge.capture.records import CaptureEncoder, safe_dumps
from acp_bridge.config import Config, HealthConfig
from acp_bridge.core.messages import Direction, Frame, classify
from acp_bridge.core.relay import Relay
from acp_bridge.health import watchdog as wd
from acp_bridge.health.findings import Finding, Level
from acp_bridge.rules import Message, Outcome, Rule, SessionFacts
from tests.health import scenarios as sc

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


def pair(health: HealthConfig | None = None) -> tuple[Relay, wd.Watchdog, list[Finding]]:
    relay = Relay()
    dog = wd.Watchdog(Config(health=health or HealthConfig()), relay.session)
    told: list[Finding] = []
    dog.engine.listeners.append(told.append)
    return relay, dog, told


def feed(relay: Relay, dog: wd.Watchdog, direction: Direction, data: bytes, at: float = 0.0) -> None:
    dog.record(0.0, at, relay.feed(direction, data, at))


@pytest.mark.detail
def test_of_a_big_read_of_streamed_updates_only_the_first_line_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    relay, dog, told = pair()
    parsed: list[bytes] = []

    def counted(direction: Direction, line: bytes) -> Frame:
        parsed.append(line)
        return classify(direction, line)

    monkeypatch.setattr(wd, "classify", counted)
    chunks = sc.wire(*[sc.chunk("ghost", f"token {i}") for i in range(2000)])
    feed(relay, dog, C, chunks)
    assert parsed == [sc.wire(sc.chunk("ghost", "token 0"))]
    assert [(f.code, f.session) for f in told] == [("update-unknown-session", "ghost")]
    parsed.clear()
    feed(relay, dog, C, sc.wire(sc.chunk("ghost", "alone")))  # a small read: its line is parsed
    assert parsed == [sc.wire(sc.chunk("ghost", "alone"))]


def test_a_failure_of_its_own_turns_it_off_not_the_traffic(caplog: pytest.LogCaptureFixture,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    relay, dog, _ = pair()

    def broken(*args: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(dog.engine, "notification", broken)
    line = sc.wire(sc.chunk("s", "x"))
    forwards = relay.feed(C, line, 0.0)
    with caplog.at_level(logging.ERROR, logger="acp_bridge.health"):
        dog.record(0.0, 0.0, forwards)
        dog.record(0.0, 0.0, forwards)
    assert dog.off and [f.data for f in forwards] == [line]
    assert [r.getMessage() for r in caplog.records] == [
        "health: the watchdog failed and is off for the rest of this connection (traffic is not affected; "
        "-vv shows why)"]
    assert all(r.exc_info is None for r in caplog.records)  # one line: no traceback below -vv


async def test_the_timer_wakes_for_a_deadline_and_sleeps_when_nothing_is_pending() -> None:
    relay, dog, told = pair(HealthConfig(request_seconds=0.05))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(dog.run)
        await trio.testing.wait_all_tasks_blocked()
        assert dog._wake == wd.INF  # nothing pending: asleep for good
        feed(relay, dog, A, sc.wire(sc.msg(id=1, method="x/slow", params={})), time.monotonic())
        assert dog._wake < wd.INF
        with trio.fail_after(5):
            while not told:
                await trio.sleep(0.01)
        assert [(f.code, f.method, f.id) for f in told] == [("request-unanswered", "x/slow", 1)]
        feed(relay, dog, C, sc.wire(sc.msg(id=1, result={})))  # the late answer: no other finding
        with trio.fail_after(5):
            while dog._wake < wd.INF:  # the next scan finds nothing pending and sleeps for good
                await trio.sleep(0.01)
        assert len(told) == 1
        nursery.cancel_scope.cancel()


def test_a_finding_record_that_cannot_be_written_stops_a_required_capture() -> None:
    """`capture.required`: the capture's failure ends the session, also when it is a
    finding the watchdog told that the capture file could not write."""
    import os

    from acp_bridge.errors import CaptureError
    from acp_bridge.shell.capture_file import CaptureFile

    capture = CaptureFile("/dev/full", os.open("/dev/full", os.O_WRONLY), CaptureEncoder(), required=True)
    relay = Relay()
    dog = wd.Watchdog(Config(), relay.session, tell=capture.finding, last_seq=capture.last_seq)
    with pytest.raises(CaptureError, match="No space left on device"):
        feed(relay, dog, C, sc.wire(sc.chunk("ghost", "x")))
    assert capture.closed
    assert not dog.off


class _Boom(Rule):
    """Raises on every request."""

    name = "boom"

    def request(self, msg: Message, session: SessionFacts) -> Outcome:
        raise ValueError("kaboom")


class _Mine(Rule):
    """Raises on every chunk."""

    name = "mine"
    triggers = (b'"agent_message_chunk"',)

    def notification(self, msg: Message, session: SessionFacts) -> Outcome:
        raise KeyError("x")


def test_a_failing_rule_is_logged_once_per_rule_at_error_and_totalled_at_the_end(
        caplog: pytest.LogCaptureFixture) -> None:
    """Verdict `error` is the finding `rule-failed`: logged and told once per rule, whatever
    the sessions, every failure counted; at the end, each rule's total."""
    relay = Relay([_Boom(), _Mine()])
    told: list[tuple[float, Finding]] = []
    encoder = CaptureEncoder()
    dog = wd.Watchdog(Config(), relay.session, tell=lambda wall, f: told.append((wall, f)),
                      last_seq=lambda: encoder.seq)
    with caplog.at_level(logging.INFO, logger="acp_bridge.health"):
        for i in range(1, 6):
            forwards = relay.feed(A, sc.wire(sc.msg(id=i, method="session/prompt",
                                                    params={"sessionId": f"s{i % 2}", "prompt": []})), float(i))
            encoder.encode_batch(0.0, float(i), forwards)
            dog.record(0.0, float(i), forwards)
        forwards = relay.feed(C, sc.wire(sc.chunk("s1", "x")), 6.0)
        encoder.encode_batch(0.0, 6.0, forwards)
        dog.record(0.0, 6.0, forwards)
        dog.close(0.0, 7.0)
    assert [(f.code, f.level, f.seq, f.session, f.method, f.id, f.text, f.count, f.total) for _, f in told
            if f.code == "rule-failed"] == [
        ("rule-failed", Level.ERROR, 1, "s1", "session/prompt", 1,
         "rule 'boom' failed: ValueError: kaboom (the message went on as it came)", 1, False),
        ("rule-failed", Level.ERROR, 6, "s1", "session/update", None,
         "rule 'mine' failed: KeyError: 'x' (the message went on as it came)", 1, False),
        ("rule-failed", Level.ERROR, None, None, None, None, "rule 'boom' failed 5 times in all", 5, True),
    ]
    assert [(r.levelname, r.getMessage()) for r in caplog.records if "rule-failed" in r.getMessage()] == [
        ("ERROR", "health: rule-failed: rule 'boom' failed: ValueError: kaboom (the message went on as it came) "
                  "(session s1)"),
        ("ERROR", "health: rule-failed: rule 'mine' failed: KeyError: 'x' (the message went on as it came) "
                  "(session s1)"),
        ("INFO", "health: rule-failed came 6 times"),
    ]


def test_a_request_id_past_64_bits_is_named_as_written() -> None:
    """orjson reads an integer id past 64 bits as a float: the finding names it as the client
    wrote it, all 100 digits, as `check` does afterwards, and so does its capture record."""
    relay, dog, told = pair(HealthConfig(request_seconds=1))
    long_id = int("9" * 100)
    feed(relay, dog, A, f'{{"jsonrpc":"2.0","id":{long_id},"method":"x/slow","params":{{}}}}\n'.encode(), 0.0)
    dog.engine.advance(10.0)
    assert [(f.code, f.id, f.text) for f in told] == [
        ("request-unanswered", long_id, f"x/slow {long_id} unanswered by the agent for 10s")]
    line = safe_dumps(told[0].record(0.0))  # as the capture file writes it
    assert f'"id":{long_id},' in line.decode()
    assert load_record(line, checked=False) == {**told[0].record(0.0), "id": long_id}


def test_an_answer_id_past_64_bits_is_named_as_written() -> None:
    """The same for the answers the engine calls unknown, second or both result and error:
    the findings named `1.111111111111111e+99`, a number nobody sent; a second answer is
    still told from an unknown one by the id as read, which is how the relay paired it."""
    relay, dog, told = pair()
    long_id = int("1" * 100)
    answer = f'{{"jsonrpc":"2.0","id":{long_id},"result":{{}}}}\n'.encode()
    feed(relay, dog, C, answer)  # nobody asked
    feed(relay, dog, A, f'{{"jsonrpc":"2.0","id":{long_id},"method":"initialize","params":{{}}}}\n'.encode())
    feed(relay, dog, C, answer)
    feed(relay, dog, C, answer)  # a second time
    feed(relay, dog, C, f'{{"jsonrpc":"2.0","id":{long_id}0,"result":{{}},"error":{{}}}}\n'.encode())  # (unknown: counted)
    assert [(f.code, f.id, f.text) for f in told] == [
        ("response-unknown-id", long_id, f"response for id {long_id}, which no request in flight has"),
        ("response-duplicate", long_id, f"a second response for id {long_id}"),
        ("response-result-and-error", long_id * 10, f"response {long_id * 10} has both result and error"),
    ]
    assert f'"id":{long_id},' in safe_dumps(told[0].record(0.0)).decode()
