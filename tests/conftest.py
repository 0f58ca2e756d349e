"""Shared by the suite: the stand-in agents' command lines, the real CLI as a process
(`run_cli`, `open_bridge`), spec examples, and the Hypothesis profiles (`HYPOTHESIS_PROFILE`
= fast or deep).

`@pytest.mark.detail` labels a test that guards an implementation detail kept for speed (a
line not parsed or parsed once, a bytes object passed on rather than copied, a run of lines
forwarded as one), not behaviour a client or agent can see. When such a test fails and the
behaviour tests pass, the question is whether the speed is still wanted, not whether the
bridge is wrong. `pytest -m "not detail"` runs the behaviour alone; `-m detail` lists them.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from hypothesis import HealthCheck, settings

pytest_plugins = ("tests.browser",)  # the one headless browser of the suite, its `browser` fixture

# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on
# some machines, CI's among them): the suite starts hundreds of Python processes (the CLI, the
# agents), each of which would otherwise compile the package anew, and each xdist worker would
# rewrite and compile every test module. Measured: about a fifth of a bridge's start-up, and
# several seconds of each worker's collection. Set here, before the workers start and before
# any test module is imported, so it holds for both and for every process the tests start.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# How many xdist workers a plain `pytest` runs on is set in tests/workers.py, a plugin
# loaded before this file (pyproject.toml's addopts), so that pytest-cov sees it; how the
# tests are handed out to them is set here.

# Modules whose tests take seconds each start first, so that none of them is what the
# other workers wait for at the end (xdist hands tests out in collection order).
SLOW_FIRST = (
    "tests/inspector/test_browser.py", "tests/bench/test_bench.py", "tests/shell/test_fuzz_bridge.py",
    "tests/telemetry/test_endpoint_secrets.py", "tests/telemetry/test_e2e.py", "tests/shell/test_reliability.py",
    "tests/telemetry/test_hostile_e2e.py", "tests/mcp/test_server.py", "tests/capture/test_html.py",
    "tests/shell/test_closed_sessions.py", "tests/replay/test_sdk.py", "tests/commands/test_demo.py",
    "tests/commands/test_doctor.py", "tests/chain/test_bridge_in_chain.py",
)

# Modules whose tests share something expensive run on one worker, so that it is made once:
# a module-scoped fixture, or the suite's one browser (tests/browser.py), which two modules
# share. Named here, by module, rather than with pytest-xdist's `xdist_group` mark, which
# groups nothing on pytest 9.2 (pytest-dev/pytest-xdist#1386: the worker's renamed node ids
# no longer reach the scheduler); `pytest_xdist_make_scheduler` below applies them.
GROUPS = {
    "tests/inspector/test_browser.py": "browser", "tests/capture/test_html.py": "browser",
    "tests/health/test_check.py": "health-check",  # `captures`
    "tests/health/test_cli_findings.py": "health-cli-findings",  # `broken_v1`
    "tests/mcp/test_server.py": "mcp-server",
    # the ACP SDK, imported by the test process itself (`sdk()`, a second of CPU)
    "tests/shell/test_interop_sdk.py": "sdk", "tests/telemetry/test_e2e.py": "sdk", "tests/replay/test_sdk.py": "sdk",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))  # stable: the rest keep their order


# A shell that starts the suite as a background job (`pytest &` in a script) has it ignore
# SIGINT, and an ignored signal stays ignored across exec: the commands the tests start would
# never see the SIGINT that some tests send them. A handler is reset to the default at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` with the `GROUPS` of this file: each group is one unit of work
    (handed to one worker), every other test a unit of its own."""
    if config.option.dist != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # xdist ships no types

    scheduler = LoadScopeScheduling(config, log)  # a unit of work is what `_split_scope` names
    if not callable(getattr(scheduler, "_split_scope", None)):  # a private name: say so if it goes
        raise pytest.UsageError("tests/conftest.py: this pytest-xdist has no LoadScopeScheduling._split_scope; "
                                "GROUPS cannot be applied (run with -n 0, or update the hook)")
    scheduler._split_scope = lambda nodeid: GROUPS.get(nodeid.partition("::")[0], nodeid)
    return scheduler


settings.register_profile("fast", max_examples=60, deadline=None)
settings.register_profile("deep", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))

TESTS = Path(__file__).parent
ROOT = TESTS.parent
EXAMPLES = TESTS / "examples"  # copied from shared/spec/examples
FAKE_AGENT = TESTS / "agents" / "fake_agent.py"
SCRIPTED_AGENT = TESTS / "agents" / "scripted_agent.py"


