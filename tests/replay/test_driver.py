"""replay/driver.py over an in-memory stream, against hostile agents: lines that are not
messages, answers to ids never sent, odd ids, an agent that goes away, a line too long."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from acp_bridge.replay import driver as driver_module
from acp_bridge.replay.client_side import ClientSide
from acp_bridge.replay.drive_report import DriveReport
from acp_bridge.replay.driver import Driver
from tests.replay.drive import permission, rec

RECORDS = [
    rec(1, "to-agent", "request", "session/new", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                                                   "params": {"cwd": "/w"}}),
    rec(2, "to-client", "response", "session/new", {"id": 1, "result": {"sessionId": "old"}}, "old"),
    rec(3, "to-agent", "request", "session/prompt", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                                                      "params": {"sessionId": "old"}}, "old"),
    rec(4, "to-client", "response", "session/prompt", {"id": 2, "result": {"stopReason": "end_turn"}}, "old"),
]

Agent = Callable[[trio.abc.HalfCloseableStream, list[Any]], Awaitable[None]]


class Lines:
    """The driver's lines, as the fake agent reads them (None at EOF)."""

    def __init__(self, stream: trio.abc.HalfCloseableStream) -> None:
        self.stream, self.buffer = stream, b""

    async def next(self) -> Any:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some()
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return orjson.loads(line)


async def play(agent: Agent, records: list[dict[str, Any]] = RECORDS, **options: Any) -> tuple[DriveReport, list[Any]]:
    ours, theirs = trio.testing.memory_stream_pair()
    received: list[Any] = []
    side = ClientSide.from_records(records)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent, theirs, received)
            report = await Driver(side, ours, **options).run()
            nursery.cancel_scope.cancel()  # the caller stops the agent
    return report, received


async def hostile(stream: trio.abc.HalfCloseableStream, received: list[Any]) -> None:
    """Garbage around each answer: not JSON, a batch, JSON nested past what is parsed, an
    answer to an id never sent, a request with an id that is a list."""
    junk = (b"not json\n[1, 2]\n" + b"[" * 3000 + b"]" * 3000 + b"\n"
            + b'{"jsonrpc":"2.0","id":99,"result":{}}\n'
            + b'{"jsonrpc":"2.0","id":[1],"method":"fs/read_text_file","params":{"path":"/x"}}\n')
    lines = Lines(stream)
    while (msg := await lines.next()) is not None:
        received.append(msg)
        if msg.get("method") == "session/new":
            await stream.send_all(junk + b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"live"}}\n')
        elif msg.get("method") == "session/prompt":
            await stream.send_all(junk + b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}\r\n')


async def test_a_hostile_agent_gets_its_answers_and_the_run_goes_on() -> None:
    report, received = await play(hostile)
    assert [m.get("method") for m in received if "method" in m] == ["session/new", "session/prompt"]
    prompt = next(m for m in received if m.get("method") == "session/prompt")
    assert prompt["params"] == {"sessionId": "live"}  # the live session id put in
    errors = [m for m in received if "error" in m]
    assert [e["id"] for e in errors] == [[1], [1]]  # the odd id answered as it came
    assert errors[0]["error"]["message"] == ("acp-bridge drive: the recording has no answer to fs/read_text_file "
                                             "with these params")
    assert report.unanswered == 2
    assert [t.problems for t in report.turns.values()] == [
        ['the agent asked fs/read_text_file {"path":"/x"}: the recording has no answer to fs/read_text_file with '
         'these params']] * 2


async def leaves_mid_turn(stream: trio.abc.HalfCloseableStream, received: list[Any]) -> None:
    lines = Lines(stream)
    while (msg := await lines.next()) is not None:
        if msg.get("method") == "session/new":
            await stream.send_all(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"live"}}\n')
        elif msg.get("method") == "session/prompt":
            await stream.send_all(b'{"jsonrpc":"2.0","method":"session/update","params":{')  # torn
            await stream.send_eof()
            return


async def test_an_agent_that_leaves_mid_turn_fails_that_turn() -> None:
    report, _ = await play(leaves_mid_turn)
    assert {t.where: t.problems for t in report.turns.values()} == {
        "session 1 setup": [],
        "session 1 turn 1": ["the agent's output ended before the end of the turn (session/prompt seq 3)"]}


