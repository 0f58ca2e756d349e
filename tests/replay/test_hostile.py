"""Serving against a hostile or careless client: lines that are not requests the recording can
answer, deep and odd ids, a client that does not answer the agent's requests or floods
requests, an over-long line, a closed stdout, SIGINT, and a stderr nobody reads or that is
closed. The replay never crashes and never hangs. Served in this process on pipes (what
`acp-bridge replay` runs, `serving`), but where the process is what is tested: a stdout
closed under it, SIGINT, and a stderr nobody reads (were a write to it to block, it would
block the test's own process for good)."""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from acp_bridge.replay.server import ReplayOptions
from tests.replay.hostile import (
    CLIENT_ALLOWS,
    END_TURN,
    INIT_ANSWER,
    PERMISSION,
    basic,
    msg,
    replaying,
    rpc,
    serving,
    write_capture,
)

INIT = rpc(id=0, method="initialize", params={})
NEW = rpc(id=1, method="session/new", params={})
PROMPT = rpc(id=2, method="session/prompt", params={"sessionId": "S1"})
PREFIX = "acp-bridge replay: "


def error(id_text: bytes, code: int, message: str) -> bytes:
    return (b'{"jsonrpc":"2.0","id":' + id_text + b',"error":{"code":' + str(code).encode()
            + b',"message":' + orjson.dumps(message) + b"}}\n")


NOT_A_STRING = "acp-bridge replay: invalid request: a request whose method is not a string"
BAD_ID = "acp-bridge replay: invalid request: a request whose id is not a string, a number or null"
BATCH = "acp-bridge replay: a batch is not replayed (ACP has none); send each request on its own line"
NOT_JSON = "acp-bridge replay: the line is not a JSON-RPC message (it does not parse as JSON)"
DEEP = b"[" * 300 + b"]" * 300
INVALID = [
    ("method-not-a-string", b'{"jsonrpc":"2.0","id":5,"method":{"a":1}}\n',
     error(b"5", -32600, NOT_A_STRING), "a request whose method is not a string"),
    ("id-nested-300-deep", b'{"jsonrpc":"2.0","id":' + DEEP + b',"method":"initialize"}\n',
     error(b"null", -32600, BAD_ID), "a request whose id is not a string, a number or null"),
    ("id-true", b'{"jsonrpc":"2.0","id":true,"method":"initialize"}\n',
     error(b"null", -32600, BAD_ID), "a request whose id is not a string, a number or null"),
    ("batch", b'[{"jsonrpc":"2.0","id":1e3,"method":"initialize"},{"jsonrpc":"2.0","method":"n"}]\n',
     b"[" + error(b"1e3", -32600, BATCH)[:-1] + b"]\n", "a batch"),
    ("empty-batch", b"[]\n", error(b"null", -32600, BATCH), "a batch"),
    ("garbage", b"hello\n", error(b"null", -32700, NOT_JSON), "a line that is not JSON"),
    ("not-json-with-an-id", b'{"jsonrpc":"2.0","id":"g","method":"x","params":NaN}\n',
     error(b'"g"', -32700, NOT_JSON), "a line that is not JSON"),
]


async def test_a_line_that_is_not_a_request_gets_a_json_rpc_error(tmp_path: Path) -> None:
    """Each is answered at once (the client does not wait forever), each kind said once on
    stderr, and the recording is not used up: initialize then gets the recorded answer."""
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        for _, line, answer, _ in INVALID:
            await replay.send(line)
            assert await replay.line() == answer
        assert (await replay.ask(INIT))["result"] == INIT_ANSWER
        assert await replay.finish() == 0
    kinds = list(dict.fromkeys(what for *_, what in INVALID))
    assert replay.stderr_lines() == [f"{PREFIX}the client sent {what}; answered with a JSON-RPC error"
                                     for what in kinds]


LITERALS = [b"1" * 100, b"1.50", b"1e3"]


