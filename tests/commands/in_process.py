"""`acp-bridge run` in this process, for tests whose subject is a rule or a setting in a real
run, not the CLI process: the options read by the real click command (`run`, with only its
last step, `run_and_report`, kept from running), then the bridge run as `run` runs it
(shell/run.py `run_bridge`) on real pipes, in front of a real agent process, with the log
set up by the real `setup_logging` and kept in memory instead of written to fd 2.

What it leaves out is what the real-process tests prove (tests/commands/test_run.py,
tests/shell/test_reliability.py, test_agent.py): the interpreter, stdio on fds 0 and 1, the
exit status as the process's. It saves the 0.3 s of CPU a `python -m acp_bridge` start costs.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio
from click.testing import CliRunner

from acp_bridge.commands import main
from acp_bridge.commands import run as run_command
from acp_bridge.shell.logs import setup_logging
from acp_bridge.shell.run import run_bridge
from tests.conftest import Completed


@dataclass
class Settled:
    """What `run ARGS` settled on: its Config and its rules."""

    config: Any
    rules: Any


def settle(args: Sequence[str], env: dict[str, str] | None = None) -> Settled:
    """Read `run ARGS` (without the word `run`) as the real command does, with `env` as the
    only ACP_BRIDGE_* variables, and return what it would run."""
    kept: list[Settled] = []

    def keep(config: Any, rules: Any = None) -> int:
        kept.append(Settled(config, rules))
        return 0

    variables: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ACP_BRIDGE_")}
    variables.update(env or {})
    stand_ins = {"run_and_report": keep, "setup_logging": lambda config: None}  # run_in_process sets the log up
    saved = {name: getattr(run_command, name) for name in stand_ins}
    for name, stand_in in stand_ins.items():
        setattr(run_command, name, stand_in)
    try:
        result = CliRunner().invoke(main, ["run", *args], env=variables)
    finally:
        for name, real in saved.items():
            setattr(run_command, name, real)
    assert result.exit_code == 0 and len(kept) == 1, (result.exit_code, result.output, result.exception)
    return kept[0]


class _Kept(logging.Handler):
    def __init__(self, into: bytearray) -> None:
        super().__init__()
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into += (self.format(record) + "\n").encode("utf-8", "replace")


@dataclass
class InProcessBridge:
    """The client's end: `stdin` to write, `stdout` to read; `stderr` the bridge's log lines;
    after the block, `rest` (what stdout carried after the client's last read) and
    `returncode` (the status `run` would exit with)."""

    stdin: trio.lowlevel.FdStream
    stdout: trio.lowlevel.FdStream
    stderr: bytearray = field(default_factory=bytearray)
    rest: bytes = b""
    returncode: int | None = None


@asynccontextmanager
async def run_in_process(args: Sequence[str], env: dict[str, str] | None = None) -> AsyncIterator[InProcessBridge]:
    """Run `run ARGS` in this process for the life of the block. On leaving, the client's
    stdin is closed, stdout read to its end, and the bridge awaited."""
    settled = settle(args, env)
    to_bridge, from_client = os.pipe()
    to_client, from_bridge = os.pipe()
    logger = logging.getLogger("acp_bridge")
    saved_log = logger.handlers[:], logger.level, logger.propagate
    saved_gc = gc.get_threshold()  # run_bridge collects rarely: not for the rest of the suite
    bridge = InProcessBridge(trio.lowlevel.FdStream(from_client), trio.lowlevel.FdStream(to_client))
    setup_logging(settled.config)
    for i, handler in enumerate(logger.handlers):
        if type(handler).__name__ == "StderrHandler":
            kept = _Kept(bridge.stderr)
            kept.setFormatter(handler.formatter)
            logger.handlers[i] = kept
    try:
        async with trio.open_nursery() as nursery:
            async def relay() -> None:
                try:
                    bridge.returncode = await run_bridge(settled.config, settled.rules, stdin_fd=to_bridge,
                                                         stdout_fd=from_bridge)
                finally:  # run_bridge relayed on duplicates: these ends close with it
                    os.close(to_bridge)
                    os.close(from_bridge)

            async def read_rest() -> None:
                while chunk := await bridge.stdout.receive_some(1 << 16):
                    bridge.rest += chunk

            nursery.start_soon(relay)
            try:
                yield bridge
            finally:
                await bridge.stdin.aclose()
                nursery.start_soon(read_rest)
    finally:
        await bridge.stdout.aclose()
        gc.set_threshold(*saved_gc)
        for handler in logger.handlers:
            if handler not in saved_log[0]:
                handler.close()
        logger.handlers[:], logger.level, logger.propagate = saved_log


async def run_cli_in_process(args: Sequence[str], stdin: bytes = b"", *, timeout: float = 60,
                             env: dict[str, str] | None = None) -> Completed:
    """`run_cli(["run", ...], stdin)` in this process: write `stdin` and close it while
    reading stdout (so neither side waits on a full pipe); return the status, all of stdout
    and the log."""
    assert args[0] == "run", args
    out = bytearray()
    with trio.fail_after(timeout):
        async with run_in_process(args[1:], env) as bridge, trio.open_nursery() as nursery:
            async def feed() -> None:
                await bridge.stdin.send_all(stdin)
                await bridge.stdin.aclose()

            nursery.start_soon(feed)
            while chunk := await bridge.stdout.receive_some(1 << 20):  # to the end: the bridge is done
                out += chunk
    assert bridge.returncode is not None and bridge.rest == b""
    return Completed(bridge.returncode, bytes(out), bytes(bridge.stderr))
