"""bridge_streams over in-memory streams: both directions, EOF handling, backpressure; and
Bridge.deliver, which queues each destination's data in one step (issue 17): the order on
each stream is still the relay's, whatever the mix of destinations in one read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.core import PASS, Connection, Direction, Forward, Frame, Relay, Rule, Verdict
from acp_bridge.core.chain import RuleError
from acp_bridge.core.rewrites.base import Outcome
from acp_bridge.shell.bridge import Bridge, bridge_streams
from acp_bridge.shell.streams import Outlet

if TYPE_CHECKING:
    from acp_bridge.shell.observers import Observer

TO_AGENT, TO_CLIENT = Direction.TO_AGENT, Direction.TO_CLIENT


async def read_all(stream: trio.abc.ReceiveStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some():
        data += chunk
    return data


async def test_relays_both_directions_and_ends_on_agent_eof() -> None:
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    got: dict[str, bytes] = {}
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge_streams, client_bridge, agent_bridge, Relay())

            async def agent_side() -> None:
                got["agent"] = bytes(await agent_ours.receive_some())
                await agent_ours.send_all(b'{"jsonrpc":"2.0","id":0,"result":{}}\n{"partial')
                await agent_ours.send_eof()

            nursery.start_soon(agent_side)
            await client_ours.send_all(b'{"jsonrpc":"2.0","id":0,"method":"initialize"}\n')
            got["client"] = await read_all(client_ours)
    assert got["agent"] == b'{"jsonrpc":"2.0","id":0,"method":"initialize"}\n'
    assert got["client"] == b'{"jsonrpc":"2.0","id":0,"result":{}}\n{"partial'


async def test_client_eof_half_closes_the_agent_and_keeps_its_output_flowing() -> None:
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge_streams, client_bridge, agent_bridge, Relay())
            await client_ours.send_all(b"last line without newline")
            await client_ours.send_eof()
            assert await read_all(agent_ours) == b"last line without newline"
            await agent_ours.send_all(b"goodbye\n")
            await agent_ours.send_eof()
            assert await read_all(client_ours) == b"goodbye\n"


async def test_backpressure_reaches_the_agent_when_the_client_does_not_read() -> None:
    """With lockstep streams the bridge holds one chunk at most: the agent's writes block."""
    client_ours, client_bridge = trio.testing.lockstep_stream_pair()
    agent_ours, agent_bridge = trio.testing.lockstep_stream_pair()
    sent: list[bytes] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge_streams, client_bridge, agent_bridge, Relay())

            async def agent_writes() -> None:
                for data in (b"one\n", b"two\n"):
                    await agent_ours.send_all(data)
                    sent.append(data)

            nursery.start_soon(agent_writes)
            await trio.testing.wait_all_tasks_blocked()
            # The bridge took "one" and is stuck writing it to a client that is not
            # reading, so it does not read "two": the agent's write is still blocked.
            assert sent == [b"one\n"]
            assert await client_ours.receive_some() == b"one\n"
            assert await client_ours.receive_some() == b"two\n"
            await trio.testing.wait_all_tasks_blocked()
            assert sent == [b"one\n", b"two\n"]
            nursery.cancel_scope.cancel()


async def test_a_gone_peer_with_open_output_ends_the_session_and_requests_are_answered(
        autojump_clock: trio.testing.MockClock) -> None:
    """The one wiring, as the real agent process uses it: the peer says the agent is gone
    while its output stays open; the bridge stops reading it (after its linger, skipped by
    the mock clock) and answers what is in flight with the peer's message."""
    from acp_bridge.shell.bridge import AgentLife

    gone = trio.Event()

    class Gone(AgentLife):
        async def wait_gone(self) -> None:
            await gone.wait()

        async def after_output_ends(self, bridge: object) -> tuple[str, object]:
            return "agent died", {"exitStatus": 9}

    client_ours, client_bridge = trio.testing.memory_stream_pair()
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge_streams, client_bridge, agent_bridge, Relay(), None, Gone())
            await client_ours.send_all(b'{"jsonrpc":"2.0","id":4,"method":"session/prompt"}\n')
            assert await agent_ours.receive_some() == b'{"jsonrpc":"2.0","id":4,"method":"session/prompt"}\n'
            await agent_ours.send_all(b'{"jsonrpc":"2.0","method":"n"}\n{"torn')
            gone.set()  # the agent's output is never closed
            assert await read_all(client_ours) == (
                b'{"jsonrpc":"2.0","method":"n"}\n{"torn\n'
                b'{"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"agent died","data":{"exitStatus":9}}}\n')


