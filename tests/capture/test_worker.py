"""The capture writer process (acp_bridge/capture/worker.py): its records equal the bridge's
own byte for byte, its frames on the pipe, and what a full disk, a dying writer or one that
cannot start does to the capture and to the relay."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import sys
import time
from pathlib import Path

import orjson
import pytest
import trio
from hypothesis import event, given, settings
from hypothesis import strategies as st

from acp_bridge.shell import capture_file as writer_module
from acp_bridge.capture.records import CaptureEncoder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.capture.worker import (
    CONFIG,
    DATA,
    FRAME_HEAD,
    RUN,
    CaptureWorker,
    Writer,
    frame,
    read_frames,
    run_head,
)
from acp_bridge.core import Direction, Forward, Relay, Verdict
from acp_bridge.shell.capture_file import CaptureFile
from tests.capture.tap import Tap
from tests.conftest import line

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


def config_frame(redactor: Redactor) -> tuple[bytes, bytes]:
    payload = orjson.dumps({"redact": list(redactor.pointers), "secret": redactor.secret})
    return frame(CONFIG, len(payload)), payload


def handed_over(tmp_path: Path, redactor: Redactor, batches: list[list[Forward]],
                idle: list[bool] | None = None) -> tuple[bytes, Tap]:
    """The capture of `batches` as the bridge and a writer process make it; `idle`: what
    the writer answers each time the bridge asks whether it is idle (then always yes)."""
    path = tmp_path / f"c{len(list(tmp_path.iterdir()))}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    capture = CaptureFile(str(path), fd, CaptureEncoder(redactor), required=False)
    tap = Tap(fd, itertools.chain(idle or (), itertools.repeat(True)))
    tap.send(*config_frame(redactor))
    capture.worker = tap
    for i, forwards in enumerate(batches):
        capture.record(1_700_000_000.5 + i, 0.25 * i, forwards)
    capture.finish(1_700_000_100.0, 99.0)
    return path.read_bytes(), tap


def inline(redactor: Redactor, batches: list[list[Forward]]) -> bytes:
    encoder = CaptureEncoder(redactor)
    out = b"".join(encoder.encode_batch(1_700_000_000.5 + i, 0.25 * i, forwards) for i, forwards in enumerate(batches))
    return out + encoder.trailer(1_700_000_100.0, 99.0)


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


@settings(max_examples=150, deadline=None)
@given(traffic=st.lists(st.tuples(st.sampled_from([A, C]), st.lists(LINES, min_size=1, max_size=12),
                                  st.integers(1, 400)), min_size=1, max_size=6),
       redactor=st.sampled_from([Redactor(), Redactor(secret="secret text"), Redactor(("/params/t",))]),
       run_min=st.sampled_from([1, 64, 2048]), idle=st.lists(st.booleans(), max_size=12))
def test_the_writer_process_writes_what_the_bridge_would(
        tmp_path_factory: pytest.TempPathFactory, traffic: list[tuple[Direction, list[bytes], int]],
        redactor: Redactor, run_min: int, idle: list[bool]) -> None:
    """Runs handed over as they came, the rest encoded by the bridge, both through the
    writer's code, make the capture the bridge's own encoder makes, byte for byte: cut into
    reads anywhere, with lines over the parse limit, secrets and pointers to mask, and runs
    the bridge encodes itself (and records it writes down the pipe) while the writer is busy."""
    relay = Relay(run_min=run_min, max_line=256)
    batches: list[list[Forward]] = []
    for direction, lines, cut in traffic:
        data = b"".join(lines)
        for i in range(0, len(data), cut):
            batches.append(relay.feed(direction, data[i:i + cut]))
    batches += [relay.feed_eof(A), relay.feed_eof(C)]
    records, tap = handed_over(tmp_path_factory.mktemp("w"), redactor, batches, idle)
    assert records == inline(redactor, batches)
    event(f"runs handed over: {min(tap.kinds.count(RUN), 3)}")
    event(f"records the bridge sent down the pipe: {min(tap.kinds.count(DATA), 2)}")
    event(f"lines over the parse limit: {any(f.verdict is Verdict.OPAQUE for b in batches for f in b)}")


def test_runs_are_handed_over_as_they_came(tmp_path: Path) -> None:
    """The path the property relies on is taken: a run goes to an idle writer as one `R`
    frame (its bytes as they came), and the bridge writes its own records itself."""
    relay = Relay(run_min=1)
    prompt = line({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}})
    batches = [relay.feed(C, CHUNK * 3), relay.feed(A, prompt), relay.feed(C, CHUNK * 2)]
    assert [[f.untouched_lines for f in batch] for batch in batches] == [[True], [False], [True]]
    records, tap = handed_over(tmp_path, Redactor(), batches)
    assert tap.kinds == [CONFIG, RUN, RUN]
    assert [orjson.loads(r).get("seq") for r in records.splitlines()] == [1, 2, 3, 4, 5, 6, None]


def test_while_the_writer_is_busy_the_bridge_encodes_and_queues_its_records(tmp_path: Path) -> None:
    """A busy writer is not queued a run: the bridge encodes it and sends the records down
    the pipe, behind what the writer still has; its own records too."""
    relay = Relay(run_min=1)
    prompt = line({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}})
    batches = [relay.feed(C, CHUNK * 3), relay.feed(A, prompt), relay.feed(C, CHUNK * 2), relay.feed(C, CHUNK)]
    # asked: run 1 (busy), its records (busy), the prompt (idle), run 2 (idle), run 3 (busy)...
    records, tap = handed_over(tmp_path, Redactor(), batches, idle=[False, False, True, True, False, False])
    assert tap.kinds == [CONFIG, DATA, RUN, DATA]
    assert records == inline(Redactor(), batches)
    assert [orjson.loads(r).get("seq") for r in records.splitlines()] == [1, 2, 3, 4, 5, 6, 7, None]


def test_read_frames_across_reads_and_a_torn_end() -> None:
    """Frames cut anywhere by the pipe come out whole; a frame the end cuts short (a bridge
    killed mid-write never sent what it held) is dropped."""
    big = b"x" * (3 * 1024 * 1024 + 5)
    head = run_head(41, 1.5, -0.0, "to-client", len(big))
    wire = frame(DATA, 3) + b"abc" + head + big + frame(DATA, 10) + b"torn"
    read, write = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child writes and leaves
            os.close(read)
            for i in range(0, len(wire), 7777):
                os.write(write, wire[i:i + 7777])
            os._exit(0)
        os.close(write)
        got = list(read_frames(read, read_size=65536))
        os.waitpid(pid, 0)
    finally:
        os.close(read)
    assert [(kind, len(payload)) for kind, payload in got] == [(DATA, 3), (RUN, len(head) - FRAME_HEAD.size + len(big))]
    assert got[1][1].endswith(big)


def test_a_frame_out_of_place_is_an_error() -> None:
    writer = Writer()
    with pytest.raises(ValueError, match="frame b'R' out of place"):
        writer.records(RUN, b"")  # before the configuration
    writer.records(CONFIG, b'{"redact":[],"secret":null}')
    with pytest.raises(ValueError, match="frame b'C' out of place"):
        writer.records(CONFIG, b'{"redact":[],"secret":null}')


# -- the real process ----------------------------------------------------------------------------

def start(path: Path, redactor: Redactor) -> CaptureWorker:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        return CaptureWorker.start(fd, redactor.pointers, redactor.secret)
    finally:
        os.close(fd)


def test_a_writer_process_writes_the_records_in_a_session_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    redactor = Redactor(secret="hi")
    worker = start(path, redactor)
    assert os.getsid(worker.proc.pid) == worker.proc.pid  # the bridge's group signals miss it
    run = Forward(C, CHUNK * 5000, CHUNK * 5000, Verdict.PASS, untouched_lines=True)
    worker.send(run_head(0, 2.0, 3.0, "to-client", len(run.raw)), run.raw)
    assert worker.finish() is None
    assert worker.proc.returncode == 0
    assert path.read_bytes() == CaptureEncoder(redactor).encode_batch(2.0, 3.0, [run])
    assert b"hi" not in path.read_bytes()


def test_a_full_disk_is_the_reason_the_writer_gives(tmp_path: Path) -> None:
    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        worker = CaptureWorker.start(fd, (), None)
    finally:
        os.close(fd)
    worker.send(frame(DATA, 4), b"abc\n")
    assert worker.finish() == "No space left on device"
    assert worker.proc.returncode == 1


def capture_on(fd: int, path: Path) -> CaptureFile:
    capture = CaptureFile(str(path), fd, CaptureEncoder(), required=False)
    assert capture.offload()
    assert capture.fd == fd and isinstance(capture.worker, CaptureWorker)
    return capture


async def test_a_writer_that_fails_is_said_once_and_the_capture_stops(capture_log: list[str]) -> None:
    capture = capture_on(os.open("/dev/full", os.O_WRONLY), Path("/dev/full"))
    run = Forward(C, CHUNK, CHUNK, Verdict.PASS, untouched_lines=True)
    with trio.fail_after(10):
        while not capture.closed:  # once the writer has gone, the next hand-over finds out
            capture.record(1.0, 2.0, [run])
            await trio.sleep(0.01)
    capture.record(1.0, 2.0, [run])  # nothing more to say
    capture.finish(3.0, 4.0)
    failures = [m for m in capture_log if "cannot write" in m]
    assert failures == ["capture: cannot write /dev/full: No space left on device; capture stopped, relaying goes on"]


async def test_a_writer_that_fails_after_the_last_batch_is_said_at_the_end(capture_log: list[str]) -> None:
    capture = capture_on(os.open("/dev/full", os.O_WRONLY), Path("/dev/full"))
    capture.finish(3.0, 4.0)
    assert [m for m in capture_log if "cannot write" in m] == [
        "capture: cannot write /dev/full: No space left on device; capture stopped, relaying goes on"]


def wait_idle(worker: CaptureWorker) -> None:
    deadline = time.monotonic() + 10
    while not worker.idle():
        assert time.monotonic() < deadline
        time.sleep(0.01)


async def test_a_writer_killed_while_idle_is_taken_over_by_the_bridge(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A writer that had written all it was given, then died (killed): nothing is lost,
    so the bridge records what follows itself, and says so once."""
    caplog.set_level(logging.WARNING, "acp_bridge.capture")
    path = tmp_path / "c.jsonl"
    capture = capture_on(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), path)
    assert isinstance(capture.worker, CaptureWorker)
    first = Forward(C, CHUNK * 2, CHUNK * 2, Verdict.PASS, untouched_lines=True)
    capture.record(1.0, 2.0, [first])
    wait_idle(capture.worker)
    capture.worker.proc.send_signal(signal.SIGKILL)
    capture.worker.proc.wait()
    second = Forward(C, CHUNK, CHUNK, Verdict.PASS, untouched_lines=True)
    capture.record(1.0, 2.0, [second])
    capture.record(1.0, 2.0, [second])
    assert capture.worker is None and not capture.closed
    capture.finish(3.0, 4.0)
    encoder = CaptureEncoder()
    expected = b"".join(encoder.encode_batch(1.0, 2.0, [run]) for run in (first, second, second))
    assert path.read_bytes() == expected + encoder.trailer(3.0, 4.0)
    assert caplog.messages == ["capture: the writer process ended (the capture writer exited with status -9); "
                               "the bridge records the rest itself"]


