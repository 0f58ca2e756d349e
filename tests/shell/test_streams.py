"""Outlet and Reader on in-memory streams (and on a pipe, for their descriptor paths): the
relay's order kept, end of stream as a step of its own, a reader that is gone."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing
from trio.lowlevel import FdStream

from acp_bridge.shell.streams import Outlet, Reader


async def read_all(stream: trio.abc.ReceiveStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some():
        data += chunk
    return data


async def test_flush_writes_what_was_put_in_order() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    outlet = Outlet(ours, "client")
    outlet.put(b"one\n")
    outlet.put(b"")  # nothing: never queued
    outlet.put_all([b"two\n", b"three\n"])
    outlet.put(b"four\n")
    await outlet.flush()
    assert await theirs.receive_some() == b"one\ntwo\nthree\nfour\n"
    await outlet.flush()  # nothing queued: nothing written
    await outlet.send_eof()
    assert await theirs.receive_some() == b""


async def test_what_is_put_during_a_write_goes_out_with_that_flush_after_it() -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()  # a write waits for its reader
    outlet = Outlet(ours, "agent")
    outlet.put(b"first\n")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outlet.flush)
        await trio.testing.wait_all_tasks_blocked()  # the flush is in its write
        outlet.put(b"second\n")  # e.g. the other pump's answer
        nursery.start_soon(outlet.flush)  # the other pump: waits its turn behind the first
        got = await theirs.receive_some()
        while not got.endswith(b"second\n"):
            got += await theirs.receive_some()
    assert got == b"first\nsecond\n"


async def test_flush_soon_writes_in_the_background_once() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    outlet = Outlet(ours, "client")
    async with trio.open_nursery() as nursery:
        outlet.put(b"a\n")
        outlet.flush_soon(nursery)
        outlet.put(b"b\n")
        outlet.flush_soon(nursery)  # one is under way: it writes this too
        assert len(nursery.child_tasks) == 1
    assert await theirs.receive_some() == b"a\nb\n"


async def test_send_eof_writes_the_queue_then_ends_the_stream_once() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    outlet = Outlet(ours, "client")
    outlet.put(b"last\n")
    await outlet.send_eof()
    await outlet.send_eof()  # a second end is no error
    outlet.put(b"after the end\n")  # dropped
    await outlet.flush()
    assert await read_all(theirs) == b"last\n"


async def test_send_eof_closes_a_stream_that_cannot_half_close() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    outlet = Outlet(send, "agent")
    outlet.put(b"x\n")
    await outlet.send_eof()
    assert await read_all(receive) == b"x\n"
    with pytest.raises(trio.ClosedResourceError):
        await send.send_all(b"y")


async def test_a_reader_that_is_gone_ends_the_direction_quietly() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    outlet = Outlet(ours, "client")
    await theirs.aclose()
    outlet.put(b"lost\n")
    await outlet.flush()  # no BrokenResourceError: the direction ends, the bridge does not crash
    assert outlet.broken
    outlet.put(b"dropped\n")
    assert repr(outlet) == "<Outlet client queued=0 broken=True closed=False>"
    await outlet.send_eof()


async def test_abandon_drops_the_queue_and_ends_a_write_blocked_on_it() -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()
    outlet = Outlet(ours, "agent")
    outlet.put(b"never read\n")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outlet.flush)
        await trio.testing.wait_all_tasks_blocked()  # the write waits for a reader that never reads
        outlet.put(b"queued behind it\n")
        await outlet.abandon()
    # The flush returned, and the stream is closed: the blocked write had handed its bytes
    # to the stream already, and what was queued behind it never goes out.
    assert outlet.broken
    assert repr(outlet) == "<Outlet agent queued=0 broken=True closed=True>"
    assert await read_all(theirs) == b"never read\n"


@pytest.fixture
async def pipe() -> AsyncIterator[tuple[FdStream, FdStream]]:
    read_end, write_end = os.pipe()
    reader, writer = FdStream(read_end), FdStream(write_end)
    yield reader, writer
    await reader.aclose()
    await writer.aclose()


async def test_on_a_pipe_a_write_after_waiting_goes_straight_to_the_descriptor(
        pipe: tuple[FdStream, FdStream]) -> None:
    reader, writer = pipe
    outlet = Outlet(trio.StapledStream(writer, reader), "agent")
    data = bytes(range(256)) * 4096  # 1 MiB: more than the pipe holds, so part waits in send_all
    outlet.put(data)
    got = bytearray()
    async with trio.open_nursery() as nursery:
        async def drain() -> None:
            while len(got) < len(data):
                got.extend(await reader.receive_some(1 << 20))

        nursery.start_soon(drain)
        await outlet.flush(just_waited=True)
    assert bytes(got) == data


async def test_a_reader_on_a_pipe_reads_at_once_when_there_is_data_and_says_when_it_waits(
        pipe: tuple[FdStream, FdStream]) -> None:
    source, sink = pipe
    reader = Reader(source)
    blocks: list[bool] = []
    reader.on_block = lambda: blocks.append(reader.blocked)
    await sink.send_all(b"ready\n")
    assert await reader.receive(1024) == b"ready\n"
    assert (reader.waited, reader.reads, blocks) == (False, 1, [])
    async with trio.open_nursery() as nursery:
        got: list[bytes | bytearray] = []

        async def receive() -> None:
            got.append(await reader.receive(1024))

        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        assert (reader.blocked, blocks) == (True, [True])
        await sink.send_all(b"later\n")
    assert got == [b"later\n"]
    assert (reader.waited, reader.blocked, reader.reads) == (True, False, 2)
    await sink.aclose()
    assert await reader.receive(1024) == b""


async def test_a_reader_on_any_other_stream_uses_receive_some() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    reader = Reader(theirs)
    await ours.send_all(b"x\n")
    assert (await reader.receive(1024), reader.fd, reader.waited, reader.reads) == (b"x\n", None, True, 0)


async def test_suggestion_states_toward_a_client_that_stopped_reading_keep_only_the_latest() -> None:
    """The client reads nothing (its pipe is full) while it prompts on and on in two
    sessions: each prompt's withdrawal or update, queued behind the write that is stuck,
    replaces the one of its session still unsent, so the queue stays two messages long
    (before: every one waited, 20,000 of them). When the client reads again it gets what
    was in flight, then the latest state of each session, in the order they came."""
    import orjson

    from acp_bridge.core import Direction, Forward, Relay, Verdict
    from acp_bridge.shell.bridge import Bridge

    def stated(sid: str, n: int) -> Forward:
        update = {"sessionUpdate": "prompt_suggestions_update", "suggestions": [{"prompt": [{"type": "text", "text": f"n{n}"}]}]}
        data = orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                             "params": {"sessionId": sid, "update": update}}) + b"\n"
        return Forward(Direction.TO_CLIENT, data, b"", Verdict.EMIT, None, ("suggestions",))

    answer = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"gone"}}\n'
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    filled = 0
    while True:  # the client stopped reading: its pipe is full
        try:
            filled += os.write(write_end, b"x" * 65536)
        except BlockingIOError:
            break
    agent_side, _ = trio.testing.memory_stream_pair()
    client = Outlet(FdStream(write_end), "client")
    bridge = Bridge(Relay(), Outlet(agent_side, "agent"), client)
    received = b""
    try:
        async with trio.open_nursery() as nursery:
            bridge.background = nursery
            await bridge.deliver([stated("s1", 0)], 0.0, 0.0, pump=Direction.TO_AGENT)
            await trio.testing.wait_all_tasks_blocked()  # its write is stuck on the full pipe
            for n in range(1, 10001):
                await bridge.deliver([stated("s1", n), stated("s2", n)], 0.0, 0.0, pump=Direction.TO_AGENT)
            await bridge.deliver([Forward(Direction.TO_CLIENT, answer, b"", Verdict.EMIT, None, ("bridge",)),
                                  stated("s1", 10001)], 0.0, 0.0, pump=Direction.TO_AGENT)
            assert client.queued == len(stated("s2", 10000).data) + len(answer) + len(stated("s1", 10001).data)
            expected = filled + sum(len(f.data) for f in (stated("s1", 0), stated("s2", 10000), stated("s1", 10001))) + len(answer)
            while len(received) < expected:  # the client reads again
                await trio.lowlevel.wait_readable(read_end)
                received += os.read(read_end, 1 << 20)
            nursery.cancel_scope.cancel()
    finally:
        os.close(read_end)
        await client.stream.aclose()
    assert received[filled:] == stated("s1", 0).data + stated("s2", 10000).data + answer + stated("s1", 10001).data