class FailOnBad(Rule):
    """A rule with a bug that only a request for method "bad" reaches."""

    name = "fail-on-bad"

    def request(self, frame: Frame, session: Connection) -> Outcome:
        if frame.method == "bad":
            raise RuntimeError("bug")
        return PASS


async def test_a_rule_that_fails_under_strict_stops_the_bridge_and_in_flight_requests_are_answered() -> None:
    """The client's request in flight, and the one the rule failed on (not forwarded), get
    an error saying why; a long line streaming toward the client meanwhile is cut where it
    was, so each answer is a line of its own."""
    ok, bad = b'{"jsonrpc":"2.0","id":1,"method":"ok"}\n', b'{"jsonrpc":"2.0","id":2,"method":"bad"}\n'
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()

    async def bridge() -> None:
        with pytest.RaisesGroup(pytest.RaisesExc(RuleError, match="^rule 'fail-on-bad' failed: RuntimeError: bug$"), flatten_subgroups=True):
            await bridge_streams(client_bridge, agent_bridge, Relay([FailOnBad()], strict=True, max_line=64))
        await client_bridge.aclose()  # as open_stdio does when the bridge ends

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge)
            await client_ours.send_all(ok)
            assert await agent_ours.receive_some() == ok
            await agent_ours.send_all(b'{"long":"' + b"x" * 100)  # over the parse limit: streams on
            head = b""
            while len(head) < 109:
                head += await client_ours.receive_some()
            await client_ours.send_all(bad)
            rest = await read_all(client_ours)
    why = b'"message":"acp-bridge stopped before the agent answered: rule \'fail-on-bad\' failed: RuntimeError: bug (strict is set)"'
    assert head + rest == (b'{"long":"' + b"x" * 100 + b"\n"
                           b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,' + why + b"}}\n"
                           b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,' + why + b"}}\n")


forwards = st.lists(st.tuples(st.sampled_from([TO_AGENT, TO_CLIENT]), st.binary(max_size=6)), max_size=12)


async def _delivered(items: list[tuple[Direction, bytes]], pump: Direction | None) -> dict[Direction, bytes]:
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    bridge = Bridge(Relay(), Outlet(agent_bridge, "agent"), Outlet(client_bridge, "client"))
    batch = [Forward(direction, data, data, Verdict.PASS) for direction, data in items]
    async with trio.open_nursery() as nursery:
        bridge.background = nursery
        await bridge.deliver(batch, 0.0, 0.0, pump=pump)
    await agent_bridge.send_eof()
    await client_bridge.send_eof()
    got = {}
    for direction, stream in ((TO_AGENT, agent_ours), (TO_CLIENT, client_ours)):
        data = b""
        while chunk := await stream.receive_some():
            data += chunk
        got[direction] = data
    return got


@settings(max_examples=50, deadline=None)
@given(forwards, st.sampled_from([None, TO_AGENT, TO_CLIENT]))
def test_each_stream_gets_its_forwards_in_the_relays_order(items: list[tuple[Direction, bytes]],
                                                          own: Direction | None) -> None:
    got = trio.run(_delivered, items, own)
    for direction in (TO_AGENT, TO_CLIENT):
        assert got[direction] == b"".join(data for d, data in items if d is direction)


async def test_a_withdrawal_for_a_client_that_stopped_reading_does_not_hold_up_its_requests() -> None:
    """The client reads nothing while the agent floods it (a real pipe, full); its prompt
    makes the bridge withdraw the suggestions toward it. The prompt and every later line
    still reach the agent, and the withdrawal arrives after the flood once the client reads."""
    import os

    import orjson
    from trio.lowlevel import FdStream

    from acp_bridge.config import Config
    from acp_bridge.core.rewrites import build_rewrites

    def wire(msg: dict[str, object]) -> bytes:
        return orjson.dumps(msg) + b"\n"

    sid = "s"
    init = wire({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {"session": {"promptSuggestions": {}}}}})
    offer = wire({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
        "sessionUpdate": "prompt_suggestions_update", "suggestions": [{"prompt": [{"type": "text", "text": "go on"}]}]}}})
    flood = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"f" * 1000 + b'"}}\n'
    prompt = wire({"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
                   "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}})
    probes = b"".join(b'{"jsonrpc":"2.0","method":"_probe","params":{"n":%d}}\n' % n for n in range(200))
    withdrawal = wire({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
        "sessionUpdate": "prompt_suggestions_update", "suggestions": []}}})

    to_bridge_r, to_bridge_w = os.pipe()
    from_bridge_r, from_bridge_w = os.pipe()
    client_ours_send, client_ours_receive = FdStream(to_bridge_w), FdStream(from_bridge_r)
    client_bridge = trio.StapledStream(FdStream(from_bridge_w), FdStream(to_bridge_r))
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    relay = Relay(build_rewrites(Config()), strict=True)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge_streams, client_bridge, agent_bridge, relay)
            await client_ours_send.send_all(init)
            assert await agent_ours.receive_some() == init
            await agent_ours.send_all(b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n' + offer)
            seen = b""
            while not seen.endswith(offer):
                seen += await client_ours_receive.receive_some()
            # From here the client reads nothing; the agent writes far more than the pipe holds.
            await agent_ours.send_all(flood * 4096)
            await trio.testing.wait_all_tasks_blocked()  # the bridge is stuck writing to us
            await client_ours_send.send_all(prompt)
            assert await agent_ours.receive_some() == prompt  # the withdrawal is decided
            for probe in probes.splitlines(keepends=True):  # each read on its own
                await client_ours_send.send_all(probe)
                assert await agent_ours.receive_some() == probe
            total = len(offer) + len(flood) * 4096 + len(withdrawal)
            seen = seen.split(offer, 1)[1]
            while len(seen) < total - len(offer):  # the client reads again
                seen += await client_ours_receive.receive_some()
            # The withdrawal comes where the relay decided it: after the part of the flood
            # it had read when the prompt came, between two lines.
            before, after = seen.split(withdrawal)
            assert before + after == flood * 4096 and before.endswith(b"\n") and before
            nursery.cancel_scope.cancel()
    for stream in (client_ours_send, client_ours_receive, client_bridge):
        await stream.aclose()


async def test_a_diverted_line_over_the_parse_limit_is_one_stderr_line_and_nothing_to_the_client() -> None:
    """`stray_output = "stderr"`: however many pieces a long stray line comes in, stderr gets
    one line for it, and a stray line after it gets its own."""
    _agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    shown: list[str] = []
    relay = Relay(max_line=1024, divert_stray=True)
    bridge = Bridge(relay, Outlet(agent_bridge, "agent"), Outlet(client_bridge, "client"), on_stray=shown.append)
    async with trio.open_nursery() as nursery:
        bridge.background = nursery
        for chunk in (b"x" * 1500, b"x" * 1500, b"x" * 10 + b"\nbanner\n"):
            await bridge.deliver(relay.feed(TO_CLIENT, chunk), 0.0, 0.0)
    await client_bridge.send_eof()
    assert await client_ours.receive_some() == b""
    assert shown == ["acp-bridge: agent stdout (not forwarded): " + "x" * 500 + " ... (a line over the parse limit)",
                     "acp-bridge: agent stdout (not forwarded): banner"]


class FailOnBadNote(Rule):
    name = "fail-on-bad-note"
    triggers = (b'"bad"',)

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        raise RuntimeError("bug")


class Kept:
    """An observer that keeps what the capture would record."""

    def __init__(self) -> None:
        self.forwards: list[Forward] = []

    def record(self, wall: float, mono: float, forwards: Sequence[Forward]) -> None:
        self.forwards.extend(forwards)


async def test_under_strict_the_lines_before_the_failing_one_in_the_same_read_go_through() -> None:
    """The agent answers, sends an update, then a line the rule fails on, in one write: the
    answer and the update reach the client and the capture, as one line at a time would
    have; only the request left in flight is answered by the bridge as it stops."""
    first, second = b'{"jsonrpc":"2.0","id":1,"method":"a"}\n', b'{"jsonrpc":"2.0","id":2,"method":"b"}\n'
    answer, update = b'{"jsonrpc":"2.0","id":1,"result":{}}\n', b'{"jsonrpc":"2.0","method":"u"}\n'
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    kept = Kept()

    async def bridge() -> None:
        with pytest.RaisesGroup(pytest.RaisesExc(RuleError, match="^rule 'fail-on-bad-note' failed"),
                                flatten_subgroups=True):
            await bridge_streams(client_bridge, agent_bridge, Relay([FailOnBadNote()], strict=True),
                                 cast("Observer", kept))
        await client_bridge.aclose()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge)
            await client_ours.send_all(first + second)
            got = b""
            while got != first + second:
                got += await agent_ours.receive_some()
            await agent_ours.send_all(answer + update + b'{"jsonrpc":"2.0","method":"bad"}\n')
            rest = await read_all(client_ours)
    stopped = (b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"acp-bridge stopped before the agent '
               b'answered: rule \'fail-on-bad-note\' failed: RuntimeError: bug (strict is set)"}}\n')
    assert rest == answer + update + stopped
    assert [f.data for f in kept.forwards if f.direction is TO_CLIENT] == [answer, update, stopped]