async def test_a_live_id_comes_back_as_the_client_wrote_it(tmp_path: Path) -> None:
    """In the recorded answer and in a divergence's error alike (orjson would write
    1.111e+99, 1.5 and 1000.0)."""
    inits = [msg(2 * i + 1, "to-agent", "request", INIT, "initialize", 0) for i in range(len(LITERALS))]
    answers = [msg(2 * i + 2, "to-client", "response", rpc(id=0, result=INIT_ANSWER), "initialize", 0)
               for i in range(len(LITERALS))]
    capture = write_capture(tmp_path / "c.jsonl", [r for pair in zip(inits, answers, strict=True) for r in pair])
    async with serving(capture) as replay:
        for literal in LITERALS:
            await replay.send(b'{"jsonrpc":"2.0","id":' + literal + b',"method":"initialize","params":{}}\n')
            assert await replay.line() == (b'{"jsonrpc":"2.0","id":' + literal + b',"result":'
                                           + orjson.dumps(INIT_ANSWER) + b"}\n")
        for literal in LITERALS:  # the recording is used up: errors
            await replay.send(b'{"jsonrpc":"2.0","id":' + literal + b',"method":"initialize","params":{}}\n')
            assert (await replay.line()).startswith(b'{"jsonrpc":"2.0","id":' + literal + b',"error":{"code":-32603,')
        assert await replay.finish() == 0


async def test_a_recorded_answer_nested_past_what_can_be_written_gets_the_live_id(tmp_path: Path) -> None:
    answer = '{"jsonrpc":"2.0","id":0,"result":{"deep":' + DEEP.decode() + "}}\n"
    capture = write_capture(tmp_path / "c.jsonl", [
        msg(1, "to-agent", "request", INIT, "initialize", 0),
        msg(2, "to-client", "response", answer, "initialize", 0)])
    async with serving(capture) as replay:
        await replay.send(rpc(id=5, method="initialize", params={}))
        assert await replay.line() == answer.replace('"id":0', '"id":5').encode()
        assert await replay.finish() == 0


async def test_a_non_string_session_shows_as_json_in_the_divergence(tmp_path: Path) -> None:
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        got = await replay.ask(rpc(id=9, method="session/load", params={"sessionId": {"a": 1}}))
        assert got["error"]["message"] == ('acp-bridge replay: no recorded session/load (session {"a":1}) left to '
                                           "answer it with; the recording expected next: initialize id 0")
        await replay.finish()


async def prompted(replay: Any) -> None:
    """initialize, session/new, and the prompt, up to the agent's permission request."""
    await replay.ask(INIT)
    await replay.ask(NEW)
    await replay.send(PROMPT)
    assert await replay.line() == PERMISSION


UNANSWERED = (f"{PREFIX}divergence: the client sent another request before answering the replay's "
              "session/request_permission; going on without its answer")


async def test_a_client_that_sends_another_request_instead_of_answering_is_not_kept_waiting(tmp_path: Path) -> None:
    """The wait for the permission's answer ends: the prompt is answered, then the new
    request; the answer that comes late is consumed. Reported once."""
    set_mode = rpc(id=3, method="session/set_mode", params={"sessionId": "S1"})
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        await prompted(replay)
        await replay.send(set_mode)
        assert await replay.read() == {"jsonrpc": "2.0", "id": 2, "result": END_TURN}
        assert (await replay.read())["id"] == 3
        await replay.send(CLIENT_ALLOWS)  # late
        assert (await replay.ask(rpc(id=4, method="session/set_mode", params={"sessionId": "S1"})))["id"] == 4
        assert await replay.finish() == 0
    assert replay.stderr_lines() == [
        UNANSWERED,
        f"{PREFIX}divergence: the client sent session/set_mode (session S1); the recording expected next: "
        "nothing more: every recorded request has been served",
        f"{PREFIX}2 requests had no counterpart in the recording",
        f"{PREFIX}1 request of the replay went unanswered by the client"]


async def test_a_request_pipelined_behind_the_prompt_ends_the_wait_too(tmp_path: Path) -> None:
    """Sent before the permission request even came: the recorded client answered first,
    so this client went on without answering; its set_mode is not kept waiting."""
    set_mode = rpc(id=3, method="session/set_mode", params={"sessionId": "S1"})
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        await replay.ask(INIT)
        await replay.ask(NEW)
        await replay.send(PROMPT + set_mode)
        assert await replay.line() == PERMISSION
        assert [(await replay.read())["id"] for _ in range(2)] == [2, 3]
        assert await replay.finish() == 0
    assert replay.stderr_lines()[0] == UNANSWERED


