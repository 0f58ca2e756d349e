"""Memory per closed session (issue 23): a connection that opens and closes sessions for
days keeps nothing of those that ended, in the relay, its rules or the observers.

Sessions are opened and closed through the Relay with every rule, and what it returns goes
to the health watchdog, telemetry (with content) and the capture's encoder, as in `run`;
tracemalloc then compares what is held after N more sessions with what is held after 2N.
"""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
import pytest

from acp_bridge.capture.records import CaptureEncoder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.config import Config
from acp_bridge.core import Direction, Forward, Relay
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.health.watchdog import Watchdog
from acp_bridge.telemetry.builder import TraceBuilder
from acp_bridge.telemetry.live import TelemetryObserver

TO_AGENT, TO_CLIENT = Direction.TO_AGENT, Direction.TO_CLIENT
CLOSED_KEPT = 16  # the watchdog's window of closed sessions, small so that it fills at once


class NoSink:
    export_cpu = 0.0

    def spans(self, records: Any) -> None:
        pass

    def observe(self, observations: Any) -> None:
        pass

    def shutdown(self, timeout: float) -> bool:
        return True


def line(msg: dict[str, Any]) -> bytes:
    return orjson.dumps(msg) + b"\n"


def update(sid: str, upd: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": upd}}


def offer(sid: str, text: str) -> dict[str, Any]:
    return update(sid, {"sessionUpdate": "prompt_suggestions_update",
                        "suggestions": [{"prompt": [{"type": "text", "text": text}]}]})


def session_traffic(version: int, n: int, sid: str) -> Iterator[tuple[Direction, dict[str, Any]]]:
    """One session's life: created, offered a suggestion, one turn with a tool call, offered
    another, closed. Request ids are 3n+1 to 3n+3."""
    yield TO_AGENT, {"jsonrpc": "2.0", "id": 3 * n + 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}
    yield TO_CLIENT, {"jsonrpc": "2.0", "id": 3 * n + 1, "result": {"sessionId": sid}}
    yield TO_CLIENT, offer(sid, "go on")
    yield TO_AGENT, {"jsonrpc": "2.0", "id": 3 * n + 2, "method": "session/prompt",
                     "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}}
    if version == 1:
        yield TO_CLIENT, update(sid, {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "t", "status": "pending"})
    else:
        yield TO_CLIENT, {"jsonrpc": "2.0", "id": 3 * n + 2, "result": {"messageId": "m"}}
        yield TO_CLIENT, update(sid, {"sessionUpdate": "state_update", "state": "running"})
    yield TO_CLIENT, update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"})
    yield TO_CLIENT, update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}})
    if version == 1:
        yield TO_CLIENT, {"jsonrpc": "2.0", "id": 3 * n + 2, "result": {"stopReason": "end_turn"}}
    else:
        yield TO_CLIENT, update(sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
    yield TO_CLIENT, offer(sid, "and then")
    yield TO_AGENT, {"jsonrpc": "2.0", "id": 3 * n + 3, "method": "session/close", "params": {"sessionId": sid}}
    yield TO_CLIENT, {"jsonrpc": "2.0", "id": 3 * n + 3, "result": {}}


def connection(version: int) -> tuple[Callable[[int], None], Callable[[Direction, bytes], None], Watchdog]:
    """A relay with every rule and the observers `run` feeds; returns `open_and_close(n)`,
    `feed(direction, line)` and the watchdog."""
    config = Config()
    config = dataclasses.replace(config, system_prompt=dataclasses.replace(config.system_prompt, text="Be brief."))
    relay = Relay(build_rewrites(config), strict=True)
    watchdog = Watchdog(config, relay.session)
    watchdog.engine.max_closed = CLOSED_KEPT
    redactor = Redactor((), "Be brief.")
    telemetry = TelemetryObserver(TraceBuilder(lambda msg: redactor.mask(msg)[0], masked_text=str), NoSink())
    encoder = CaptureEncoder(redactor)
    clock = [0.0]

    def feed(direction: Direction, data: bytes) -> None:
        clock[0] += 0.001
        forwards: Sequence[Forward] = relay.feed(direction, data, clock[0])
        encoder.encode_batch(clock[0], clock[0], forwards)
        watchdog.record(clock[0], clock[0], forwards)
        telemetry.record(clock[0], clock[0], forwards)

    caps_key, info_key = ("clientCapabilities", "clientInfo") if version == 1 else ("capabilities", "info")
    feed(TO_AGENT, line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, caps_key: {"session": {"promptSuggestions": {}}}, info_key: {"name": "c", "version": "1"}}}))
    agent_caps: dict[str, Any] = ({"agentCapabilities": {"sessionCapabilities": {"close": {}, "systemPrompt": {}}}} if version == 1
                  else {"capabilities": {"session": {"systemPrompt": {}}}})
    feed(TO_CLIENT, line({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": version, **agent_caps, ("agentInfo" if version == 1 else "info"): {"name": "a", "version": "1"}}}))

    def open_and_close(n: int) -> None:
        for direction, msg in session_traffic(version, n, f"sess-{n:08d}"):
            feed(direction, line(msg))
        telemetry.drain()

    return open_and_close, feed, watchdog


# Traced sessions cost 4.5 ms each (tracemalloc hooks every allocation, 3.5 times the
# untraced cost). The first TURNOVER of them replace what the tables held when tracing
# started (bounded tables, one of 256 requests among them, a few entries a session), whose frees
# tracemalloc cannot count: measured after 150, the next 150 showed up to 7 kB of no leak.
# After them, N more sessions hold 1-3 kB more, across hash seeds.
TURNOVER, N = 300, 150


@pytest.mark.parametrize("version", [1, 2])
def test_nothing_stays_behind_for_a_closed_session(version: int) -> None:
    open_and_close, _, watchdog = connection(version)
    sessions = iter(range(10**6))
    for _ in range(2 * CLOSED_KEPT):  # every table at its working size
        open_and_close(next(sessions))
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(TURNOVER):
            open_and_close(next(sessions))
        gc.collect()
        after_turnover = tracemalloc.get_traced_memory()[0]
        for _ in range(N):
            open_and_close(next(sessions))
        gc.collect()
        after_n = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # Before: ~150 bytes a session stayed (the watchdog's table of every session ever
    # opened), 22 kB for these 150.
    assert after_n - after_turnover < 5 * 1024
    assert watchdog.engine.counts == {}  # the traffic is clean: no finding hides a leak


def test_an_update_after_close_is_told_for_the_last_closed_and_as_not_open_before() -> None:
    open_and_close, feed, watchdog = connection(1)
    told: list[tuple[str, object, str]] = []
    watchdog.engine.listeners.append(lambda f: told.append((f.code, f.session, f.text)))
    for n in range(CLOSED_KEPT + 1):
        open_and_close(n)
    assert told == []
    feed(TO_CLIENT, line(update(f"sess-{CLOSED_KEPT:08d}", {"sessionUpdate": "plan", "entries": []})))
    feed(TO_CLIENT, line(update("sess-00000000", {"sessionUpdate": "plan", "entries": []})))
    assert told == [
        ("update-closed-session", f"sess-{CLOSED_KEPT:08d}", f"session/update for sess-{CLOSED_KEPT:08d} after its session/close"),
        ("update-unknown-session", "sess-00000000", "session/update for sess-00000000, which is not open "
                                                    "(never created, loaded or resumed, or closed long ago)"),
    ]