@pytest.mark.parametrize(("bulk", "run_min"), [(False, 1), (True, 1), (True, 1 << 20)],
                         ids=["per-line", "bulk-runs", "bulk-small-read"])
async def test_under_strict_the_requests_after_the_failing_line_in_the_same_read_are_answered(
        bulk: bool, run_min: int) -> None:
    """The client writes a request the rule fails on and, in the same write, two more, a
    notification, a response and a request with a 100-digit id: each request gets the stop's
    answer, once, in order, and is recorded; nothing of that read reaches the agent. Before,
    only the failing request was answered: the others were lost with the read."""
    big = "9" * 100
    lines = [b'{"jsonrpc":"2.0","id":0,"method":"bad"}\n', b'{"jsonrpc":"2.0","id":1,"method":"ok"}\n',
             b'{"jsonrpc":"2.0","method":"n","params":{}}\n', b'{"jsonrpc":"2.0","id":2,"method":"bad"}\n',
             b'{"jsonrpc":"2.0","id":"x","result":{}}\n',
             b'{"jsonrpc":"2.0","id":%s,"method":"ok"}\n' % big.encode()]
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    kept = Kept()

    async def bridge() -> None:
        with pytest.RaisesGroup(pytest.RaisesExc(RuleError, match="^rule 'fail-on-bad' failed"),
                                flatten_subgroups=True):
            await bridge_streams(client_bridge, agent_bridge,
                                 Relay([FailOnBad()], strict=True, bulk=bulk, run_min=run_min),
                                 cast("Observer", kept))
        await client_bridge.aclose()
        await agent_bridge.aclose()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge)
            await client_ours.send_all(b"".join(lines))
            got = await read_all(client_ours)
            to_agent = await read_all(agent_ours)
    why = (b'"error":{"code":-32603,"message":"acp-bridge stopped before the agent answered: '
           b'rule \'fail-on-bad\' failed: RuntimeError: bug (strict is set)"}}\n')
    answers = [b'{"jsonrpc":"2.0","id":%s,%s' % (id_, why) for id_ in (b"0", b"1", b"2", big.encode())]
    assert got == b"".join(answers)
    assert to_agent == b""
    assert [f.data for f in kept.forwards if f.direction is TO_CLIENT] == answers
    assert [f.data for f in kept.forwards if f.direction is TO_AGENT and f.data] == []