async def test_an_answer_with_the_id_of_another_type_ends_the_wait(tmp_path: Path) -> None:
    """"7" for 7: no answer to what the replay asked, and said so; the prompt is answered."""
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        await prompted(replay)
        await replay.send(CLIENT_ALLOWS.replace(b'"id":7', b'"id":"7"'))
        assert await replay.read() == {"jsonrpc": "2.0", "id": 2, "result": END_TURN}
        assert await replay.finish() == 0
    assert replay.stderr_lines() == [
        f'{PREFIX}divergence: the client answered id "7", which the replay did not send, before answering the '
        "replay's session/request_permission; going on without its answer",
        f"{PREFIX}1 request of the replay went unanswered by the client"]


async def test_a_bad_line_during_the_wait_is_answered_and_the_wait_goes_on(tmp_path: Path) -> None:
    """Not a request the recording answers: its error goes out at once, and the client's
    answer, sent after it, is still the one awaited."""
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        await prompted(replay)
        await replay.send(b"hello\n")
        assert await replay.line() == error(b"null", -32700, NOT_JSON)
        await replay.send(CLIENT_ALLOWS)
        assert await replay.read() == {"jsonrpc": "2.0", "id": 2, "result": END_TURN}
        assert await replay.finish() == 0
    assert replay.stderr_lines() == [f"{PREFIX}the client sent a line that is not JSON; answered with a JSON-RPC error"]


async def test_strict_ends_the_replay_when_the_client_does_not_answer(tmp_path: Path) -> None:
    async with serving(basic(tmp_path / "c.jsonl"), ReplayOptions(strict=True)) as replay:
        await prompted(replay)
        await replay.send(rpc(id=3, method="session/set_mode", params={"sessionId": "S1"}))
        assert await replay.proc.wait() == 1
    assert replay.stderr_lines() == [UNANSWERED]


async def test_a_flood_of_requests_while_an_answer_is_awaited_does_not_deadlock(tmp_path: Path) -> None:
    """1100 requests pipelined (more than the replay queues) instead of the answer: the
    prompt is answered and every request gets its error, in order; the answer, sent last,
    is read and consumed."""
    count = 1100
    flood = b"".join(rpc(id=100 + i, method="nope") for i in range(count))
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        await prompted(replay)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(replay.send, flood)
            got = [(await replay.read())["id"] for _ in range(count + 1)]
        assert got == [2, *range(100, 100 + count)]
        await replay.send(CLIENT_ALLOWS)
        assert (await replay.ask(rpc(id=1, method="nope")))["id"] == 1
        assert await replay.finish() == 0
    assert replay.stderr_lines() == [
        UNANSWERED,
        f"{PREFIX}divergence: the client sent nope; the recording expected next: nothing more: every recorded "
        "request has been served",
        f"{PREFIX}{count + 1} requests had no counterpart in the recording",
        f"{PREFIX}1 request of the replay went unanswered by the client"]


async def test_the_summary_is_the_last_line_even_past_the_report_limit(tmp_path: Path) -> None:
    """More divergences of different methods than the report shows: the lines past the
    limit are counted, and the summary (how many requests had no counterpart) still comes,
    last."""
    from acp_bridge.replay.report import MAX_LINES

    count = MAX_LINES + 5
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        assert (await replay.ask(INIT))["id"] == 0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(replay.send, b"".join(rpc(id=100 + i, method=f"m{i}") for i in range(count)))
            assert [(await replay.read())["id"] for _ in range(count)] == list(range(100, 100 + count))
        assert await replay.finish() == 0
    lines = replay.stderr_lines()
    assert lines[MAX_LINES - 1:] == [
        f"{PREFIX}divergence: the client sent m{MAX_LINES - 1}; the recording expected next: session/new id 1",
        f"{PREFIX}5 more report line(s) not shown",
        f"{PREFIX}{count} requests had no counterpart in the recording"]


