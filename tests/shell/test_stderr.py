"""The agent's stderr: passed through as it comes, its tail kept whole-lined, bounded and
masked for the errors the client gets."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from acp_bridge.shell.stderr import StderrTail, StrayLines, mask_secrets, pass_stderr


def test_stderr_tail_keeps_whole_last_lines_within_the_bound() -> None:
    tail = StderrTail(limit=16)
    for i in range(10):
        tail.add(f"line {i}\n".encode())
    assert tail.text() == "line 8\nline 9\n"
    assert len(tail.text().encode()) <= 16


@pytest.mark.parametrize(("text", "masked"), [
    ("ANTHROPIC_API_KEY=sk-ant-123 failed", "ANTHROPIC_API_KEY=<redacted> failed"),
    ("Authorization: Bearer abc.def\n", "Authorization: Bearer <redacted>\n"),
    ('{"token": "xyz", "n": 1}', '{"token": "<redacted>", "n": 1}'),
    ("password=hunter2;", "password=<redacted>;"),
    ("a tokenizer error, no secret", "a tokenizer error, no secret"),
    ("the prompt was: be brief", "the prompt was: <system prompt>"),
])
def test_stderr_tail_is_redacted_before_it_reaches_the_client(text: str, masked: str) -> None:


    assert mask_secrets(text, "be brief") == masked


@pytest.mark.parametrize("logged", [
    'TOP "SECRET" caf\u00e9',  # as written
    'TOP \\"SECRET\\" caf\\u00e9',  # as JSON writes it, ASCII only
    'TOP \\"SECRET\\" caf\u00e9',  # as JSON writes it, UTF-8
])
def test_the_system_prompt_is_masked_in_the_stderr_tail_however_the_agent_logged_it(logged: str) -> None:


    assert mask_secrets(f"got systemPrompt {logged}!", 'TOP "SECRET" caf\u00e9') == "got systemPrompt <system prompt>!"


async def test_stderr_is_passed_through_whole_and_its_tail_kept() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    read_end, write_end = os.pipe()
    tail, done = StderrTail(), trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pass_stderr, theirs, tail, write_end, done)
            for i in range(10):
                await ours.send_all(f"line {i}\n".encode())
            await ours.send_eof()
            await done.wait()
        os.close(write_end)
        write_end = -1
        passed = b""
        while chunk := os.read(read_end, 1 << 16):
            passed += chunk
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    assert passed == b"".join(f"line {i}\n".encode() for i in range(10))
    assert tail.text() == passed.decode()


def test_the_tail_is_whole_lines_however_the_chunks_came() -> None:
    tail = StderrTail(limit=16)
    tail.add(b"".join(f"line {i}\n".encode() for i in range(10)))  # one read of 70 bytes
    assert tail.text() == "line 8\nline 9\n"


def read_all(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, 1 << 16):
        out += chunk
    return out


async def test_diverted_lines_reach_our_stderr_in_order() -> None:
    read_end, write_end = os.pipe()
    try:
        lines = StrayLines(write_end)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lines.run)
            for i in range(3):
                lines.put(f"acp-bridge: agent stdout (not forwarded): banner {i}")
            await lines.aclose(10)
        os.close(write_end)
        write_end = -1
        assert read_all(read_end) == b"".join(
            b"acp-bridge: agent stdout (not forwarded): banner %d\n" % i for i in range(3))
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


async def test_a_stderr_nobody_reads_never_holds_up_the_relay() -> None:
    """`put` never waits: past the limit a line is dropped and counted, and the end waits
    for our stderr only so long."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    while True:  # fill the pipe: a write now blocks until someone reads
        try:
            os.write(write_end, b"x" * 4096)
        except BlockingIOError:
            break
    os.set_blocking(write_end, True)
    lines = StrayLines(write_end, limit=1000)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lines.run)
            await trio.testing.wait_all_tasks_blocked()  # `run` waits for lines
            lines.put("line 0")  # taken at once: its write blocks in the thread
            await trio.testing.wait_all_tasks_blocked()
            for i in range(1, 1000):  # never waits; 1,000 bytes of lines wait, then they are dropped
                lines.put(f"line {i}")
            assert lines.dropped == 999 - 123  # "line 1\n" .. "line 123\n" fit in 1,000 bytes
            start = trio.current_time()
            await lines.aclose(0.2)
            assert trio.current_time() - start < 2
        seen = b""
        while not seen.endswith(b"line 0\n"):  # read: the abandoned write completes, its thread ends
            seen += os.read(read_end, 1 << 16)
    finally:
        os.close(read_end)
        os.close(write_end)
