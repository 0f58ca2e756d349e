"""The capture file (shell/capture_file.py) with real trio channels and files, and the capture
end to end; then through the real CLI, as a hostile neighbour would try it: symbolic links,
existing files, two bridges on one path, and a SIGKILL right after a line arrived. (A
dangling link, an existing file and an uncreatable path: `run` in this process, with a real
agent, tests/cli_helpers.py; the refusal and the one line said are the capture
file's, and the real process shows them for a link to a file.)"""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from hypothesis import event, given, settings
from hypothesis import strategies as st

from acp_bridge.capture.reader import record_bytes
from acp_bridge.capture.records import CaptureEncoder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.config import CaptureConfig, Config, SystemPromptConfig
from acp_bridge.core import Direction, Forward, Relay, Verdict
from acp_bridge.errors import CaptureError
from acp_bridge.shell.bridge import bridge_streams
from acp_bridge.shell.capture_file import CaptureFile, create_new, open_capture_for_writing, start_capture
from tests.cli_helpers import run_cli_in_process
from tests.conftest import agent_cmd, line, open_bridge, run_cli

REQ = line({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {
    "cwd": "/", "mcpServers": [{"name": "m", "command": "c", "args": [], "env": [{"name": "K", "value": "s3cret"}]}]}})
NOTE = line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {}}})


def config(path: Path, **capture: Any) -> Config:
    return Config(capture=CaptureConfig(path=str(path), **capture))


def lines_of(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [orjson.loads(x) for x in data.splitlines()]


async def relay_through(cfg: Config, to_agent: list[bytes]) -> bytes:
    """Run bridge_streams over memory streams with the capture; return what reached the agent."""
    client, client_end = trio.testing.memory_stream_pair()
    agent, agent_end = trio.testing.memory_stream_pair()
    received = b""

    async def agent_side() -> None:
        nonlocal received
        while chunk := await agent_end.receive_some():
            received += chunk
        await agent_end.send_eof()

    async def client_side() -> None:
        for data in to_agent:
            await client_end.send_all(data)
            await trio.testing.wait_all_tasks_blocked()
        await client_end.send_eof()
        while await client_end.receive_some():
            pass

    with trio.fail_after(10):
        with open_capture_for_writing(cfg, argv=["acp-bridge", "run", "--system-prompt", "hush"]) as capture:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent_side)
                nursery.start_soon(client_side)
                await bridge_streams(client, agent, Relay(), capture)
    return received


async def test_capture_file_is_private_complete_jsonl(tmp_path: Path) -> None:
    """Mode 0600, parents created, a header, one record per line, a trailer; secrets masked
    in the capture while the agent still gets them."""
    path = tmp_path / "deep" / "dir" / "c.jsonl"
    sent = await relay_through(config(path), [REQ, NOTE])
    assert sent == REQ + NOTE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    header, first, second, answer, end = lines_of(path)  # the bridge answers the request left
    assert (answer["verdict"], answer["id"], answer["method"]) == ("emit", 1, "session/new")
    assert header["type"] == "header" and header["argv"] == ["acp-bridge", "run", "--system-prompt", "<redacted>"]
    assert first["seq"] == 1 and first["method"] == "session/new" and "s3cret" not in first["raw"]
    assert first["redacted"] == ["/params/mcpServers/0/env/0/value"]
    assert record_bytes(second, "raw") == NOTE
    assert end == {**end, "type": "end", "records": 3}


