"""The agent's stderr: passed through as it comes, its tail kept whole-lined, bounded and
masked for the errors the client gets."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from acp_bridge.shell.stderr import StderrTail, mask_secrets, pass_stderr


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
