"""Launching ACP proxy chains from tests: the commands that start each conductor for a list of
components, the reference proxy and the SDK agent as components, the Python SDK client on a
chain, and the Python conductor's trace and violations.

A test starts a conductor as if it were the agent (`connect(client, command)` with the SDK, or
any process helper), the components being argv lists: the proxies in order, then the agent.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.chain.conductor import EXITED, VIOLATION_STATUS, schemas_missing
from tests.conftest import ROOT, TESTS

__all__ = ["EXITED", "INIT", "VIOLATION_STATUS", "PythonConductor", "RawChain", "TraceEntry", "connect",
           "python_conductor", "read_trace", "reference_proxy", "schemas_missing", "scripted", "sdk_agent",
           "thinkwell_conductor", "thinkwell_missing"]

THINKWELL = ROOT / ".conductor" / "node_modules" / "@thinkwell" / "conductor" / "dist" / "index.js"
LINE_LIMIT = 64 * 1024 * 1024  # the SDK client's line buffer (asyncio's default is 64 KiB)


def sdk_agent(*args: str) -> list[str]:
    """The Python SDK's example agent (`tests/agents/sdk_agent.py`) as a component."""
    return [sys.executable, "-u", str(TESTS / "agents" / "sdk_agent.py"), *args]


def reference_proxy(*args: str) -> list[str]:
    """The reference proxy (either dialect, from its first message); `--bad-meta` to break it."""
    return [sys.executable, "-u", "-m", "tests.chain.reference_proxy", *args]


def scripted(tmp_path: Path, on: dict[str, Any]) -> list[str]:
    """The scripted agent (`tests/agents/scripted_agent.py`) reacting as `on` says, logging
    every line it receives to `tmp_path / "agent.log"`, as a component."""
    script = tmp_path / "agent.json"
    script.write_text(json.dumps({"log": str(tmp_path / "agent.log"), "on": on}), encoding="utf-8")
    return [sys.executable, "-u", str(TESTS / "agents" / "scripted_agent.py"), str(script)]


# A client's initialize, as a RawChain sends it.
INIT = b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'


def thinkwell_missing() -> str | None:
    """Why `@thinkwell/conductor` cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not on PATH: install Node.js to test under @thinkwell/conductor"
    if not Path(os.environ.get("THINKWELL_CONDUCTOR", THINKWELL)).is_file():
        return (f"@thinkwell/conductor not installed at {THINKWELL.parents[3]}: "
                "npm install --prefix .conductor @thinkwell/conductor@0.5.7 (.ci/run does)")
    return None


def thinkwell_conductor(components: Sequence[Sequence[str]]) -> list[str]:
    """`@thinkwell/conductor` 0.5.7 (the sacp dialect) on its own stdio, for `components`."""
    return ["node", str(TESTS / "chain" / "thinkwell.mjs"), json.dumps([list(argv) for argv in components])]


@dataclass(frozen=True)
class TraceEntry:
    hop: str | int  # "client", or the component's index
    direction: str  # "received" or "sent", as the conductor saw it
    line: bytes  # the line without its newline, byte for byte


@dataclass(frozen=True)
class PythonConductor:
    """The official-dialect conductor (`tests/chain/conductor.py`): its command line, and the
    files it writes its trace and its protocol violations to."""

    command: list[str]
    trace_path: Path
    violations_path: Path

    def trace(self) -> list[TraceEntry]:
        return read_trace(self.trace_path)

    def lines(self, hop: str | int, direction: str) -> list[bytes]:
        """What the conductor received from or sent to `hop`, in order."""
        return [entry.line for entry in self.trace() if entry.hop == hop and entry.direction == direction]

    def violations(self) -> list[str]:
        """Each envelope that failed the schemas, each protocol breach, one a line."""
        if not self.violations_path.exists():
            return []
        return self.violations_path.read_text(encoding="utf-8").splitlines()


def python_conductor(components: Sequence[Sequence[str]], workdir: Path, *, trace: bool = True) -> PythonConductor:
    """The official-dialect conductor for `components`, writing into `workdir` (a test's
    tmp_path). Skip the test first if `schemas_missing()` says why it cannot run."""
    trace_path, violations_path = workdir / "conductor-trace.jsonl", workdir / "conductor-violations.txt"
    command = [sys.executable, "-u", "-m", "tests.chain.conductor", "--violations", str(violations_path)]
    if trace:
        command += ["--trace", str(trace_path)]
    return PythonConductor([*command, json.dumps([list(argv) for argv in components])], trace_path, violations_path)


def read_trace(path: Path) -> list[TraceEntry]:
    """The Python conductor's trace: every line each hop received and sent, in order."""
    entries = []
    for text in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(text)
        entries.append(TraceEntry(record["hop"], record["direction"], record["line"].encode("utf-8", "surrogateescape")))
    return entries


@asynccontextmanager
async def connect(client: Any, command: Sequence[str], *, shutdown_timeout: float = 10) -> AsyncIterator[tuple[Any, Any]]:
    """The Python SDK's client on `command` (a conductor): `(connection, process)`, as
    `acp.spawn_agent_process` gives them, with the conductor's stderr on the test's (a pipe
    nobody reads would stall it), this process's whole environment (the SDK passes on a
    trimmed one), the repository as working directory (where `-m tests.chain...` is found),
    lines up to 64 MiB, and time for the chain to shut down on its own after stdin closes
    (then `process.returncode` is the conductor's status)."""
    import acp

    kwargs = {"stderr": None, "limit": LINE_LIMIT, "shutdown_timeout": shutdown_timeout}
    async with acp.spawn_agent_process(client, command[0], *command[1:], env=dict(os.environ), cwd=ROOT,
                                     transport_kwargs=kwargs) as pair:
        yield pair


class RawChain:
    """A conductor driven line by line, as a client that writes exact bytes: `send` a line,
    `receive` the next line it writes (its newline stripped), `close` its stdin and get its
    exit status. Its stderr is the test's. Used as a context manager, it is killed if the
    test leaves it running."""

    def __init__(self, command: Sequence[str]) -> None:
        self.process = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            self._lines.put(line.removesuffix(b"\n"))
        self._lines.put(None)

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 30) -> bytes:
        line = self._lines.get(timeout=timeout)
        if line is None:
            raise EOFError("the conductor closed its stdout")
        return line

    def close(self, timeout: float = 30) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout)

    def __enter__(self) -> RawChain:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