async def long_lines(stream: trio.abc.HalfCloseableStream, received: list[Any]) -> None:
    """Lines past the limit (made 1,000 bytes): one in pieces before an answer, one in the
    piece that holds the answer after it, and one just at the limit."""
    lines = Lines(stream)
    while (msg := await lines.next()) is not None:
        received.append(msg)
        if msg.get("method") == "session/new":
            for _ in range(5):
                await stream.send_all(b"x" * 400)
            await stream.send_all(b'\n{"jsonrpc":"2.0","id":1,"result":{"sessionId":"live"}}\n')
        elif msg.get("method") == "session/prompt":
            await stream.send_all(b"y" * 1001 + b"\n" + b"z" * 1000 + b"\n"
                                  + b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}\n')


async def test_a_line_past_the_limit_is_dropped_as_it_comes_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """It was held whole up to 256 MiB, then ended the run: now it is counted as a line (the
    capture records it) and its bytes are dropped as they come, said once."""
    monkeypatch.setattr(driver_module, "MAX_LINE", 1000)
    said: list[str] = []
    report, received = await play(long_lines, say=said.append)
    assert said == ["the agent wrote a line longer than 1,000 bytes (the parse limit): it was not read"]
    assert {t.where: t.problems for t in report.turns.values()} == {"session 1 setup": [], "session 1 turn 1": []}
    assert [m["params"] for m in received if m.get("method") == "session/prompt"] == [{"sessionId": "live"}]


async def test_an_agent_that_floods_its_output_is_stopped() -> None:
    """Lines in a loop and no answer: each is recorded and read back to be compared, so the
    run once grew by a gigabyte every five seconds until --timeout (or for ever without)."""
    said: list[str] = []

    async def floods(stream: trio.abc.HalfCloseableStream, received: list[Any]) -> None:
        if await Lines(stream).next() is not None:
            while True:
                await stream.send_all(b'{"jsonrpc":"2.0","method":"x"}\n' * 100)

    side = ClientSide.from_records(RECORDS)
    ours, theirs = trio.testing.memory_stream_pair()
    driver = Driver(side, ours, say=said.append)
    driver.max_lines = 1000
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(floods, theirs, [])
            report = await driver.run()
            nursery.cancel_scope.cancel()
    text = "the agent wrote more than 1,000 lines, over ten times what the recording holds: it was stopped"
    assert said == [text] and report.stopped == "the agent flooded its output"
    assert {t.where: t.problems for t in report.turns.values()} == {
        "session 1 setup": [text], "session 1 turn 1": ["not run: the run ended before it"]}
    assert Driver(side, ours).max_lines == 10 * 4 + driver_module.FLOOD_FLOOR


async def test_a_permission_request_with_no_recorded_answer_gets_an_error() -> None:
    async def asks(stream: trio.abc.HalfCloseableStream, received: list[Any]) -> None:
        lines = Lines(stream)
        while (msg := await lines.next()) is not None:
            received.append(msg)
            if msg.get("method") == "session/new":
                await stream.send_all(orjson.dumps(permission("p", [])) + b"\n")
                await stream.send_all(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"live"}}\n')
            elif msg.get("method") == "session/prompt":
                await stream.send_all(b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}\n')

    report, received = await play(asks)
    assert [m["error"]["message"] for m in received if m.get("id") == "p"] == [
        "acp-bridge drive: the recording has no answer to session/request_permission with these params"]
    assert report.unanswered == 1


async def test_an_id_beyond_64_bits_is_answered_as_the_agent_wrote_it() -> None:
    records = [*RECORDS[:3],
               rec(4, "to-client", "request", "fs/read_text_file",
                   {"jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file", "params": {"path": "/w/a"}}, "old"),
               rec(5, "to-agent", "response", "fs/read_text_file", {"jsonrpc": "2.0", "id": 5, "result": {}}, "old"),
               RECORDS[3]]
    big = b"123456789012345678901234567890"
    raw: list[bytes] = []

    async def asks(stream: trio.abc.HalfCloseableStream, received: list[Any]) -> None:
        lines = Lines(stream)
        while (msg := await lines.next()) is not None:
            if msg.get("method") == "session/new":
                await stream.send_all(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"live"}}\n')
            elif msg.get("method") == "session/prompt":
                await stream.send_all(b'{"jsonrpc":"2.0","id":' + big + b',"method":"fs/read_text_file",'
                                      b'"params":{"path":"/w/a"}}\n')
                raw.append(bytes(await stream.receive_some()).strip())
                await stream.send_all(b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}\n')

    report, _ = await play(asks, records)
    assert raw == [b'{"jsonrpc":"2.0","id":' + big + b',"result":{}}']
    assert not report.failed
