"""Bridge.deliver queues each destination's data in one step (issue 17): the order on each
stream is still the relay's, whatever the mix of destinations in one read."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.core import Direction, Forward, Relay, Verdict
from acp_bridge.shell.bridge import Bridge
from acp_bridge.shell.streams import Outlet

TO_AGENT, TO_CLIENT = Direction.TO_AGENT, Direction.TO_CLIENT

forwards = st.lists(st.tuples(st.sampled_from([TO_AGENT, TO_CLIENT]), st.binary(max_size=6)), max_size=12)


async def _delivered(items: list[tuple[Direction, bytes]], own: Direction | None) -> dict[Direction, bytes]:
    agent_ours, agent_bridge = trio.testing.memory_stream_pair()
    client_ours, client_bridge = trio.testing.memory_stream_pair()
    bridge = Bridge(Relay(), Outlet(agent_bridge, "agent"), Outlet(client_bridge, "client"))
    batch = [Forward(direction, data, data, Verdict.PASS) for direction, data in items]
    async with trio.open_nursery() as nursery:
        bridge.background = nursery
        await bridge.deliver(batch, 0.0, 0.0, own=own)
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
