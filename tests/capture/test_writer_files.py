"""The capture file through the real CLI, as a hostile neighbour would try it: symbolic
links, existing files, two bridges on one path, and a SIGKILL right after a line arrived."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import trio
import trio.testing

from acp_bridge.capture.reader import record_bytes
from acp_bridge.config import CaptureConfig, Config
from acp_bridge.core import Relay
from acp_bridge.shell.bridge import bridge_streams
from acp_bridge.shell.capture_file import create_new, open_capture, start_capture
from tests.conftest import agent_cmd, line, open_bridge, run_cli

NOTE = line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {}}})


def records(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [orjson.loads(x) for x in data.splitlines()]


def required_config(tmp_path: Path, capture: Path) -> Path:
    toml = tmp_path / "required.toml"
    toml.write_text(f'[capture]\npath = "{capture}"\nrequired = true\n')
    return toml


# -- item: never through a symbolic link ----------------------------------------------------------

async def test_a_symlink_to_a_file_is_refused_and_the_file_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    victim.chmod(0o644)
    link = tmp_path / "c.jsonl"
    link.symlink_to(victim)
    result = await run_cli(["run", "--no-health", "--capture", str(link), "--", *agent_cmd("echo")], NOTE)
    assert result.returncode == 0 and result.stdout == NOTE  # the session goes on
    assert result.stderr.decode().splitlines() == [
        f"acp-bridge: ERROR: capture: refusing {link}: it is a symbolic link; relaying without a capture"]
    assert victim.read_bytes() == b"precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "victim"]


async def test_a_dangling_symlink_is_refused_and_its_target_not_created(tmp_path: Path) -> None:
    link = tmp_path / "c.jsonl"
    link.symlink_to(tmp_path / "planted")
    result = await run_cli(["run", "--no-health", "--capture", str(link), "--", *agent_cmd("echo")], NOTE)
    assert result.returncode == 0 and result.stdout == NOTE
    assert result.stderr.decode().splitlines() == [
        f"acp-bridge: ERROR: capture: refusing {link}: it is a symbolic link; relaying without a capture"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]
    assert not (tmp_path / "planted").exists()


async def test_a_symlink_with_required_capture_ends_the_session_with_status_1(tmp_path: Path) -> None:
    link = tmp_path / "c.jsonl"
    link.symlink_to(tmp_path / "planted")
    result = await run_cli(["run", "-c", str(required_config(tmp_path, link)), "--", *agent_cmd("echo")], NOTE)
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode().splitlines() == [
        f"acp-bridge: capture: refusing {link}: it is a symbolic link (capture.required is set)"]
    assert not (tmp_path / "planted").exists()


# -- item: never over an existing file --------------------------------------------------------------

async def test_an_existing_capture_is_never_truncated(tmp_path: Path) -> None:
    old = tmp_path / "c.jsonl"
    old.write_bytes(b"yesterday's capture\n")
    old.chmod(0o640)
    result = await run_cli(["run", "-v", "--no-health", "--capture", str(old), "--", *agent_cmd("echo")], NOTE)
    assert result.returncode == 0 and result.stdout == NOTE
    assert old.read_bytes() == b"yesterday's capture\n" and stat.S_IMODE(old.stat().st_mode) == 0o640
    fresh = tmp_path / "c-1.jsonl"
    assert f"acp-bridge: WARNING: capture: {old} exists; writing {fresh}" in result.stderr.decode().splitlines()
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert [r["type"] for r in records(fresh)] == ["header", "message", "message", "end"]


async def test_two_bridges_on_one_path_write_two_captures(tmp_path: Path) -> None:
    """As two bridges started in the same second with {time} in the path: both run at once,
    and each keeps its own file, header to trailer."""
    path = tmp_path / "c.jsonl"
    procs = [await trio.lowlevel.open_process(
        [sys.executable, "-m", "acp_bridge", "run", "--capture", str(path), "--", *agent_cmd("echo")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        with trio.fail_after(30):
            for n, proc in enumerate(procs):  # both are running before either ends
                assert proc.stdin is not None and proc.stdout is not None
                msg = line({"jsonrpc": "2.0", "method": "n", "params": {"bridge": n}})
                await proc.stdin.send_all(msg)
                got = b""
                while len(got) < len(msg):
                    got += await proc.stdout.receive_some()
                assert got == msg
            for proc in procs:
                assert proc.stdin is not None
                await proc.stdin.aclose()
                assert await proc.wait() == 0
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["c-1.jsonl", "c.jsonl"]
    by_pid = {records(tmp_path / name)[0]["pid"]: records(tmp_path / name) for name in files}
    assert sorted(by_pid) == sorted(proc.pid for proc in procs)
    for n, proc in enumerate(procs):
        mine = by_pid[proc.pid]
        assert [r["type"] for r in mine] == ["header", "message", "message", "end"]
        assert {orjson.loads(r["raw"])["params"]["bridge"] for r in mine[1:3]} == {n}


RACE = """
import sys
from acp_bridge.shell.capture_file import create_new
for _ in range(25):
    print(create_new(sys.argv[1])[0], flush=True)