async def test_under_strict_the_requests_written_but_not_yet_read_are_answered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's pipe holds more than the read that made the bridge stop (a read of
    one line here): what the client had written is read as the bridge stops, and each
    request in it answered, a torn last one at the pipe's end too; nothing goes to the
    agent. Before, only the failing request was answered."""
    import os

    from trio.lowlevel import FdStream

    import acp_bridge.shell.bridge as bridge_module

    bad = b'{"jsonrpc":"2.0","id":0,"method":"bad"}\n'
    later = (b'{"jsonrpc":"2.0","id":1,"method":"ok"}\n{"jsonrpc":"2.0","method":"n"}\n'
             b'{"jsonrpc":"2.0","id":2,"method":"bad"}\n{"jsonrpc":"2.0","id":3,"method":"ok"}')
    monkeypatch.setattr(bridge_module, "READ_SIZE", len(bad))
    read_end, write_end = os.pipe()
    os.write(write_end, bad + later)
    os.close(write_end)
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    kept = Kept()

    async def bridge() -> None:
        with pytest.RaisesGroup(pytest.RaisesExc(RuleError, match="^rule 'fail-on-bad' failed"),
                                flatten_subgroups=True):
            await bridge_streams(trio.StapledStream(client_bridge, FdStream(read_end)), agent_bridge,
                                 Relay([FailOnBad()], strict=True), cast("Observer", kept))
        await client_bridge.aclose()
        await agent_bridge.aclose()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge)
            got = await read_all(client_ours)
            to_agent = await read_all(agent_ours)
    why = (b'"error":{"code":-32603,"message":"acp-bridge stopped before the agent answered: '
           b'rule \'fail-on-bad\' failed: RuntimeError: bug (strict is set)"}}\n')
    answers = [b'{"jsonrpc":"2.0","id":%d,%s' % (id_, why) for id_ in range(4)]
    assert got == b"".join(answers)
    assert to_agent == b""
    assert [f.data for f in kept.forwards if f.direction is TO_CLIENT] == answers


async def test_a_strict_stop_is_not_held_up_by_a_client_that_reads_nothing(autojump_clock: object) -> None:
    """The lines before the failing one are offered to the client for as long as the
    answers are (STOP_TIMEOUT), not for ever: the bridge still stops."""
    client_ours, client_bridge = trio.testing.lockstep_stream_pair()
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    request = b'{"jsonrpc":"2.0","id":1,"method":"a"}\n'
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client_ours.send_all, request)
            with pytest.RaisesGroup(pytest.RaisesExc(RuleError, match="^rule 'fail-on-bad-note' failed"),
                                    flatten_subgroups=True):
                async with trio.open_nursery() as inner:
                    inner.start_soon(bridge_streams, client_bridge, agent_bridge,
                                     Relay([FailOnBadNote()], strict=True))
                    assert await agent_ours.receive_some() == request
                    await agent_ours.send_all(b'{"jsonrpc":"2.0","method":"u"}\n{"jsonrpc":"2.0","method":"bad"}\n')


async def test_input_already_written_is_read_before_answering_however_late_the_pump_runs(
        autojump_clock: trio.testing.MockClock) -> None:
    """When the agent is gone, the bridge waits for the client's pump to read what the
    client had written (its requests are answered too). A pump held back longer than the
    linger (a busy machine) is waited for while there is input left, up to DRAIN_LIMIT:
    before, the wait ended after the linger, and the requests not yet read went unanswered."""
    import os

    from acp_bridge.shell.bridge import DRAIN_LIMIT
    from acp_bridge.shell.streams import Reader

    read_end, write_end = os.pipe()
    os.write(write_end, b'{"jsonrpc":"2.0","id":1,"method":"x"}\n')
    stream = trio.lowlevel.FdStream(read_end)
    ours, _ = trio.testing.memory_stream_pair()
    bridge = Bridge(Relay(), Outlet(ours, "agent"), Outlet(ours, "client"))
    reader = bridge.readers[Direction.TO_AGENT] = Reader(stream)
    got: list[bytes] = []
    try:
        async with trio.open_nursery() as nursery:
            async def held_back_pump() -> None:
                await trio.sleep(3)  # three lingers of 1 s: the machine is busy
                got.append(bytes(await reader.receive(1 << 16)))
                await reader.receive(1 << 16)  # waits for more: it has read everything

            nursery.start_soon(held_back_pump)
            start = trio.current_time()
            await bridge.wait_input_drained(Direction.TO_AGENT, 1.0)
            assert got == [b'{"jsonrpc":"2.0","id":1,"method":"x"}\n']
            assert trio.current_time() - start == pytest.approx(3, abs=0.01)
            nursery.cancel_scope.cancel()
        # Input that is never read is waited for only so long.
        os.write(write_end, b"more\n")
        start = trio.current_time()
        await bridge.wait_input_drained(Direction.TO_AGENT, 1.0)
        assert trio.current_time() - start == pytest.approx(DRAIN_LIMIT, abs=0.01)
    finally:
        os.close(write_end)
        await stream.aclose()
