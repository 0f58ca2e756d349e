"""The capture writer process against a hostile world (acp_bridge/capture/worker.py): a
working folder holding modules of its own, a writer that stops reading, what a child of the
bridge could inherit."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from acp_bridge.capture import worker as worker_module
from acp_bridge.capture.records import CaptureEncoder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.capture.worker import DATA, CaptureWorker, Progress, frame, run_head
from acp_bridge.core import Direction, Forward, Verdict
from acp_bridge.shell.capture_file import CaptureFile
from tests.capture.test_worker import CHUNK, start

C = Direction.TO_CLIENT


def test_the_working_folder_is_not_on_the_writers_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m` puts the working folder first on sys.path: a project the editor opens
    (the bridge's working folder) must not get its `orjson.py` run by the writer, which
    also holds the system prompt; nor lose the capture to it."""
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "ran"
    (project / "orjson.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('not orjson')\n")
    monkeypatch.chdir(project)
    path = tmp_path / "c.jsonl"
    worker = start(path, Redactor())
    run = Forward(C, CHUNK * 3, CHUNK * 3, Verdict.PASS, untouched_lines=True)
    worker.send(run_head(0, 2.0, 3.0, "to-client", len(run.raw)), run.raw)
    assert worker.finish() is None
    assert not marker.exists()
    assert path.read_bytes() == CaptureEncoder().encode_batch(2.0, 3.0, [run])


def test_the_shared_page_is_not_inherited_by_the_bridges_children() -> None:
    progress = Progress.create()
    try:
        assert not os.get_inheritable(progress.fd)
    finally:
        progress.close()


def test_a_writer_that_stops_reading_stops_the_capture_not_the_relay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture_log: list[str]) -> None:
    """A writer that reads nothing for `STALL_SECONDS` (here stopped by a signal) is given
    up, said once: the bridge waits that long at most, on a hand-over and at the end, and
    relays on."""
    monkeypatch.setattr(worker_module, "STALL_SECONDS", 0.3)
    path = tmp_path / "c.jsonl"
    capture = CaptureFile(str(path), os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), CaptureEncoder(), required=False)
    assert capture.offload()
    assert isinstance(capture.worker, CaptureWorker)
    pid = capture.worker.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        begun = time.monotonic()
        data = b"x" * (1 << 20) + b"\n"
        while not capture.closed:  # a pipe's worth, then the writer is found stuck
            capture.write(frame(DATA, len(data)) + data)
            assert time.monotonic() - begun < 5
        capture.record(1.0, 2.0, [Forward(C, CHUNK, CHUNK, Verdict.PASS, untouched_lines=True)])
        capture.finish(3.0, 4.0)
        assert time.monotonic() - begun < 5
    finally:
        os.kill(pid, signal.SIGCONT)
    assert [m for m in capture_log if "cannot write" in m] == [
        f"capture: cannot write {path}: the capture writer has read nothing for 0.3 s; capture stopped, relaying goes on"]


def test_an_installed_bridge_does_not_put_its_site_packages_before_the_standard_library(tmp_path: Path) -> None:
    """Installed, the bridge's package root is site-packages; the writer must resolve
    imports in the bridge's own order, where a module there named like one of the standard
    library (`pathlib` from PyPI, `enum34`) comes after the standard library's."""
    site = tmp_path / "site-packages"
    shutil.copytree(Path(worker_module.__file__).parents[1], site / "acp_bridge",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (site / "pathlib.py").write_text("raise ImportError('a pathlib from PyPI')\n")
    path = tmp_path / "c.jsonl"
    script = f"""
import os, sys
sys.path.insert(next(i for i, p in enumerate(sys.path) if p.endswith("site-packages")), {str(site)!r})
from acp_bridge.capture.worker import DATA, CaptureWorker, frame
assert CaptureWorker.__module__ == "acp_bridge.capture.worker"
assert sys.modules["acp_bridge"].__file__.startswith({str(site)!r})
fd = os.open({str(path)!r}, os.O_WRONLY | os.O_CREAT, 0o600)
worker = CaptureWorker.start(fd, (), None)
worker.send(frame(DATA, 4), b"abc\\n")
print(worker.finish())
"""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, env=env, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, b"None\n"), done.stderr.decode()
    assert path.read_bytes() == b"abc\n"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_the_writer_does_not_lose_what_is_in_its_pipe(tmp_path: Path, sig: int) -> None:
    """Stopping the bridge's process tree (as some editors do, one process after another)
    signals the writer too: it still writes all it was handed, and ends with its pipe."""
    path = tmp_path / "c.jsonl"
    worker = start(path, Redactor())
    data = b"record\n" * 1000
    worker.send(frame(DATA, len(data)), data)
    deadline = time.monotonic() + 10
    while path.stat().st_size < len(data):  # the writer is running its loop
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(worker.proc.pid, signal.SIGSTOP)
    try:
        worker.send(frame(DATA, len(data)), data)
        os.kill(worker.proc.pid, sig)
    finally:
        os.kill(worker.proc.pid, signal.SIGCONT)
    worker.send(frame(DATA, len(data)), data)
    assert worker.finish() is None
    assert path.read_bytes() == data * 3