def concurrent(path: Path) -> Path:
    """The client sent session/set_mode while its prompt was running; the prompt's answer
    was recorded after set_mode's."""
    set_mode = rpc(id=3, method="session/set_mode", params={"sessionId": "S1", "modeId": "m"})
    return write_capture(path, [
        msg(1, "to-agent", "request", INIT, "initialize", 0),
        msg(2, "to-client", "response", rpc(id=0, result=INIT_ANSWER), "initialize", 0),
        msg(3, "to-agent", "request", PROMPT, "session/prompt", 2, "S1"),
        msg(4, "to-agent", "request", set_mode, "session/set_mode", 3, "S1"),
        msg(5, "to-client", "response", rpc(id=3, result={}), "session/set_mode", 3, "S1"),
        msg(6, "to-client", "response", rpc(id=2, result=END_TURN), "session/prompt", 2, "S1"),
    ])


async def test_a_left_out_concurrent_request_does_not_keep_the_prompt_unanswered(tmp_path: Path) -> None:
    async with serving(concurrent(tmp_path / "c.jsonl")) as replay:
        await replay.ask(INIT)
        assert (await replay.ask(PROMPT))["result"] == END_TURN
        later = rpc(id="m", method="session/set_mode", params={"sessionId": "S1"})
        assert await replay.ask(later) == {"jsonrpc": "2.0", "id": "m", "result": {}}
        assert await replay.finish() == 0
    assert replay.stderr_lines() == [
        f"{PREFIX}the answer to session/prompt id 2 (session S1) was recorded after session/set_mode id 3 "
        "(session S1), which the client has not sent: answered without it"]


async def test_concurrent_requests_sent_together_are_answered_as_recorded(tmp_path: Path) -> None:
    set_mode = rpc(id=3, method="session/set_mode", params={"sessionId": "S1"})
    async with serving(concurrent(tmp_path / "c.jsonl")) as replay:
        await replay.ask(INIT)
        await replay.send(PROMPT + set_mode)
        assert [(await replay.read())["id"] for _ in range(2)] == [3, 2]
        assert await replay.finish() == 0
    assert replay.stderr_lines() == []


async def test_an_answer_nested_past_what_can_be_written_is_reported_as_a_note(tmp_path: Path) -> None:
    deep = b'{"jsonrpc":"2.0","id":7,"result":{"outcome":' + DEEP + b"}}\n"
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        await prompted(replay)
        await replay.send(deep)
        assert await replay.read() == {"jsonrpc": "2.0", "id": 2, "result": END_TURN}
        assert await replay.finish() == 0
    assert replay.stderr_lines() == [
        f"{PREFIX}the client's answer to session/request_permission differs from the recording: "
        '{"":{"note":"the messages differ, nested deeper than can be written"}}']


async def test_a_request_longer_than_the_replay_reads_gets_an_error(tmp_path: Path) -> None:
    """Over 64 MiB: the id is read from the line's head, the rest streams past."""
    big = b'{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"pad":"' + b"x" * (65 << 20) + b'"}}\n'
    async with serving(basic(tmp_path / "c.jsonl"), timeout=60) as replay:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(replay.send, big)
            assert await replay.line() == error(b'"big"', -32600, "acp-bridge replay: the request is longer than "
                                                "the replay reads (64 MiB); it is not answered from the recording")
        assert (await replay.ask(INIT))["result"] == INIT_ANSWER
        assert await replay.finish() == 0
    assert replay.stderr_lines() == [
        f"{PREFIX}the client sent a request longer than 64 MiB; answered with a JSON-RPC error"]


async def test_a_closed_stdout_ends_the_replay_quietly(tmp_path: Path) -> None:
    async with replaying([str(basic(tmp_path / "c.jsonl"))]) as replay:
        assert replay.proc.stdout is not None
        await replay.proc.stdout.aclose()
        await replay.send(INIT)
        assert await replay.proc.wait() == 0
    assert replay.err == b""


async def test_sigint_ends_the_replay_with_130_and_no_traceback(tmp_path: Path) -> None:
    async with replaying([str(basic(tmp_path / "c.jsonl"))]) as replay:
        await replay.ask(INIT)  # up and serving
        assert isinstance(replay.proc, trio.Process)
        replay.proc.send_signal(signal.SIGINT)
        assert await replay.proc.wait() == 130
    assert replay.err == b""


def divergent(count: int) -> bytes:
    """`count` requests, each with a method of its own (so each is reported), long ones."""
    return b"".join(rpc(id=i, method=f"{i}-" + "m" * 500) for i in range(count))


