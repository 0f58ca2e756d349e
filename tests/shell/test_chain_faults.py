"""`acp-bridge run` as a chain component when the conductor misbehaves: a torn last line,
a stdout it closed or stopped reading, a signal while the successor talks, a long line and
an answer of the bridge's own in one read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import pytest
import trio
import trio.testing

from acp_bridge.config import Config
from acp_bridge.core.proxy_link import ProxyLink
from acp_bridge.core.proxy_wire import OFFICIAL
from acp_bridge.shell.chain import ConductorLife, Inbox, Stdout, ToClient
from acp_bridge.shell.run import run_bridge
from tests.cli_helpers import InProcessBridge, bridge_in_process, sigterm_once_stuck
from tests.conftest import open_bridge

PROXY_INIT = b'{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'


async def test_a_torn_last_client_line_goes_on_wrapped_and_its_request_is_answered() -> None:
    async with bridge_in_process(["run"], timeout=20) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        await bridge.send(b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}')
    lines = bytes(bridge.received).splitlines(keepends=True)
    assert lines[1] == (b'{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/new",'
                        b'"params":{"cwd":"/w","mcpServers":[]}}}\n')
    assert [json.loads(line)["id"] for line in lines[2:]] == [0, "n"]
    assert all(line.endswith(b"\n") for line in lines)


async def test_a_stdout_the_conductor_stopped_reading_fails_both_sides_and_blocks_neither() -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the conductor is gone: a write is EPIPE
    stdout = Stdout(trio.lowlevel.FdStream(writer))
    try:
        with pytest.raises(trio.BrokenResourceError):
            await stdout.write("client", b'{"jsonrpc":"2.0","id":1,"result":{}}\n', ends_line=True)
        with trio.fail_after(5), pytest.raises(trio.BrokenResourceError):
            await stdout.write("successor", b'{"jsonrpc":"2.0","method":"proxy/successor","params":{}}\n',
                               ends_line=True)
    finally:
        await stdout.stream.aclose()


async def test_sigterm_while_the_successor_keeps_talking_exits_143() -> None:
    chunk = (b'{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":'
             b'{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}}\n'
             * 50)
    async with open_bridge(["run"]) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")

        async def talk() -> None:  # until the bridge is gone: more than its inbox holds after it stops
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                while True:
                    await bridge.send(chunk)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(talk)
            await bridge.read_until(b'"agent_message_chunk"')
            nursery.start_soon(bridge.read_all)
            bridge.proc.send_signal(signal.SIGTERM)
            with trio.fail_after(20):
                status = await bridge.proc.wait()
            nursery.cancel_scope.cancel()
    assert status == 128 + signal.SIGTERM  # it was 1: the successor's next message hit its closed inbox


@pytest.mark.parametrize(("stdin", "status"), [
    pytest.param(PROXY_INIT + b'{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"params":{}}}\n', 0,
                 id="a-malformed-envelope"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n', 2, id="a-refusal"),
])
async def test_a_peer_that_stopped_reading_gets_no_crash_for_an_answer_of_the_bridges(stdin: bytes, status: int) -> None:
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    os.close(stdout_r)  # every write is EPIPE: the bridge's own answer too
    os.write(stdin_w, stdin)
    os.close(stdin_w)
    try:
        with trio.fail_after(10):
            assert await run_bridge(Config(), stdin_fd=stdin_r, stdout_fd=stdout_w) == status
    finally:
        os.close(stdin_r)
        os.close(stdout_w)


async def test_an_answer_of_the_links_own_waits_for_the_long_line_before_it_in_the_same_read(tmp_path: Path) -> None:
    (tmp_path / "bridge.toml").write_text("[relay]\nparse_limit_mib = 1\n")
    text = b"x" * (3 << 20)
    long = (b'{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":'
            b'{"sessionId":"s","t":"' + text + b'"}}}\n')
    malformed = b'{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"params":{}}}\n'
    async with bridge_in_process(["run", "-c", str(tmp_path / "bridge.toml")], timeout=30) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge.send, long + malformed)
            await bridge.read_until(b'"id":3,"error"')
    lines = bytes(bridge.received).splitlines(keepends=True)
    assert lines[1] == (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","t":"' + text
                        + b'"}}\n')
    assert json.loads(lines[2])["id"] == 3


async def test_a_signal_stops_the_chain_as_the_conductors_eof_does_with_no_word_of_a_stray_process() -> None:
    proc = await trio.lowlevel.open_process([sys.executable, "-m", "acp_bridge", "run"], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        await proc.stdin.send_all(PROXY_INIT)
        received = b""
        while b"\n" not in received:
            received += await proc.stdout.receive_some(1 << 16)
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            stderr = b""
            while chunk := await proc.stderr.receive_some(1 << 16):
                stderr += chunk
            status = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
    assert status == 128 + signal.SIGTERM
    assert stderr.decode().splitlines() == [
        "acp-bridge: WARNING: acp-bridge received SIGTERM before the successor answered: answered 1 request(s) left "
        "in flight"]


def catches(pid: int, signum: int) -> bool:
    """Has process `pid` a handler for `signum` (/proc/PID/status, SigCgt)?"""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signum - 1) & 1)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status")
async def test_a_signal_before_the_first_message_is_exit_128_plus_n_not_death_by_it() -> None:
    signum, sent = signal.SIGHUP, PROXY_INIT[:40]  # inside the first line (SIGTERM and SIGINT alike)
    proc = await trio.lowlevel.open_process([sys.executable, "-m", "acp_bridge", "run"], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        await proc.stdin.send_all(sent)
        with trio.move_on_after(5):  # the bridge's handler (it never came before the fix: then the default's death)
            while not catches(proc.pid, signum):
                await trio.sleep(0.02)
        proc.send_signal(signum)
        with trio.fail_after(20):
            out = await proc.stdout.receive_some(1 << 16)
            stderr = await proc.stderr.receive_some(1 << 16)
            status = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
    assert (status, out, stderr) == (128 + signum, b"", b"")  # was -1 (SIGTERM: -15): killed, as if it had crashed


FLOOD_NOTE = (b'{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":'
              b'{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","t":"' + b"x" * 1000 + b'"}}}}\n')


@asynccontextmanager
async def flooded_with_a_prompt_in_flight(bridge: InProcessBridge) -> AsyncIterator[None]:
    """The chain set up and a prompt in flight, then the conductor writing updates for ever
    and reading nothing (until the block ends); SIGTERM once the bridge is stuck."""
    await bridge.send(PROXY_INIT)
    await bridge.read_until(b"\n")
    await bridge.send(b'{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n')
    await bridge.read_until(b'"session/prompt"')
    async with trio.open_nursery() as nursery:

        async def flood() -> None:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                while True:
                    await bridge.send(FLOOD_NOTE * 100)

        nursery.start_soon(flood)
        await sigterm_once_stuck(bridge)
        yield
        nursery.cancel_scope.cancel()


async def test_a_signal_with_the_stdout_unread_stops_the_bridge_once_its_writes_stand_still(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ConductorLife, "stop_timeout", 0.3)
    async with bridge_in_process(["run"], timeout=20) as bridge, flooded_with_a_prompt_in_flight(bridge):
        with trio.fail_after(10):  # it waited for ever
            await bridge.proc.ended.wait()
    assert bridge.proc.returncode == 128 + signal.SIGTERM
    assert bridge.stderr.decode().splitlines()[-1] == (
        "acp-bridge: WARNING: the conductor has not read the bridge's stdout for 0.3s after SIGTERM; not waiting for it")


async def test_a_signal_while_the_conductor_reads_slowly_cuts_no_line_short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ConductorLife, "linger", 0)  # the agent side was cut off after it
    async with bridge_in_process(["run"], timeout=20) as bridge, flooded_with_a_prompt_in_flight(bridge):
        await trio.testing.wait_all_tasks_blocked(0.05)  # the bridge has done what it does before we read
        # From now on the conductor reads again (the block reads to the end).
    lines = bytes(bridge.received).splitlines()
    assert all(isinstance(json.loads(line), dict) for line in lines)  # each line whole
    assert [json.loads(line).get("id") for line in lines[-2:]] == [0, "p"]
    assert bridge.proc.returncode == 128 + signal.SIGTERM
    assert b"agent exited" not in bridge.stderr


async def test_what_the_client_sent_before_the_conductors_eof_goes_on_whole_and_every_request_in_it_is_answered(
        tmp_path: Path) -> None:
    (tmp_path / "bridge.toml").write_text("[relay]\nparse_limit_mib = 1\n")
    text = b"x" * (3 << 20)  # over the parse limit: it streams, in pieces
    async with bridge_in_process(["run", "-c", str(tmp_path / "bridge.toml")], timeout=20) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        await bridge.send(b'{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"sessionId":"s","prompt":'
                          b'[{"type":"text","text":"' + text + b'"}]}}\n'
                          b'{"jsonrpc":"2.0","id":"after","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n'
                          b'{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update",'
                          b'"params":{"sessionId":"s"}}}')  # torn: it holds the stdout until it is ended
    out = [json.loads(line) for line in bytes(bridge.received).splitlines()]  # the long one was cut short
    assert {"jsonrpc": "2.0", "id": 2, "method": "proxy/successor", "params": {
        "method": "session/prompt", "params": {"sessionId": "s", "prompt": [{"type": "text", "text": text.decode()}]}}} in out
    assert {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s"}} in out
    assert [m["params"]["params"]["prompt"] == [] for m in out if m.get("id") == 3] == [True]
    assert [(m["id"], m["error"]["message"]) for m in out[-3:]] == [
        (id_, "the conductor closed the connection before the successor answered") for id_ in (0, "big", "after")]
    assert len(out) == 7


async def test_a_torn_last_line_toward_the_client_is_ended_once_so_the_client_sides_lines_can_follow() -> None:
    reader, writer = os.pipe()
    stdout = Stdout(trio.lowlevel.FdStream(writer))
    _, inbox = trio.open_memory_channel[bytes](1)
    client = ToClient(stdout, ProxyLink.started(OFFICIAL, PROXY_INIT, 1 << 20), Inbox(inbox))
    try:
        await client.send_all(b'{"jsonrpc":"2.0","method":"session/update","params":{}}')  # the successor's side ends
        await client.end_torn_line()
        with trio.fail_after(5):  # it waited for ever on the line the successor's side began
            await stdout.write("successor", b'{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{}}\n',
                               ends_line=True)
        await client.send_all(b'\n{"jsonrpc":"2.0","id":"a","error":{}}\n')  # the relay ends the torn line too
        assert os.read(reader, 1 << 16) == (
            b'{"jsonrpc":"2.0","method":"session/update","params":{}}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{}}\n'
            b'{"jsonrpc":"2.0","id":"a","error":{}}\n')
    finally:
        await stdout.stream.aclose()
        os.close(reader)


async def test_a_torn_last_client_line_that_cannot_be_wrapped_leaves_no_blank_line() -> None:
    async with bridge_in_process(["run"], timeout=20) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        await bridge.send(b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":')  # no JSON-RPC message
    assert bytes(bridge.received).splitlines(keepends=True)[1:] == [
        b'{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"the conductor closed the connection before the '
        b'successor answered"}}\n']  # a bare "\n" came first