async def test_a_writer_killed_with_frames_unwritten_stops_the_capture_not_the_relay(
        tmp_path: Path, capture_log: list[str]) -> None:
    path = tmp_path / "c.jsonl"
    capture = capture_on(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), path)
    assert isinstance(capture.worker, CaptureWorker)
    wait_idle(capture.worker)
    capture.worker.proc.send_signal(signal.SIGSTOP)
    capture.record(1.0, 2.0, [Forward(C, CHUNK, CHUNK, Verdict.PASS, untouched_lines=True)])  # never written
    capture.worker.proc.send_signal(signal.SIGKILL)
    capture.worker.proc.wait()
    capture.record(1.0, 2.0, [Forward(C, CHUNK, CHUNK, Verdict.PASS, untouched_lines=True)])
    assert capture.closed
    assert [m for m in capture_log if "cannot write" in m] == [
        f"capture: cannot write {path}: the capture writer exited with status -9; capture stopped, relaying goes on"]


@pytest.mark.parametrize("executable", ["no-python", "", None])
async def test_a_writer_that_cannot_start_leaves_the_bridge_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        executable: str | None) -> None:
    caplog.set_level(logging.INFO, "acp_bridge.capture")
    path = tmp_path / "c.jsonl"
    monkeypatch.setattr(sys, "executable", str(tmp_path / executable) if executable else executable)
    capture = CaptureFile(str(path), os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), CaptureEncoder(), required=False)
    assert not capture.offload()
    assert capture.worker is None and capture.fd is not None
    run = Forward(C, CHUNK, CHUNK, Verdict.PASS, untouched_lines=True)
    capture.record(1.0, 2.0, [run])
    capture.finish(3.0, 4.0)
    assert path.read_bytes() == (CaptureEncoder().encode_batch(1.0, 2.0, [run])
                                 + b'{"type":"end","time":3.0,"mono":4.0,"records":1}\n')
    assert any("no writer process" in m for m in caplog.messages)


