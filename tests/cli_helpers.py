"""Helpers for the command tests that ask a command in this process what a real process was
started for before: a FIFO's peer on call, so that a command that waits on one fails its test
instead of hanging the worker; the bridge run in this process on pipes; an extra made
missing."""

from __future__ import annotations

import importlib.abc
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.lowlevel import FdStream

from acp_bridge.shell.logs import StderrHandler
from tests.conftest import Completed, invoke


@contextmanager
def peer_on_call(fifo: Path, *, writer: bool, after: float = 10) -> Iterator[None]:
    """Should a command open `fifo` and wait for its other end (a reader waits for a writer,
    a writer for a reader), that end comes and goes `after` seconds later, and each second
    from then on: the command reads the FIFO's end, or finds nobody reading what it writes,
    and goes on, so that a regression fails the test instead of blocking its process."""
    done = threading.Event()
    flags = (os.O_WRONLY if writer else os.O_RDONLY) | os.O_NONBLOCK

    def come_and_go() -> None:
        wait = after
        while not done.wait(wait):
            try:
                os.close(os.open(fifo, flags))
            except OSError:  # ENXIO: a writer finds no reader waiting
                pass
            wait = 1

    thread = threading.Thread(target=come_and_go, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


class Served:
    """What a test uses of a process it drives (`trio.Process`), for a command run in this
    process: the client's ends of its stdin and stdout, and its exit status once done."""

    def __init__(self, stdin: FdStream, stdout: FdStream) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self.ended = trio.Event()

    async def wait(self) -> int:
        await self.ended.wait()
        assert self.returncode is not None
        return self.returncode


class Bridge:
    """`BridgeProcess` for a bridge in this process (`bridge_in_process`); `stderr()` is what it
    said (its log and its one-line errors; the agent's own stderr goes to the test's)."""

    def __init__(self, proc: Served) -> None:
        self.proc = proc
        self.received = bytearray()
        self.said = bytearray()
        self.said_ended = trio.Event()

    async def send(self, data: bytes) -> None:
        await self.proc.stdin.send_all(data)

    async def close_stdin(self) -> None:
        await self.proc.stdin.aclose()

    async def read_until(self, wanted: bytes) -> bytes:
        while wanted not in self.received:
            chunk = await self.proc.stdout.receive_some(1 << 20)
            if not chunk:
                raise AssertionError(f"EOF before {wanted!r}; got {bytes(self.received)[-300:]!r}")
            self.received += chunk
        return bytes(self.received)

    async def read_all(self) -> bytes:
        while chunk := await self.proc.stdout.receive_some(1 << 20):
            self.received += chunk
        return bytes(self.received)

    async def stderr(self) -> bytes:
        await self.said_ended.wait()
        return bytes(self.said)

    async def keep_stderr(self, stream: FdStream) -> None:
        async with stream:
            while chunk := await stream.receive_some(1 << 16):
                self.said += chunk
        self.said_ended.set()


@asynccontextmanager
async def bridge_in_process(args: Sequence[str], *, timeout: float = 20) -> AsyncIterator[Bridge]:
    """`acp-bridge ARGS` (a `run`, or its short form) with the bridge in this process, its
    stdio on pipes: the command line read by the real click group, up to the point where
    `run_and_report` would start the bridge, then `run_bridge` as it would be run. For what
    the bridge relays and records, not for what its process does (signals, exit by signal,
    interpreter start). The agent is a real child process; the capture header's argv is
    `acp-bridge ARGS`. The logging and the process-wide tuning the bridge would set are
    left as they were."""
    from acp_bridge.commands import run as run_command
    from acp_bridge.shell import run as shell_run

    asked: list[tuple[Any, Any]] = []

    def keep(config: Any, rules: Any = None) -> int:
        asked.append((config, rules))
        return 0

    logger = logging.getLogger("acp_bridge")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    to_bridge, from_client = os.pipe()
    to_client, from_bridge = os.pipe()
    said, says = os.pipe()
    proc = Served(FdStream(from_client), FdStream(to_client))
    bridge = Bridge(proc)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(run_command, "run_and_report", keep)
            patch.setattr(shell_run, "collect_rarely", lambda: None)
            patch.setattr(shell_run, "keep_heap", lambda: None)
            patch.setattr(sys, "argv", ["acp-bridge", *args])
            told = invoke(args)
            if not asked:
                raise AssertionError(f"the bridge would not start: {told}")
            for handler in logger.handlers:
                if isinstance(handler, StderrHandler):
                    handler.fd = says
            [(config, rules)] = asked

            async def run() -> None:
                try:
                    proc.returncode = await shell_run.run_bridge(config, rules, stdin_fd=to_bridge,
                                                                 stdout_fd=from_bridge)
                finally:
                    for fd in (to_bridge, from_bridge, says):
                        os.close(fd)
                    proc.ended.set()

            with trio.fail_after(timeout):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(bridge.keep_stderr, FdStream(said))
                    nursery.start_soon(run)
                    yield bridge
    finally:
        for handler in logger.handlers:
            if handler not in saved[0]:
                handler.close()
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]
        with trio.CancelScope(shield=True):
            await proc.stdin.aclose()
            await proc.stdout.aclose()


async def run_in_process(args: Sequence[str], stdin: bytes = b"", *, timeout: float = 60) -> Completed:
    """`run_cli` with the bridge in this process (`bridge_in_process`): `stdin` sent and
    closed, stdout read to its end; the status, stdout and what the bridge said."""
    async with bridge_in_process(args, timeout=timeout) as bridge:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge.read_all)
            await bridge.send(stdin)
            await bridge.close_stdin()
        return Completed(await bridge.proc.wait(), bytes(bridge.received), await bridge.stderr())


class _Refuser(importlib.abc.MetaPathFinder):
    def __init__(self, top: str) -> None:
        self.top = top

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == self.top or name.startswith(f"{self.top}."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def without_package(top: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Until the test ends, the package `top` cannot be imported in this process, as if its
    extra were not installed: what of it is imported already is forgotten, and a finder
    refuses it."""
    for name in [name for name in sys.modules if name == top or name.startswith(f"{top}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Refuser(top), *sys.meta_path])