@pytest.mark.parametrize("stderr_state", ["never-read", "closed"])
async def test_a_stderr_nobody_reads_or_that_is_closed_does_not_stop_the_replay(tmp_path: Path,
                                                                                 stderr_state: str) -> None:
    """300 reports of 500-odd characters into a 4 KiB pipe nobody reads, or into a pipe
    whose reader is gone: every request is still answered, and the replay exits. Nobody
    reading is tried on a real process: a write that blocked would block this one for good."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 4096)  # F_SETPIPE_SZ: the smallest pipe
    if stderr_state == "closed":
        os.close(read_end)
    try:
        count = 300
        capture = basic(tmp_path / "c.jsonl")
        in_a_process = stderr_state == "never-read"
        replay_with_stderr = (replaying([str(capture)], stderr=write_end) if in_a_process
                              else serving(capture, stderr=write_end))
        async with replay_with_stderr as replay:
            if in_a_process:
                os.close(write_end)  # the process has its own
            async with trio.open_nursery() as nursery:
                nursery.start_soon(replay.send, divergent(count))
                got = [(await replay.read())["id"] for _ in range(count)]
            assert got == list(range(count))
            assert await replay.finish() == 0
    finally:
        os.close(write_end if stderr_state == "closed" else read_end)


def test_the_report_lines_are_bounded() -> None:
    """At most MAX_LINES lines of at most MAX_CHARS characters; the rest is counted."""
    from acp_bridge.replay.report import MAX_CHARS, MAX_LINES, Reporter

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 1 << 20)  # F_SETPIPE_SZ: room for every line
    os.set_blocking(read_end, False)
    try:
        reporter = Reporter(write_end)

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reporter.run)
                for i in range(MAX_LINES + 5):
                    reporter(f"{i} " + "x" * 2000)
                await reporter.close(5)
                nursery.cancel_scope.cancel()

        trio.run(main)
        lines = os.read(read_end, 1 << 20).decode().splitlines()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert len(lines) == MAX_LINES + 1
    assert lines[0] == PREFIX + "0 " + "x" * (MAX_CHARS - 2) + "…"
    assert lines[-1] == f"{PREFIX}5 more report line(s) not shown"


CANCEL = rpc(method="session/cancel", params={"sessionId": "S1"})


async def test_a_cancel_the_recording_does_not_have_is_said_and_one_it_has_is_not(tmp_path: Path) -> None:
    """The turn goes on as recorded (the replay cannot make the agent cancel), but a client
    testing its cancel must hear that the recording has none: once, and in the summary. A
    cancel the recording has (for that session) is what was recorded: nothing to say."""
    async with serving(basic(tmp_path / "c.jsonl")) as replay:
        await prompted(replay)
        await replay.send(CANCEL + CANCEL)
        await replay.send(CLIENT_ALLOWS)
        assert await replay.read() == {"jsonrpc": "2.0", "id": 2, "result": END_TURN}
        assert await replay.finish() == 0
    assert replay.stderr_lines() == [
        f"{PREFIX}divergence: the client sent session/cancel (session S1), which the recording does not have; "
        "the replay goes on as recorded",
        f"{PREFIX}2 notifications of the client had no counterpart in the recording"]
    records = [orjson.loads(line) for line in basic(tmp_path / "c.jsonl").read_bytes().splitlines()]
    records.insert(7, msg(6, "to-agent", "notification", CANCEL, "session/cancel", None, "S1"))
    async with serving(write_capture(tmp_path / "cancelled.jsonl", records[1:-1])) as replay:
        await prompted(replay)
        await replay.send(CANCEL + CLIENT_ALLOWS)
        assert await replay.read() == {"jsonrpc": "2.0", "id": 2, "result": END_TURN}
        assert await replay.finish() == 0
    assert replay.stderr_lines() == []


async def test_strict_ends_the_replay_at_a_cancel_the_recording_does_not_have(tmp_path: Path) -> None:
    async with serving(basic(tmp_path / "c.jsonl"), ReplayOptions(strict=True)) as replay:
        await replay.ask(INIT)
        await replay.send(CANCEL)
        assert await replay.proc.wait() == 1
    assert replay.stderr_lines() == [
        f"{PREFIX}divergence: the client sent session/cancel (session S1), which the recording does not have; "
        "the replay goes on as recorded"]
