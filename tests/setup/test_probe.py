"""doctor's reading of the bridge's stdout, in-process on a memory stream: lines split at any
chunking, a line over the limit noted and its rest skipped, an answer's id matched exactly."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from acp_bridge.setup.probe import _Conversation, id_text
from acp_bridge.setup.report import Probe, WrongId

STDOUT = (b"hello\n" + b"x" * 40 + b"\n" + b"y" * 41 + b"zz\n" + b"after\n"
          + b'{"jsonrpc":"2.0","id":1.0,"result":{}}\n' + b'{"jsonrpc":"2.0","id":1,"result":{}}\n' + b"tail")


def read(chunks: list[bytes], max_line: int) -> tuple[Probe, _Conversation]:
    probe = Probe(command=["agent"], protocol=1)

    async def go() -> _Conversation:
        send, receive = trio.testing.memory_stream_one_way_pair()
        talk = _Conversation(probe, SimpleNamespace(stdout=receive), 0.0, max_line)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(talk.read_stdout)
            for chunk in chunks:
                await send.send_all(chunk)
                await trio.testing.wait_all_tasks_blocked()
            await send.aclose()
        return talk

    return probe, trio.run(go)


@pytest.mark.parametrize("size", [1, 3, 41, 42, len(STDOUT)])
def test_lines_are_read_at_any_chunking_and_one_too_long_is_skipped_to_its_end(size: int) -> None:
    probe, talk = read([STDOUT[i:i + size] for i in range(0, len(STDOUT), size)], max_line=40)
    assert probe.stray == ["hello", "x" * 40, "after", "tail"]  # 40 bytes is the limit, and is read
    assert probe.long_line == "initialize"
    assert probe.wrong_id == WrongId("initialize", 1, "1.0")  # 1.0 is not the id 1 that was sent
    assert list(talk.answers) == [1]


def test_an_error_answered_to_no_request_is_kept_with_its_message() -> None:
    probe, _ = read([b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'], 100)
    assert probe.wrong_id == WrongId("initialize", 1, "null", "Parse error")


@pytest.mark.parametrize(("raw", "expected"), [
    (b'{"id":' + b"1" * 100 + b"}", "1" * 100),
    (b'{"id":"1"}', '"1"'),
    (b'{"id":null}', "null"),
    (b'{"id":1e3}', "1e3"),
    (b'{"id":true}', "true"),
])
def test_a_wrong_id_is_shown_as_it_was_written(raw: bytes, expected: str) -> None:
    import json

    import orjson

    try:
        msg: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        msg = json.loads(raw)
    assert id_text(raw, msg["id"]) == expected


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity"])
def test_an_answer_holding_nan_is_no_json_and_answers_nothing(value: bytes) -> None:
    """The fallback reader for a number past 308 digits is the stdlib's, which also takes
    NaN and Infinity; no JSON reader of a client does (JSON.parse, orjson), so the line is
    stray output, as it was, and not the answer doctor waited for."""
    line = b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":' + value + b"}}"
    probe, talk = read([line + b"\n"], 100)
    assert (probe.stray, talk.answers) == ([line.decode()], {})
