"""Helpers for the tests that ask a command in this process what a real process was started
for before: a FIFO's peer on call, so that a command that waits on one fails its test instead
of hanging the worker; `acp-bridge run` in this process on pipes (`bridge_in_process` and
`run_cli_in_process`, stand-ins for conftest's `open_bridge` and `run_cli`); an extra made
missing."""

from __future__ import annotations

import fcntl
import importlib.abc
import logging
import os
import signal
import sys
import termios
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.lowlevel import FdStream

from acp_bridge.shell.logs import StderrHandler
from tests.conftest import Completed, Driven, invoke


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


class InProcessBridge(Driven):
    """`BridgeProcess` (tests/conftest.py) for a bridge in this process (`bridge_in_process`):
    `proc` stands for its process; `stderr` holds its log, as the real formatter wrote it (the
    agent's own stderr goes to the test's)."""

    def __init__(self, proc: Served) -> None:
        super().__init__(proc.stdin, proc.stdout)
        self.proc = proc
        self.stderr = bytearray()


class KeptLog(logging.Handler):
    """The bridge's log lines, kept in memory instead of written to fd 2."""

    def __init__(self, into: bytearray, formatter: logging.Formatter | None) -> None:
        super().__init__()
        self.into = into
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        self.into += (self.format(record) + "\n").encode("utf-8", "replace")


@contextmanager
def settled(args: Sequence[str], env: dict[str, str] | None = None) -> Iterator[tuple[Any, Any]]:
    """`acp-bridge ARGS` (a `run`, or its short form) read by the real click group up to the
    point where `run_and_report` would start the bridge; yields what it would run (its Config
    and rules). For the life of the block, as a bridge process would have them: `sys.argv`
    (the capture header's argv), `env` as the only ACP_BRIDGE_* variables, and the log that
    `run` set up. After it, all three as they were; the process-wide tuning of `run_bridge`
    (the collector's threshold, the heap) is never applied."""
    from acp_bridge.commands import run as run_command
    from acp_bridge.shell import run as shell_run

    asked: list[tuple[Any, Any]] = []

    def keep(config: Any, rules: Any = None) -> int:
        asked.append((config, rules))
        return 0

    logger = logging.getLogger("acp_bridge")
    saved = list(logger.handlers), logger.level, logger.propagate
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name in [name for name in os.environ if name.startswith("ACP_BRIDGE_")]:
                patch.delenv(name)
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            patch.setattr(sys, "argv", ["acp-bridge", *args])
            patch.setattr(run_command, "run_and_report", keep)
            patch.setattr(shell_run, "collect_rarely", lambda: None)
            patch.setattr(shell_run, "keep_heap", lambda: None)
            told = invoke(args)
            if not asked:
                raise AssertionError(f"the bridge would not start: {told}")
            [(config, rules)] = asked
            yield config, rules
    finally:
        for handler in logger.handlers:
            if handler not in saved[0]:
                handler.close()
        logger.handlers[:], logger.level, logger.propagate = saved


@asynccontextmanager
async def bridge_in_process(args: Sequence[str], *, env: dict[str, str] | None = None,
                            timeout: float = 20) -> AsyncIterator[InProcessBridge]:
    """`open_bridge` with the bridge in this process, its stdio on pipes: `acp-bridge ARGS`
    as `settled` reads it, then `run_bridge` as `run_and_report` would run it, in front of a
    real agent process. For what the bridge relays and records, not for what its process
    does (signals, exit by signal, interpreter start, fds 0 to 2). On leaving the block, the
    client's stdin is closed, stdout read to its end into `received` (so the bridge never
    waits on a full pipe), and the bridge awaited: all of it, and the block, within `timeout`
    seconds, or the test fails. Saves the 0.3 s of CPU of an interpreter start."""
    from acp_bridge.shell.run import run_bridge

    with settled(args, env) as (config, rules):
        to_bridge, from_client = os.pipe()
        to_client, from_bridge = os.pipe()
        proc = Served(FdStream(from_client), FdStream(to_client))
        bridge = InProcessBridge(proc)
        logger = logging.getLogger("acp_bridge")
        logger.handlers[:] = [KeptLog(bridge.stderr, handler.formatter) if isinstance(handler, StderrHandler)
                              else handler for handler in logger.handlers]

        async def run() -> None:
            try:
                proc.returncode = await run_bridge(config, rules, stdin_fd=to_bridge, stdout_fd=from_bridge)
            finally:  # run_bridge relayed on duplicates: these ends close with it
                os.close(to_bridge)
                os.close(from_bridge)
                proc.ended.set()

        try:
            with trio.fail_after(timeout):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run)
                    yield bridge
                    await bridge.close_stdin()
                    await bridge.read_all()
        except BaseExceptionGroup as group:  # the test's failure, or the bridge's, as it was raised
            if len(group.exceptions) > 1:
                raise
            raise group.exceptions[0] from None
        finally:
            with trio.CancelScope(shield=True):
                await proc.stdin.aclose()
                await proc.stdout.aclose()


async def run_cli_in_process(args: Sequence[str], stdin: bytes = b"", *, timeout: float = 60,
                             env: dict[str, str] | None = None) -> Completed:
    """`run_cli` with the bridge in this process (`bridge_in_process`): `stdin` written and
    closed while stdout is read; the status, all of stdout and the bridge's log."""
    async with bridge_in_process(args, env=env, timeout=timeout) as bridge, trio.open_nursery() as nursery:
        nursery.start_soon(bridge.read_all)
        await bridge.send(stdin)
        await bridge.close_stdin()
    return Completed(await bridge.proc.wait(), bytes(bridge.received), bytes(bridge.stderr))


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


async def wait_until_still(fd: int, at_least: int = 1) -> None:
    """Wait until the bytes queued in the pipe at `fd` are at least `at_least` and stay the
    same over two looks: its writer is blocked on it (or has stopped)."""
    previous = -1
    while True:
        queued = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4), sys.byteorder)
        if queued >= at_least and queued == previous:
            return
        previous = queued
        await trio.sleep(0.2)  # polling a condition: the same level twice in a row


async def sigterm_once_stuck(bridge: InProcessBridge) -> None:
    """Send the bridge running in this process SIGTERM once it is stuck writing to the
    stdout the test does not read, with its own handler in place (it is, by then)."""
    assert bridge.proc.stdout is not None
    await wait_until_still(bridge.proc.stdout.fileno())
    while signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        await trio.sleep(0.01)  # a condition polled: the handler set
    os.kill(os.getpid(), signal.SIGTERM)  # the bridge runs in this process: the signal is its