def test_a_capture_starts_its_writer_at_its_first_run_unless_it_is_required(tmp_path: Path) -> None:
    """A required capture is written by the bridge, so that a write that fails stops the
    bridge before it sends what it could not record; any other starts its writer process
    when the first run comes (single lines never start one)."""
    from acp_bridge.config import CaptureConfig, Config

    assert writer_module.OFFLOAD
    required = writer_module.start_capture(Config(capture=CaptureConfig(path=str(tmp_path / "r.jsonl"), required=True)))
    free = writer_module.start_capture(Config(capture=CaptureConfig(path=str(tmp_path / "f.jsonl"))))
    assert required is not None and free is not None
    relay = Relay(run_min=len(CHUNK) + 1)
    single, run = relay.feed(C, CHUNK), relay.feed(C, CHUNK * 2)
    assert [f.untouched_lines for f in single + run] == [False, True]
    try:
        for capture in (required, free):
            capture.record(1.0, 1.0, single)
            assert capture.worker is None
            capture.record(1.0, 1.0, run)
        assert required.worker is None and isinstance(free.worker, CaptureWorker)
    finally:
        required.finish(1.0, 1.0)
        free.finish(1.0, 1.0)
    assert [orjson.loads(r).get("seq") for r in (tmp_path / "f.jsonl").read_bytes().splitlines()] == [
        None, 1, 2, 3, None]