@pytest.fixture(autouse=True)
def _stderr_written_within_the_test() -> Any:
    """What a test had the bridge say on fd 2 (its log, an agent's stderr) goes through a
    writer thread (shell/logs.py `FdWriter`): waited for before the test ends, so that it
    lands in the test's captured output, not on the terminal after it."""
    yield
    logs = sys.modules.get("acp_bridge.shell.logs")  # not imported: nothing was written so
    if logs is not None and logs._STDERR:
        logs._STDERR[0].flush(10)


def agent_cmd(*args: str) -> list[str]:
    """The fake agent's command line."""
    return [sys.executable, "-u", str(FAKE_AGENT), *args]


@dataclass
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


def invoke(args: Sequence[str]) -> Completed:
    """A command run in this process through the real click group (no interpreter to start):
    for commands that neither relay nor start processes nor print local times."""
    from click.testing import CliRunner

    from acp_bridge.commands import main

    result = CliRunner().invoke(main, list(args))
    return Completed(result.exit_code, result.stdout_bytes, result.stderr_bytes)


async def run_cli(args: Sequence[str], stdin: bytes = b"", *, timeout: float = 60,
                  env: dict[str, str] | None = None) -> Completed:
    """Run `python -m acp_bridge ARGS` as a real process; return its status and output."""
    full_env = {**os.environ, **(env or {})}
    with trio.fail_after(timeout):
        proc = await trio.run_process(
            [sys.executable, "-m", "acp_bridge", *args], stdin=stdin,
            capture_stdout=True, capture_stderr=True, check=False, env=full_env,
        )
    return Completed(proc.returncode, proc.stdout, proc.stderr)


def sdk() -> Any:
    """The official ACP Python SDK (`acp`), imported by the test that needs it: the import
    takes about a second, which every xdist worker would pay at collection. Untyped, as
    the test clients implement only the methods their conversations call."""
    import acp

    return acp


def keeper(into: list[Any]) -> Callable[[Any], int]:
    """A stand-in for `cli.run_and_report`: keeps the config it was given, returns 0."""
    def keep(config: Any, rules: Any = None) -> int:
        into.append(config)
        return 0
    return keep


def example(name: str) -> dict[str, Any]:
    """One message from ../shared/spec/examples (name without .json)."""
    msg: dict[str, Any] = orjson.loads((EXAMPLES / f"{name}.json").read_bytes())
    return msg


def line(msg: dict[str, Any]) -> bytes:
    """A message as one wire line."""
    return orjson.dumps(msg) + b"\n"


class Driven:
    """A peer driven line by line through its stdin and stdout; `received` holds what came
    so far. The real bridge process (`BridgeProcess`) and the bridge run in this process
    (tests/cli_helpers.py `InProcessBridge`) both are one, so a test can switch."""

    def __init__(self, stdin: trio.abc.SendStream, stdout: trio.abc.ReceiveStream) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self.received = bytearray()

    async def send(self, data: bytes) -> None:
        await self._stdin.send_all(data)

    async def close_stdin(self) -> None:
        await self._stdin.aclose()

    async def read_until(self, wanted: bytes) -> bytes:
        """Read stdout until `wanted` has been received; return everything so far."""
        while wanted not in self.received:
            chunk = await self._stdout.receive_some(1 << 20)
            if not chunk:
                raise AssertionError(f"EOF before {wanted!r}; got {bytes(self.received)[-300:]!r}")
            self.received += chunk
        return bytes(self.received)

    async def read_all(self) -> bytes:
        while chunk := await self._stdout.receive_some(1 << 20):
            self.received += chunk
        return bytes(self.received)


class BridgeProcess(Driven):
    """A real `python -m acp_bridge` process driven line by line (see `open_bridge`)."""

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        super().__init__(proc.stdin, proc.stdout)
        self.proc = proc


async def signal_running_bridge(args: Sequence[str], signum: int, *,
                                env: dict[str, str] | None = None) -> tuple[int, bytes]:
    """Start `python -m acp_bridge ARGS` in front of an echoing agent, wait until a line has
    come back through it (the bridge installs its signal handlers before it reads the
    agent's output, so they are in place by then), send it `signum`, and return its exit
    status and all it wrote to stderr."""
    import subprocess

    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "acp_bridge", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    try:
        with trio.fail_after(20):
            bridge = BridgeProcess(proc)
            await bridge.send(b'{"x":1}\n')
            await bridge.read_until(b'{"x":1}\n')
            proc.send_signal(signum)
            assert proc.stderr is not None
            err = b""
            while chunk := await proc.stderr.receive_some():
                err += chunk
            return await proc.wait(), err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@asynccontextmanager
async def open_bridge(args: Sequence[str], *, env: dict[str, str] | None = None) -> AsyncIterator[BridgeProcess]:
    """Start the bridge with pipes on stdin and stdout (stderr goes to the test's own)."""
    import subprocess

    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "acp_bridge", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    try:
        yield BridgeProcess(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
