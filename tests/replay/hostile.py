"""Helpers for the tests of serving: small captures made on the spot, and a replay driven a line
at a time with its stderr kept: as a real process (`replaying`), or served in this process
(`serving`: what `acp-bridge replay` runs, on pipes, with no interpreter to start)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio
from trio.lowlevel import FdStream

from acp_bridge.capture.files import open_capture
from acp_bridge.commands.replay import STDERR_LINGER
from acp_bridge.replay.report import Reporter
from acp_bridge.replay.script import build_script
from acp_bridge.replay.server import ReplayOptions, ReplayServer
from acp_bridge.shell.run import open_stdio
from tests.cli_helpers import Served

REPLAY = [sys.executable, "-m", "acp_bridge", "replay"]
HEADER: dict[str, Any] = {"type": "header", "format": 1, "bridge": "0.1.0", "started": "x", "time": 1.0,
                          "mono": 0.0, "pid": 1, "argv": [], "config": "x", "redact": [],
                          "include_system_prompt": True}


def msg(seq: int, direction: str, kind: str, raw: bytes | str, method: str | None = None, id_: Any = None,
        session: Any = None) -> dict[str, Any]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    return {"type": "message", "seq": seq, "time": 1.0, "mono": float(seq), "direction": direction,
            "kind": kind, "verdict": "pass", "method": method, "session": session, "rules": [],
            "size": len(text), "id": id_, "raw": text}


def rpc(**fields: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **fields}) + b"\n"


def write_capture(path: Path, records: list[dict[str, Any]], *, header: dict[str, Any] | None = None,
                  end: bool = True) -> Path:
    lines = [header or HEADER, *records, *([{"type": "end", "time": 2.0, "mono": 100.0}] if end else [])]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    return path


INIT_ANSWER = {"protocolVersion": 1, "agentInfo": {"name": "replayed"}}
PERMISSION = rpc(id=7, method="session/request_permission", params={"sessionId": "S1", "options": []})
CLIENT_ALLOWS = rpc(id=7, result={"outcome": {"outcome": "selected", "optionId": "a"}})
END_TURN = {"stopReason": "end_turn"}


def basic(path: Path) -> Path:
    """initialize, session/new, and a prompt during which the agent asks a permission that
    the client grants."""
    return write_capture(path, [
        msg(1, "to-agent", "request", rpc(id=0, method="initialize", params={}), "initialize", 0),
        msg(2, "to-client", "response", rpc(id=0, result=INIT_ANSWER), "initialize", 0),
        msg(3, "to-agent", "request", rpc(id=1, method="session/new", params={}), "session/new", 1),
        msg(4, "to-client", "response", rpc(id=1, result={"sessionId": "S1"}), "session/new", 1, "S1"),
        msg(5, "to-agent", "request", rpc(id=2, method="session/prompt", params={"sessionId": "S1"}),
            "session/prompt", 2, "S1"),
        msg(6, "to-client", "request", PERMISSION, "session/request_permission", 7, "S1"),
        msg(7, "to-agent", "response", CLIENT_ALLOWS, "session/request_permission", 7, "S1"),
        msg(8, "to-client", "response", rpc(id=2, result=END_TURN), "session/prompt", 2, "S1"),
    ])


class Replay:
    """A replay: send lines, read its stdout a line at a time, its stderr kept."""

    def __init__(self, proc: trio.Process | Served) -> None:
        self.proc = proc
        self.buffer = b""
        self.err = bytearray()
        self.stderr_ended = trio.Event()  # all of stderr is in `err`

    async def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(data)

    async def line(self) -> bytes:
        assert self.proc.stdout is not None
        while b"\n" not in self.buffer:
            chunk = await self.proc.stdout.receive_some(1 << 20)
            assert chunk, f"EOF; stderr: {bytes(self.err)!r}"
            self.buffer += chunk
        one, _, self.buffer = self.buffer.partition(b"\n")
        return one + b"\n"

    async def read(self) -> Any:
        return orjson.loads(await self.line())

    async def until(self, wanted: Callable[[Any], bool]) -> list[Any]:
        """Messages read up to and including the first that is `wanted`."""
        got = [await self.read()]
        while not wanted(got[-1]):
            got.append(await self.read())
        return got

    async def ask(self, request: bytes) -> Any:
        """Send a request; its answer (what came before it is skipped)."""
        id_ = orjson.loads(request)["id"]
        await self.send(request)
        got = await self.until(lambda m: "method" not in m and m.get("id") == id_)
        return got[-1]

    async def finish(self) -> int:
        """Close stdin; the exit status, once stderr has ended."""
        assert self.proc.stdin is not None
        await self.proc.stdin.aclose()
        return await self.proc.wait()

    async def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.aclose()

    async def read_all(self) -> bytes:
        """What is left of stdout, up to its end."""
        assert self.proc.stdout is not None
        rest, self.buffer = self.buffer, b""
        while chunk := await self.proc.stdout.receive_some(1 << 20):
            rest += chunk
        return rest

    async def keep_stderr(self, stderr: trio.abc.ReceiveStream | None = None) -> None:
        stderr = stderr or (self.proc.stderr if isinstance(self.proc, trio.Process) else None)
        assert stderr is not None
        while chunk := await stderr.receive_some(1 << 16):
            self.err += chunk
        self.stderr_ended.set()

    def stderr_lines(self) -> list[str]:
        return bytes(self.err).decode().splitlines()


@asynccontextmanager
async def replaying(args: list[str], *, stderr: Any = subprocess.PIPE, stdout: Any = subprocess.PIPE,
                    timeout: float = 20) -> AsyncIterator[Replay]:
    """`acp-bridge replay ARGS` as a real process; its stderr read into `Replay.err` (when
    it is a pipe). Killed at the end if still running."""
    proc = await trio.lowlevel.open_process([*REPLAY, *args], stdin=subprocess.PIPE, stdout=stdout, stderr=stderr)
    replay = Replay(proc)
    try:
        with trio.fail_after(timeout):
            async with trio.open_nursery() as nursery:
                if proc.stderr is not None and stderr is subprocess.PIPE:
                    nursery.start_soon(replay.keep_stderr)
                try:
                    yield replay
                finally:
                    if proc.returncode is None:
                        proc.kill()
    finally:
        if proc.returncode is None:
            proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()


FAST = ReplayOptions()  # the command's defaults


@asynccontextmanager
async def serving(capture: Path, options: ReplayOptions = FAST, *, before_rules: bool = False,
                  stderr: int | None = None, timeout: float = 20) -> AsyncIterator[Replay]:
    """`acp-bridge replay CAPTURE` served in this process as the command serves it (the
    command's stdio opened on pipes, its reporter on a pipe for stderr, or on `stderr`, a
    descriptor the caller owns): for what the replay answers, not for what its process does
    (signals, exit, a stdout closed under it: `replaying`). Cancelled at the end if still
    serving; `Replay.err` holds all it reported."""
    with open_capture(str(capture), strict=True) as recorded:
        script = build_script(recorded, before_rules=before_rules)
    to_replay, from_client = os.pipe()
    to_client, from_replay = os.pipe()
    err_read, err_write = os.pipe() if stderr is None else (None, stderr)
    proc = Served(FdStream(from_client), FdStream(to_client))
    replay = Replay(proc)
    report = Reporter(err_write)

    async def serve() -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(report.run)
                async with open_stdio(to_replay, from_replay) as stream:
                    server = ReplayServer(script, options, stream, report)
                    status = await server.run()
                await report.close(STDERR_LINGER, last=server.summary())
                nursery.cancel_scope.cancel()
            proc.returncode = status
        finally:
            os.close(to_replay)
            os.close(from_replay)  # its duplicate is closed: the client reads the end of stdout
            if err_read is not None:
                os.close(err_write)
            proc.ended.set()

    try:
        with trio.fail_after(timeout):
            async with trio.open_nursery() as nursery:
                if err_read is not None:
                    nursery.start_soon(replay.keep_stderr, FdStream(err_read))
                async with trio.open_nursery() as serving_nursery:
                    serving_nursery.start_soon(serve)
                    try:
                        yield replay
                    finally:
                        serving_nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await proc.stdin.aclose()
            await proc.stdout.aclose()