def test_the_writer_is_idle_once_it_has_written_every_frame(tmp_path: Path) -> None:
    """The writer counts each frame once written, in the page the bridge reads: stopped,
    it is busy with what it was handed; let go, it writes it and is idle again."""
    path = tmp_path / "c.jsonl"
    worker = start(path, Redactor())
    run = Forward(C, CHUNK * 2, CHUNK * 2, Verdict.PASS, untouched_lines=True)
    os.kill(worker.proc.pid, signal.SIGSTOP)
    try:
        worker.send(run_head(0, 1.0, 1.0, "to-client", len(run.raw)), run.raw)
        assert not worker.idle() and worker.handed == 2  # the configuration, the run
    finally:
        os.kill(worker.proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while not worker.idle():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert path.read_bytes() == CaptureEncoder().encode_batch(1.0, 1.0, [run])
    assert worker.finish() is None


def test_an_empty_frame_is_handed_over_and_written_as_nothing(tmp_path: Path) -> None:
    """A frame with no payload (the records of a read that only continued a long line)
    goes over whole: an empty part made writev return 0 for ever, and the bridge spin."""
    path = tmp_path / "c.jsonl"
    worker = start(path, Redactor())
    worker.send(frame(DATA, 0), b"")
    worker.send(frame(DATA, 3), b"ok\n")
    assert worker.handed == 3
    assert worker.finish() is None
    assert path.read_bytes() == b"ok\n"


def test_a_bug_starting_the_writer_leaves_the_bridge_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: object) -> CaptureWorker:
        raise RuntimeError("a bug")

    monkeypatch.setattr(CaptureWorker, "start", broken)
    path = tmp_path / "c.jsonl"
    capture = CaptureFile(str(path), os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), CaptureEncoder(), required=False)
    capture.offload_at_first_run = True
    run = Forward(C, CHUNK, CHUNK, Verdict.PASS, untouched_lines=True)
    capture.record(1.0, 2.0, [run])
    capture.finish(3.0, 4.0)
    assert capture.worker is None
    assert path.read_bytes() == (CaptureEncoder().encode_batch(1.0, 2.0, [run])
                                 + b'{"type":"end","time":3.0,"mono":4.0,"records":1}\n')
    assert any("no writer process" in m for m in caplog.messages)