def test_the_bridge_waits_for_a_stopped_writer_at_the_end_no_longer_than_the_stall_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture_log: list[str]) -> None:
    monkeypatch.setattr(worker_module, "STALL_SECONDS", 0.3)
    path = tmp_path / "c.jsonl"
    capture = CaptureFile(str(path), os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), CaptureEncoder(), required=False)
    assert capture.offload()
    assert isinstance(capture.worker, CaptureWorker)
    proc = capture.worker.proc
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        begun = time.monotonic()
        capture.finish(3.0, 4.0)
        assert time.monotonic() - begun < 5
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert proc.wait(10) == 0  # it wrote what it was given once resumed
    assert path.read_bytes() == b'{"type":"end","time":3.0,"mono":4.0,"records":0}\n'
    assert [m for m in capture_log if "cannot write" in m] == [
        f"capture: cannot write {path}: the capture writer has not finished in 0.3 s (left to finish on its own);"
        " capture stopped, relaying goes on"]


async def test_a_writer_process_capture_equals_an_inline_one_end_to_end(tmp_path: Path) -> None:
    """The same agent output through two real bridges, one with a writer process and one
    with a required capture (all inline): the records are the same but for the clocks.
    Bursts of chunks (runs for the writer, or for the bridge while the writer is busy) with
    requests, a secret, malformed lines and a line over the parse limit between them."""
    from tests.conftest import run_cli

    lines: list[bytes] = []
    for i in range(30_000):
        lines.append(CHUNK.replace(b'"hi"', b'"chunk %d"' % i))
        if i % 5_000 == 7:
            lines += [b'{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"}}\n' % i,
                      b'{"jsonrpc":"2.0","method":"n","params":{"text":"the SECRET prompt"}}\n', b"not json\n",
                      b'{"jsonrpc":"2.0","method":"n","params":{"pad":"' + b"p" * (1 << 20) + b'"}}\n']
    source = tmp_path / "agent-output.jsonl"
    source.write_bytes(b"".join(lines))
    got = {}
    for name, required in (("writer", "false"), ("inline", "true")):
        config = tmp_path / f"{name}.toml"
        config.write_text(f'[relay]\nparse_limit_mib = 1\n[system_prompt]\ntext = "SECRET prompt"\n'
                          f'[capture]\npath = "{tmp_path / name}.jsonl"\nrequired = {required}\n')
        # --no-health: which lines the watchdog sees depends on how reads fell, not on the capture
        result = await run_cli(["run", "-vv", "--no-health", "-c", str(config), "--", "cat", str(source)], b"")
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout == source.read_bytes()
        stderr = result.stderr.decode()
        assert ("capture: writer process" in stderr) == (name == "writer")
        if name == "writer":  # both made records: the writer (ready ~0.1 s into a ~1 s stream), the bridge meanwhile
            split = re.search(r"runs recorded by the writer process: (\d+), by the bridge while it was busy: (\d+)", stderr)
            assert split is not None and int(split[1]) >= 1 and int(split[2]) >= 1, split
        got[name] = [{k: v for k, v in orjson.loads(r).items() if k not in ("time", "mono")}
                     for r in (tmp_path / f"{name}.jsonl").read_bytes().splitlines()[1:]]
    assert got["writer"] == got["inline"]
    assert len(got["writer"]) == len(lines) + 1 and got["writer"][-1]["type"] == "end"
    assert b"SECRET" not in (tmp_path / "writer.jsonl").read_bytes()


def test_the_writer_does_not_inherit_the_bridges_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The system prompt set through the environment stays out of the writer's: it is told
    what to mask in its pipe."""
    monkeypatch.setenv("ACP_BRIDGE_SYSTEM_PROMPT", "the SECRET prompt")
    monkeypatch.setenv("SOMETHING_ELSE", "kept")
    worker = start(tmp_path / "c.jsonl", Redactor(secret="the SECRET prompt"))
    try:
        environ = Path(f"/proc/{worker.proc.pid}/environ").read_bytes().split(b"\0")
    finally:
        assert worker.finish() is None
    assert b"SOMETHING_ELSE=kept" in environ
    assert not any(entry.startswith(b"ACP_BRIDGE_") for entry in environ)