async def test_an_existing_file_is_left_alone_and_a_fresh_name_used(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("old\n" * 100)
    path.chmod(0o644)
    (tmp_path / "c-1.jsonl").symlink_to(tmp_path / "elsewhere")  # a fresh name that is taken
    await relay_through(config(path), [NOTE])
    assert path.read_text() == "old\n" * 100 and stat.S_IMODE(path.stat().st_mode) == 0o644
    assert not (tmp_path / "elsewhere").exists()
    fresh = tmp_path / "c-2.jsonl"
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert [r["type"] for r in lines_of(fresh)] == ["header", "message", "end"]


async def test_path_template_is_filled_in(tmp_path: Path) -> None:
    await relay_through(config(tmp_path / "c-{pid}.jsonl"), [NOTE])
    assert (tmp_path / f"c-{os.getpid()}.jsonl").exists()


async def test_system_prompt_is_masked_unless_included(tmp_path: Path) -> None:
    note = line({"jsonrpc": "2.0", "method": "x", "params": {"text": "SECRET PROMPT here"}})
    base = Config(system_prompt=SystemPromptConfig(text="SECRET PROMPT"))
    hidden, shown = tmp_path / "h.jsonl", tmp_path / "s.jsonl"
    await relay_through(Config(system_prompt=base.system_prompt, capture=CaptureConfig(path=str(hidden))), [note])
    await relay_through(Config(system_prompt=base.system_prompt,
                               capture=CaptureConfig(path=str(shown), include_system_prompt=True)), [note])
    assert b"SECRET PROMPT" not in hidden.read_bytes()
    assert record_bytes(lines_of(shown)[1], "raw") == note


async def test_unwritable_path_is_said_once_and_relay_continues(tmp_path: Path, capture_log: list[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    sent = await relay_through(config(blocker / "c.jsonl"), [REQ, NOTE])
    assert sent == REQ + NOTE
    assert len(capture_log) == 1 and "cannot create" in capture_log[0] and str(blocker) in capture_log[0]


async def test_a_folder_at_the_path_is_refused_not_written_beside(tmp_path: Path, capture_log: list[str]) -> None:
    """`--capture ~/captures` names a folder: the capture went to `~/captures-1`, a file
    beside it, where nobody looks; a folder is refused, as `~/captures/` was."""
    folder = tmp_path / "captures"
    folder.mkdir()
    sent = await relay_through(config(folder), [NOTE])
    assert sent == NOTE
    assert capture_log == [f"capture: cannot create {folder}: Is a directory; relaying without a capture"]
    assert sorted(os.listdir(tmp_path)) == ["captures"] and os.listdir(folder) == []


async def test_a_fifo_at_the_path_is_refused_not_written_beside(tmp_path: Path, capture_log: list[str]) -> None:
    """Something at the path that is no file, made after the configuration was checked
    (run checks it before the agent starts: tests/config): the capture went to `c-1`
    beside a FIFO (and `/dev/null` made `/dev/null-1`); it is refused, as a folder is."""
    fifo = tmp_path / "c"
    os.mkfifo(fifo)
    sent = await relay_through(config(fifo), [NOTE])
    assert sent == NOTE
    assert capture_log == [f"capture: cannot create {fifo}: it is a FIFO, not a regular file; relaying without a capture"]
    assert os.listdir(tmp_path) == ["c"]


@pytest.fixture
def disk_full_after_header(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Writes to the capture file fail with ENOSPC once its header is written."""
    path = tmp_path / "c.jsonl"
    real_write = os.write
    seen = {"writes": 0}

    def write(fd: int, data: Any) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target == str(path):
            seen["writes"] += 1
            if seen["writes"] > 1:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    return path


async def test_disk_full_stops_capture_once_and_relay_continues(
        disk_full_after_header: Path, capture_log: list[str]) -> None:
    chunks = [REQ, NOTE, NOTE, NOTE]
    sent = await relay_through(config(disk_full_after_header), chunks)
    assert sent == b"".join(chunks)
    assert len(capture_log) == 1 and "No space left on device" in capture_log[0]
    assert "capture stopped" in capture_log[0]
    assert [r["type"] for r in lines_of(disk_full_after_header)] == ["header"]  # valid up to the failure


async def test_disk_full_with_required_capture_stops_the_bridge(disk_full_after_header: Path) -> None:
    with pytest.RaisesGroup(pytest.RaisesExc(CaptureError, match="No space left"), flatten_subgroups=True):
        await relay_through(config(disk_full_after_header, required=True), [REQ, NOTE])


async def test_required_capture_that_cannot_be_created_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CaptureError, match="cannot create"):
        await relay_through(config(blocker / "c.jsonl", required=True), [NOTE])


async def test_no_capture_configured_yields_none() -> None:
    with open_capture_for_writing(Config()) as capture:
        assert capture is None


async def test_each_batch_is_on_disk_when_record_returns_and_the_trailer_comes_however_it_ends(
        tmp_path: Path) -> None:
    """Nothing is queued: a record is written before `record` returns (so before the bridge
    sends the line), and leaving the block, even cancelled, writes the trailer."""
    path = tmp_path / "c.jsonl"
    relay = Relay()
    with trio.CancelScope() as scope, open_capture_for_writing(config(path)) as capture:
        assert capture is not None
        for i in range(5):
            capture.record(1.0, 2.0, relay.feed(Direction.TO_AGENT, NOTE))
            assert [r["type"] for r in lines_of(path)] == ["header"] + ["message"] * (i + 1)
        scope.cancel()
        await trio.sleep_forever()
    assert [r["type"] for r in lines_of(path)] == ["header"] + ["message"] * 5 + ["end"]


A, C = Direction.TO_AGENT, Direction.TO_CLIENT
CHUNK = line({"jsonrpc": "2.0", "method": "session/update", "params": {
    "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}}})
LINES = st.sampled_from([
    CHUNK,
    CHUNK.replace(b"hi", b'h\\"i \xc3\xa9'),
    line({"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}),
    line({"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}),
    line({"jsonrpc": "2.0", "method": "authenticate", "params": {"token": "t0ken"}}),
    line({"jsonrpc": "2.0", "method": "n", "params": {"text": "the secret text"}}),
    b"not json\n", b"\n", b'{"method":"m"}\r\n', b"[1,2]\n", b'{"a":"' + b"x" * 300 + b'"}\n',
]) | st.text(max_size=20).map(lambda text: line({"jsonrpc": "2.0", "method": "m", "params": {"t": text}}))


@settings(deadline=None)  # the profile's number of examples: 60, or 2,000 deep
@given(traffic=st.lists(st.tuples(st.sampled_from([A, C]), st.lists(LINES, min_size=1, max_size=12),
                                  st.integers(1, 400)), min_size=1, max_size=6),
       redactor=st.sampled_from([Redactor(), Redactor(secret="secret text"), Redactor(("/params/t",))]),
       run_min=st.sampled_from([1, 64, 2048]))
def test_the_file_holds_the_encoders_records_of_reads_cut_anywhere(
        tmp_path_factory: pytest.TempPathFactory, traffic: list[tuple[Direction, list[bytes], int]],
        redactor: Redactor, run_min: int) -> None:
    """The file holds what the encoder makes of each read, in order, byte for byte, and
    nothing else: reads cut anywhere, runs of untouched lines, lines over the parse limit
    (reads that leave no record until the line ends), secrets and pointers to mask."""
    relay = Relay(run_min=run_min, max_line=256)
    batches: list[list[Forward]] = []
    for direction, lines, cut in traffic:
        data = b"".join(lines)
        for i in range(0, len(data), cut):
            batches.append(relay.feed(direction, data[i:i + cut]))
    batches += [relay.feed_eof(A), relay.feed_eof(C)]
    path = tmp_path_factory.mktemp("w") / "c.jsonl"
    capture = CaptureFile(str(path), os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                          CaptureEncoder(redactor), required=False)
    for i, forwards in enumerate(batches):
        capture.record(1_700_000_000.5 + i, 0.25 * i, forwards)
    capture.finish(1_700_000_100.0, 99.0)
    encoder = CaptureEncoder(redactor)
    expected = b"".join(encoder.encode_batch(1_700_000_000.5 + i, 0.25 * i, forwards)
                        for i, forwards in enumerate(batches))
    assert path.read_bytes() == expected + encoder.trailer(1_700_000_100.0, 99.0)
    event(f"runs: {min(sum(f.untouched_lines for b in batches for f in b), 3)}")
    event(f"lines over the parse limit: {any(f.verdict is Verdict.OPAQUE for b in batches for f in b)}")


def test_a_rule_failed_finding_does_not_repeat_the_secret_its_record_masked(tmp_path: Path) -> None:
    """The watchdog's `rule-failed` record quotes the rule's error, as the message's record
    did before it kept only the type: both say `ValueError: <redacted>`, the total too."""
    from acp_bridge.core.findings import Finding, Level

    line = b'{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"token":"s3cret"}}\n'
    error = "ValueError: invalid literal for int() with base 10: 's3cret'"
    path = tmp_path / "c.jsonl"
    capture = CaptureFile(str(path), os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                          CaptureEncoder(), required=False)
    capture.record(1.0, 1.0, [Forward(A, line, line, Verdict.ERROR, None, ("mine",), None, error=error)])
    said = f"rule 'mine' failed: {error} (the message went on as it came)"
    capture.finding(1.0, Finding("rule-failed", Level.ERROR, None, said, 1.0, 1, "to-agent", "authenticate", 1))
    capture.finding(2.0, Finding("rule-failed", Level.ERROR, None, said, 2.0, count=2, total=True))
    capture.finish(3.0, 3.0)
    message, first, total = (r for r in lines_of(path) if r["type"] in ("message", "finding"))
    assert message["error"] == "ValueError: <redacted>"
    assert first["message"] == total["message"] == "rule 'mine' failed: ValueError: <redacted> (the message went on as it came)"
    assert b"s3cret" not in path.read_bytes()


def full_disk(required: bool) -> CaptureFile:
    return CaptureFile("/dev/full", os.open("/dev/full", os.O_WRONLY), CaptureEncoder(), required=required)


def test_a_full_disk_is_said_once_and_the_capture_stops(capture_log: list[str]) -> None:
    capture = full_disk(required=False)
    run = Forward(C, CHUNK * 2, CHUNK * 2, Verdict.PASS, untouched_lines=True)
    capture.record(1.0, 2.0, [run])
    assert capture.closed
    capture.record(1.0, 2.0, [run])  # nothing more to say
    capture.finish(3.0, 4.0)
    assert capture_log == ["capture: cannot write /dev/full: No space left on device; capture stopped, relaying goes on"]


def test_a_full_disk_under_a_required_capture_raises() -> None:
    capture = full_disk(required=True)
    with pytest.raises(CaptureError) as raised:
        capture.record(1.0, 2.0, [Forward(C, CHUNK, CHUNK, Verdict.PASS, untouched_lines=True)])
    assert str(raised.value) == "capture: cannot write /dev/full: No space left on device (capture.required is set)"
    assert capture.closed


# -- end to end, through the real CLI ------------------------------------------------------------

async def test_run_with_capture_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "caps" / "c-{pid}.jsonl"
    stdin = REQ + NOTE + b"not json\n" + b"\xff\xfe\n"
    result = await run_cli(["run", "--no-health", "--capture", str(path), "--", *agent_cmd("echo")], stdin)
    assert result.returncode == 0, result.stderr
    # The echo agent never answers the request: the bridge does, when the agent exits.
    assert result.stdout.startswith(stdin)
    answer = orjson.loads(result.stdout[len(stdin):])
    assert answer["id"] == 1 and "error" in answer
    [file] = list((tmp_path / "caps").iterdir())
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    records = lines_of(file)
    assert records[0]["type"] == "header" and records[-1]["type"] == "end"
    messages = records[1:-1]
    assert [r["seq"] for r in messages] == list(range(1, 10))
    for direction in ("to-agent", "to-client"):
        mine = [r for r in messages if r["direction"] == direction and r["verdict"] != "emit"]
        assert [r["kind"] for r in mine] == ["request", "notification", "other", "other"]
        assert b"".join(record_bytes(r, "raw") or b"" for r in mine[1:]) == NOTE + b"not json\n\xff\xfe\n"
        assert "s3cret" not in mine[0]["raw"] and mine[0]["redacted"]
    [emitted] = [r for r in messages if r["verdict"] == "emit"]
    assert emitted["kind"] == "response" and emitted["method"] == "session/new" and emitted["id"] == 1
    assert record_bytes(emitted, "out") == result.stdout[len(stdin):]


async def test_unwritable_capture_end_to_end_says_so_once(tmp_path: Path) -> None:
    """A capture that only its creation finds impossible (here a name longer than a folder
    holds; a path under a file is refused before the agent starts: tests/config)."""
    long = tmp_path / ("c" * 300 + ".jsonl")
    result = await run_cli_in_process(["run", "--no-health", "--capture", str(long), "--",
                                       *agent_cmd("echo")], NOTE + NOTE)
    assert result.returncode == 0 and result.stdout == NOTE + NOTE
    assert result.stderr.decode().splitlines() == [
        f"acp-bridge: ERROR: capture: cannot create {long}: File name too long; relaying without a capture"]


# -- through the real CLI, as a hostile neighbour would try it --------------------------------
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
    result = await run_cli_in_process(["run", "--no-health", "--capture", str(link), "--", *agent_cmd("echo")], NOTE)
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
    result = await run_cli_in_process(["run", "-v", "--no-health", "--capture", str(old), "--", *agent_cmd("echo")],
                                      NOTE)
    assert result.returncode == 0 and result.stdout == NOTE
    assert old.read_bytes() == b"yesterday's capture\n" and stat.S_IMODE(old.stat().st_mode) == 0o640
    fresh = tmp_path / "c-1.jsonl"
    assert f"acp-bridge: WARNING: capture: {old} exists; writing {fresh}" in result.stderr.decode().splitlines()
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert [r["type"] for r in lines_of(fresh)] == ["header", "message", "message", "end"]


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
    by_pid = {lines_of(tmp_path / name)[0]["pid"]: lines_of(tmp_path / name) for name in files}
    assert sorted(by_pid) == sorted(proc.pid for proc in procs)
    for n, proc in enumerate(procs):
        mine = by_pid[proc.pid]
        assert [r["type"] for r in mine] == ["header", "message", "message", "end"]
        assert {orjson.loads(r["raw"])["params"]["bridge"] for r in mine[1:3]} == {n}


def race_for(path: Path, processes: int, each: int) -> list[list[str]]:
    """`processes` forks of this process, let go at once, each creating `each` captures at
    `path`: the names each one got. (Forked rather than started: a fresh interpreter
    importing the package cost 0.4 s of CPU a process, and the race is the same.)"""
    gate_r, gate_w = os.pipe()
    outputs = []
    pids = []
    with warnings.catch_warnings():  # 3.12+ warns about fork with threads; the child calls no lock
        warnings.simplefilter("ignore", DeprecationWarning)
        for _ in range(processes):
            out_r, out_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: wait for the gate, race, report, and leave without cleanup
                status = 1
                try:
                    os.close(gate_w)
                    os.read(gate_r, 1)
                    names = [create_new(str(path))[0] for _ in range(each)]
                    os.write(out_w, "\n".join(names).encode())
                    status = 0
                finally:
                    os._exit(status)
            os.close(out_w)
            outputs.append(out_r)
            pids.append(pid)
    os.close(gate_r)
    os.close(gate_w)  # the gate opens: every child's read returns at once
    got = []
    for out_r, pid in zip(outputs, pids, strict=True):
        with os.fdopen(out_r, "rb") as out:
            got.append(out.read().decode().split())
        assert os.waitpid(pid, 0)[1] == 0
    return got


def test_processes_racing_for_one_name_never_share_a_file(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    names = [name for got in race_for(path, 6, 25) for name in got]
    assert len(names) == 150 and len(set(names)) == 150
    expected = {str(path)} | {str(tmp_path / f"c-{n}.jsonl") for n in range(1, 150)}
    assert set(names) == expected == {str(p) for p in tmp_path.iterdir()}


def test_every_missing_folder_is_made_private(tmp_path: Path) -> None:
    """Each folder made for the capture is 0700, not only the last: `os.makedirs` gave the
    ones above it the umask's mode (0755), so others could list what was made there."""
    umask = os.umask(0o022)
    try:
        made, fd = create_new(str(tmp_path / "a" / "b" / "c" / "x.jsonl"))
    finally:
        os.umask(umask)
    os.close(fd)
    assert made == str(tmp_path / "a" / "b" / "c" / "x.jsonl")
    assert [stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("a", "a/b", "a/b/c", "a/b/c/x.jsonl")] == \
        [0o700, 0o700, 0o700, 0o600]


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
    assert [lines_of(Path(c.path))[0]["pid"] for c in (first, second)] == [1, 2]


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

    with trio.fail_after(10), open_capture_for_writing(Config(capture=CaptureConfig(path=str(path)))) as capture:
        assert capture is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent_side)
            nursery.start_soon(client_side)
            await bridge_streams(client, agent, Relay(run_min=1), capture)  # each line a run
    assert client.checked == len(sent)
    kept = lines_of(path)
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
    kept = lines_of(path)  # every line is complete JSON
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
    kept = lines_of(path)
    assert [r["type"] for r in kept] == ["header", *["message"] * (2 * 2001), "end"]
