"""The agent's stderr: passed through as it comes, its tail kept whole-lined, bounded and
masked for the errors the client gets; and the one writer of our stderr, which never waits
for a reader (shell/logs.py `FdWriter`)."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from acp_bridge.shell.logs import FdWriter
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
    writer = FdWriter(write_end)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pass_stderr, theirs, tail, writer, done)
            for i in range(10):
                await ours.send_all(f"line {i}\n".encode())
            await ours.send_eof()
            await done.wait()
        assert writer.flush(10)
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


def test_what_is_written_reaches_the_descriptor_in_order() -> None:
    read_end, write_end = os.pipe()
    try:
        writer = FdWriter(write_end)
        for i in range(3):
            assert writer.write(f"acp-bridge: agent stdout (not forwarded): banner {i}\n".encode())
        assert writer.flush(10)
        os.close(write_end)
        write_end = -1
        assert read_all(read_end) == b"".join(
            b"acp-bridge: agent stdout (not forwarded): banner %d\n" % i for i in range(3))
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def full_pipe() -> tuple[int, int, bytes]:
    """A pipe whose buffer is full (a write now blocks until someone reads), and what fills it."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    filled = b""
    while True:
        try:
            filled += b"x" * os.write(write_end, b"x" * 4096)
        except BlockingIOError:
            break
    os.set_blocking(write_end, True)
    return read_end, write_end, filled


def test_a_descriptor_nobody_reads_never_holds_up_a_write() -> None:
    """`write` never waits: past the limit a write is dropped and its bytes counted; once
    the reader comes, what waited is written, then where the drops began, how many bytes."""
    read_end, write_end, filled = full_pipe()
    writer = FdWriter(write_end, limit=1000)
    try:
        assert writer.write(b"line 0\n")  # taken by the thread at once: its write blocks
        assert not writer.flush(0.2)  # nobody reads: it cannot be written
        kept = [writer.write(b"line %d\n" % i) for i in range(1, 1000)]  # none of them waits
        assert kept == [True] * 123 + [False] * 876  # "line 1\n" .. "line 123\n" fit in 1,000 bytes
        assert writer.dropped == 9 * 876
        seen = b""
        while not seen.endswith(b"nobody read it\n"):  # the reader comes at last
            seen += os.read(read_end, 1 << 16)
        assert seen == filled + b"".join(b"line %d\n" % i for i in range(124)) + (
            b"acp-bridge: 7,884 bytes of stderr dropped: nobody read it\n")
        assert writer.write(b"after\n")
        assert writer.flush(10)
        assert os.read(read_end, 1 << 16) == b"after\n"
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_note_of_bytes_dropped_never_lands_inside_a_line() -> None:
    read_end, write_end, filled = full_pipe()
    writer = FdWriter(write_end, limit=10)
    try:
        writer.write(b"torn")  # no room: queued; the thread's write waits, no line end
        assert not writer.flush(0.2)
        assert writer.write(b"x" * 11) is False  # dropped: more than the limit waits
        os.read(read_end, len(filled))  # the reader comes
        assert writer.flush(10)
        assert read_all_now(read_end) == b"torn\nacp-bridge: 11 bytes of stderr dropped: nobody read it\n"
        assert writer.write(b"y" * 11)  # room, nothing waiting: written at once, not queued
        assert read_all_now(read_end) == b"y" * 11
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_reader_that_is_gone_ends_the_writing() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    writer = FdWriter(write_end)
    try:
        assert writer.write(b"nobody\n") is False  # EPIPE: nothing is written any more
        assert writer.flush(10)
        assert writer.write(b"again\n") is False
    finally:
        os.close(write_end)


def read_all_now(fd: int) -> bytes:
    """What the pipe holds now."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return b""
    finally:
        os.set_blocking(fd, True)


def test_what_waits_for_stderr_is_written_as_the_process_ends() -> None:
    """A command that logs and ends at once (replay, drive) loses none of its last lines:
    the writer's thread is a daemon, so the exit waits for it (as `run` does, 1 s at most)."""
    import subprocess
    import sys

    code = ("from acp_bridge.shell.logs import stderr_writer\n"
            "for i in range(2000): stderr_writer().write(b'line %d\\n' % i)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, b"".join(b"line %d\n" % i for i in range(2000)))