"""


def test_processes_racing_for_one_name_never_share_a_file(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", RACE, str(path)], stdout=subprocess.PIPE)
             for _ in range(6)]
    names = [name for proc in procs for name in proc.communicate(timeout=60)[0].decode().split()]
    assert all(proc.returncode == 0 for proc in procs)
    assert len(names) == 150 and len(set(names)) == 150
    expected = {str(path)} | {str(tmp_path / f"c-{n}.jsonl") for n in range(1, 150)}
    assert set(names) == expected == {str(p) for p in tmp_path.iterdir()}


def test_fresh_names_go_before_the_extension(tmp_path: Path) -> None:
    for name, fresh in (("c.jsonl", "c-1.jsonl"), ("capture", "capture-1"), (".hidden", ".hidden-1"),
                        ("a.b.jsonl", "a.b-1.jsonl")):
        (tmp_path / name).write_bytes(b"")
        made, fd = create_new(str(tmp_path / name))
        os.close(fd)
        assert made == str(tmp_path / fresh)


def test_a_time_template_started_twice_in_one_second(tmp_path: Path) -> None:
    config = Config(capture=CaptureConfig(path=str(tmp_path / "c-{time}.jsonl")))
    first = start_capture(config, argv=["acp-bridge"], wall=1_700_000_000.2, mono=1.0, pid=1)
    second = start_capture(config, argv=["acp-bridge"], wall=1_700_000_000.7, mono=1.5, pid=2)
    assert first is not None and second is not None
    assert (first.path, second.path) == (str(tmp_path / "c-20231114T221320Z.jsonl"),
                                          str(tmp_path / "c-20231114T221320Z-1.jsonl"))
    first.finish(1.0, 1.0)
    second.finish(1.0, 1.0)
    assert [records(Path(c.path))[0]["pid"] for c in (first, second)] == [1, 2]


# -- item: on disk before it is sent ----------------------------------------------------------------

class Watched(trio.abc.HalfCloseableStream):
    """The client's end of the bridge: every time the bridge writes to it, the capture must
    already hold a record of each line written (as `out`, or `raw` when unchanged)."""

    def __init__(self, inner: trio.StapledStream[Any, Any], captured: Callable[[], bytes]) -> None:
        self.inner = inner
        self.records = captured
        self.checked = 0

    def captured(self) -> set[bytes]:
        lines = set()
        for record in [orjson.loads(x) for x in self.records().splitlines()][1:]:
            sent = record_bytes(record, "out") if "out" in record else record_bytes(record, "raw")
            if sent:
                lines.add(sent)
        return lines

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        lines = [x + b"\n" for x in bytes(data).split(b"\n")[:-1]]
        assert set(lines) <= self.captured(), "sent before it was captured"
        self.checked += len(lines)
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data: bytes | bytearray = await self.inner.receive_some(max_bytes)
        return data

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_every_line_is_captured_before_the_bridge_sends_it(tmp_path: Path) -> None:
    """Each record is on disk before its line is sent, single lines and runs alike."""
    path = tmp_path / "c.jsonl"
    client_end, client_inner = trio.testing.memory_stream_pair()
    agent, agent_end = trio.testing.memory_stream_pair()
    client = Watched(client_inner, path.read_bytes)
    sent = [line({"jsonrpc": "2.0", "method": "n", "params": {"i": i}}) for i in range(5)]

    async def agent_side() -> None:  # echo
        while chunk := await agent_end.receive_some():
            await agent_end.send_all(chunk)
        await agent_end.send_eof()

    async def client_side() -> None:
        got = b""
        for msg in sent:
            await client_end.send_all(msg)
            while not got.endswith(msg):
                got += await client_end.receive_some()
        await client_end.send_eof()
        assert await client_end.receive_some() == b""

    with trio.fail_after(10), open_capture(Config(capture=CaptureConfig(path=str(path)))) as capture:
        assert capture is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent_side)
            nursery.start_soon(client_side)
            await bridge_streams(client, agent, Relay(run_min=1), capture)  # each line a run
    assert client.checked == len(sent)
    kept = records(path)
    assert [r.get("seq") for r in kept[1:]] == [*range(1, 11), None] and kept[-1]["type"] == "end"


async def test_a_line_the_client_received_survives_a_sigkill_at_once(tmp_path: Path) -> None:
    """bridge-rules 4: a SIGKILLed bridge loses at most what it had not yet read. The kill
    comes to the bridge's whole process group as soon as the client has the last line, with
    no wait for the capture: every record, of single lines and of a bulk write that the
    relay passes as a run, is on disk before its line is sent."""
    path = tmp_path / "c.jsonl"
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "acp_bridge", "run", "--capture", str(path), "--", *agent_cmd("echo")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    sent = [line({"jsonrpc": "2.0", "method": "n", "params": {"i": i}}) for i in range(10)]
    bulk = [line({"jsonrpc": "2.0", "method": "n", "params": {"bulk": i}}) for i in range(2000)]
    try:
        with trio.fail_after(30):
            for msg in [*sent, b"".join(bulk)]:
                await proc.stdin.send_all(msg)
                got = b""
                while len(got) < len(msg):
                    got += await proc.stdout.receive_some(len(msg) - len(got))
                assert got == msg
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    kept = records(path)  # every line is complete JSON
    assert kept[0]["type"] == "header" and len(kept) == 1 + 2 * (len(sent) + len(bulk))
    assert [r["seq"] for r in kept[1:]] == list(range(1, len(kept)))
    assert [(r["direction"], record_bytes(r, "raw")) for r in kept[1:2 * len(sent) + 1]] == [
        (direction, msg) for msg in sent for direction in ("to-agent", "to-client")]
    assert sorted(record_bytes(r, "raw") or b"" for r in kept[2 * len(sent) + 1:]) == sorted(bulk * 2)


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (Linux /proc: this kernel may not have
    /proc/PID/task/TID/children, so every process's stat is read)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return sorted(found)


async def test_a_capture_starts_no_second_process(tmp_path: Path) -> None:
    """The bridge makes every record itself (issue 24): with --capture, after a burst of
    lines (runs of untouched lines, which once started a capture writer process), its only
    child is the agent."""
    pidfile = tmp_path / "agent.pid"
    path = tmp_path / "c.jsonl"
    bulk = b"".join(line({"jsonrpc": "2.0", "method": "n", "params": {"bulk": i}}) for i in range(2000))
    args = ["run", "--no-health", "--capture", str(path), "--", *agent_cmd("echo")]
    async with open_bridge(args, env={"FAKE_AGENT_PIDFILE": str(pidfile)}) as bridge:
        with trio.fail_after(30):
            await bridge.send(NOTE + bulk)
            await bridge.read_until(bulk[-100:])
            assert children_of(bridge.proc.pid) == [int(pidfile.read_text())]
            await bridge.close_stdin()
            assert await bridge.read_all() == NOTE + bulk
            assert await bridge.proc.wait() == 0
    kept = records(path)
    assert [r["type"] for r in kept] == ["header", *["message"] * (2 * 2001), "end"]
