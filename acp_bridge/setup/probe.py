"""`acp-bridge doctor -- AGENT`: the bridge started in front of the agent as an editor starts
it, and spoken to as a client: `initialize`, and with a session `session/new` in a fresh
folder, then `session/close` where the agent offers it.

Owns: starting `acp-bridge run [RUN OPTIONS] -- AGENT` as a child process in a process group
of its own, writing the requests, reading its stdout line by line (protocol lines answered to
their requests by their exact ids, an answer to no request and a line over the bridge's parse
limit noted, the rest kept as stray output), keeping the tail of its stderr, the timeout, and
stopping it: stdin closed and SIGTERM, which the bridge passes on to the agent, then
(`STOP_GRACE` later, not after the bridge's own ladder) SIGKILL to the agent's group and to
what is left of the bridge's. Must never: answer the agent's requests (a probe has no files
or terminals to offer), or return while the bridge runs.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Sequence
from functools import partial
from typing import Any

import orjson
import trio

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.literals import written_id
from acp_bridge.setup.report import Json, Probe, WrongId
from acp_bridge.shell import posix

STDERR_TAIL = 4096
MIB = 1024 * 1024
MAX_LINE = 16 * MIB  # the bridge's own limit by default ([relay] parse_limit_mib): longer lines are not read
LINGER = 0.5  # after session/new, how long the commands an agent sends next may take to arrive
STOP_GRACE = 1.0  # after SIGTERM, how long the bridge and its agent may take to exit before SIGKILL
INITIALIZE, SESSION_NEW, CLOSE = 1, 2, 3
ASKED = {INITIALIZE: p.INITIALIZE, SESSION_NEW: p.SESSION_NEW, CLOSE: p.SESSION_CLOSE}
KEPT_LINES = 20  # stray stdout lines (and JSON lines that are not JSON-RPC) kept for the report
KEPT_CHARS = 1000  # of each such line


def _cut(text: str) -> str:
    return text if len(text) <= KEPT_CHARS else f"{text[:KEPT_CHARS]} ... ({len(text.encode())} bytes)"


def client_initialize(protocol: int, version: str) -> Json:
    key, info = ("capabilities", "info") if protocol >= 2 else ("clientCapabilities", "clientInfo")
    caps: Json = {} if protocol >= 2 else {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    return {"protocolVersion": protocol, key: caps, info: {"name": "acp-bridge-doctor", "version": version}}


def offers_close(result: Any) -> bool:
    caps = p.agent_capabilities(result)
    for path in (("sessionCapabilities", "close"), ("session", "close")):
        value = p.get_path(caps, *path)
        if value is not None and value is not False:
            return True
    return False


def id_text(raw: bytes, id_: Any) -> str:
    """The id of the JSON-RPC line `raw` (`id_` as read) as it was written: a 100-digit
    integer, which orjson reads as a float, in all its digits."""
    if type(id_) is int and not -(2 ** 63) <= id_ < 2 ** 64:  # read by the stdlib, exact
        return str(id_)
    try:
        return orjson.dumps(written_id(raw, id_)).decode()
    except (orjson.JSONEncodeError, TypeError):
        return repr(id_)


def _no_json(constant: str) -> Any:
    """NaN, Infinity and -Infinity, which the stdlib's reader takes and JSON has not."""
    raise ValueError(f"{constant} is not JSON")


class _Conversation:
    def __init__(self, probe: Probe, proc: trio.Process, start: float, max_line: int = MAX_LINE) -> None:
        self.probe, self.proc, self.start, self.max_line = probe, proc, start, max_line
        self.asked = INITIALIZE  # the id of the request sent last (what an answer is to)
        self.answers: dict[int, Json] = {}
        self.arrived = trio.Event()
        self.eof = trio.Event()
        self.stderr = bytearray()
        self.stopping = False  # the probe is stopping the bridge: what it answers now is its own doing

    def now(self) -> float:
        return trio.current_time() - self.start

    async def send(self, id_: int, method: str, params: Json) -> None:
        assert self.proc.stdin is not None
        self.asked = id_
        line = orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n"
        try:
            await self.proc.stdin.send_all(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def wait_answer(self, id_: int) -> Json | None:
        """The answer to request `id_`, or None once stdout has ended without it, or once
        something came in its place: not ACP, an answer with another id, a line too long."""
        while id_ not in self.answers:
            probe = self.probe
            if self.eof.is_set() or probe.not_acp or probe.wrong_id is not None or probe.long_line is not None:
                return None
            self.arrived = trio.Event()
            await self.arrived.wait()
        return self.answers[id_]

    async def read_stdout(self) -> None:
        """Stdout split into lines; a line longer than `max_line` is not kept, only noted
        (`long_line`), and its rest skipped up to its end."""
        assert self.proc.stdout is not None
        pending = bytearray()
        skipping = False
        try:
            while chunk := await self.proc.stdout.receive_some(65536):
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    if skipping:
                        skipping = False
                    elif len(pending) + end - start > self.max_line:
                        self.long_line()
                    else:
                        self.line(bytes(pending + chunk[start:end]) if pending else bytes(chunk[start:end]))
                    pending.clear()
                    start = end + 1
                if not skipping:
                    pending += chunk[start:]
                    if len(pending) > self.max_line:
                        self.long_line()
                        pending.clear()
                        skipping = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        if pending:
            self.line(bytes(pending))
        self.eof.set()
        self.arrived.set()

    def long_line(self) -> None:
        if not self.stopping and self.probe.long_line is None:
            self.probe.long_line = ASKED[self.asked]
            self.arrived.set()

    def line(self, raw: bytes) -> None:
        if self.stopping:
            return
        text = raw.rstrip(b"\r").decode("utf-8", "replace")
        try:
            msg = orjson.loads(raw)
        except orjson.JSONDecodeError:
            try:  # an integer past 308 digits, which orjson refuses (NaN stays no JSON)
                msg = json.loads(raw, parse_constant=_no_json)
            except (ValueError, RecursionError):
                if text.strip() or raw:
                    self.stray(text)
                return
        if not isinstance(msg, dict):
            self.stray(text)
            return
        if msg.get("jsonrpc") != "2.0":
            if len(self.probe.not_acp) < KEPT_LINES:
                self.probe.not_acp.append(_cut(text))
            self.arrived.set()
            return
        method = msg.get("method")
        if method is None and "id" in msg and ("result" in msg or "error" in msg):
            id_ = msg["id"]
            if type(id_) is int and id_ in ASKED:  # not True, not 1.0: ids are matched as written
                self.answers[id_] = msg
            elif self.probe.wrong_id is None:
                error = p.get_path(msg, "error", "message")
                self.probe.wrong_id = WrongId(ASKED[self.asked], self.asked, id_text(raw, id_),
                                              error if isinstance(error, str) else None)
            self.arrived.set()
            return
        if method == p.SESSION_UPDATE:
            update = read.update_of(msg)
            if read.update_kind(update) == p.AVAILABLE_COMMANDS_UPDATE:
                commands = p.get_path(update, "availableCommands")
                if isinstance(commands, list):
                    self.probe.commands = [c for c in commands if isinstance(c, dict)]
                    self.arrived.set()

    def stray(self, text: str) -> None:
        """A stdout line that is no protocol: counted, and among the first few, kept (an agent
        that logs to stdout would otherwise fill doctor's memory and its report)."""
        self.probe.stray_lines += 1
        if len(self.probe.stray) < KEPT_LINES:
            self.probe.stray.append(_cut(text))

    async def read_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        try:
            while chunk := await stream.receive_some(65536):
                self.stderr += chunk
                del self.stderr[:-STDERR_TAIL]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


async def run_probe(command: Sequence[str], agent: Sequence[str], *, protocol: int, with_session: bool,
                    timeout: float, version: str, env: dict[str, str] | None = None,
                    max_line: int = MAX_LINE) -> Probe:
    """Start `command` (the bridge's `run`, ending with `-- AGENT...`) and talk to it.
    `max_line`: the longest line read (the bridge's `[relay] parse_limit_mib`)."""
    probe = Probe(command=list(agent), protocol=protocol)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        proc: trio.Process = await nursery.start(partial(
            trio.run_process, list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, check=False, env=env, **posix.OWN_PROCESS_GROUP))
        talk = _Conversation(probe, proc, start, max_line)
        nursery.start_soon(talk.read_stdout)
        nursery.start_soon(talk.read_stderr)
        try:
            with tempfile.TemporaryDirectory(prefix="acp-doctor-") as folder:
                await _converse(talk, probe, protocol, with_session, timeout, version, folder)
        finally:
            talk.stopping = True
            with trio.CancelScope(shield=True):
                await _stop(proc)
                if not probe.stderr_tail:
                    probe.stderr_tail = bytes(talk.stderr).decode("utf-8", "replace")
            nursery.cancel_scope.cancel()
    return probe


async def _converse(talk: _Conversation, probe: Probe, protocol: int, with_session: bool, timeout: float,
                    version: str, folder: str) -> None:
    with trio.move_on_after(timeout) as waited:
        await talk.send(INITIALIZE, p.INITIALIZE, client_initialize(protocol, version))
        probe.initialize = _agents_own(probe, await talk.wait_answer(INITIALIZE))
        if probe.initialize is not None:
            probe.initialize_at = talk.now()
    if waited.cancelled_caught:
        probe.timed_out = f"{timeout:g} s, waiting for the answer to initialize"
        return
    if probe.initialize is None:
        if probe.exited is None and probe.start_error is None and talk.eof.is_set():  # stdout ended
            await talk.proc.wait()
            probe.exited = talk.proc.returncode
        return
    result = probe.initialize.get("result")
    if not with_session or not isinstance(result, dict):
        return
    with trio.move_on_after(timeout) as waited:
        cwd = str(await trio.Path(folder).resolve())  # ACP wants an absolute path, links resolved
        await talk.send(SESSION_NEW, p.SESSION_NEW, {"cwd": cwd, "mcpServers": []})
        probe.session = _agents_own(probe, await talk.wait_answer(SESSION_NEW))
        if probe.session is None:
            if probe.exited is None and talk.eof.is_set():
                await talk.proc.wait()
                probe.exited = talk.proc.returncode
            return
        probe.session_at = talk.now()
        listed = p.get_path(probe.session, "result", "availableCommands")
        if isinstance(listed, list) and not probe.commands:
            probe.commands = [c for c in listed if isinstance(c, dict)]
        session_id = read.created_session_id(p.get_path(probe.session, "result"))
        if session_id is None:
            return
        # Commands usually follow the answer at once; they are waited for before the session
        # is closed, as an agent may send them after it has answered session/close.
        with trio.move_on_after(LINGER):
            while not probe.commands and not talk.eof.is_set():
                talk.arrived = trio.Event()
                await talk.arrived.wait()
        if offers_close(result):
            await talk.send(CLOSE, p.SESSION_CLOSE, {"sessionId": session_id})
            answer = await talk.wait_answer(CLOSE)
            probe.closed = answer is not None and "result" in answer
    if waited.cancelled_caught:
        probe.timed_out = f"{timeout:g} s, waiting for the answer to " + (
            "session/new" if probe.session is None else "session/close")


def _agents_own(probe: Probe, answer: Json | None) -> Json | None:
    """`answer`, unless the bridge made it because the agent is gone (bridge-rules 5: its
    `data` holds the exit status and stderr) or could not start (the command and the
    reason): then that is noted on `probe`, and None returned."""
    data = p.get_path(answer, "error", "data")
    if not isinstance(data, dict):
        return answer
    status = data.get("exitStatus")
    if isinstance(status, int) and not isinstance(status, bool):
        probe.exited = status
        if isinstance(data.get("stderr"), str):
            probe.stderr_tail = data["stderr"]
        return None
    if isinstance(data.get("reason"), str) and "command" in data:
        probe.started = False
        hint = data.get("hint")
        probe.start_error = data["reason"] + (f" ({hint})" if isinstance(hint, str) else "")
        return None
    return answer


async def _stop(proc: trio.Process) -> None:
    """Stdin closed and SIGTERM, which the bridge passes on to the agent; then, if the bridge
    is still there after `STOP_GRACE` (its agent ignored both), SIGKILL to its agent's group
    and, after `STOP_GRACE` more, to the bridge's own: doctor ends at most about twice
    `STOP_GRACE` after it is done, not after the bridge's whole ladder (10 s by default)."""
    if proc.stdin is not None:
        try:
            await proc.stdin.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
    if proc.returncode is None:
        posix.terminate_group(proc)
        with trio.move_on_after(STOP_GRACE):
            await proc.wait()
    if proc.returncode is None:
        posix.kill_children(proc.pid)  # the agent gone, the bridge answers and exits at once
        with trio.move_on_after(STOP_GRACE):
            await proc.wait()
    if proc.returncode is None:
        posix.kill_group(proc)
        await proc.wait()
    else:
        posix.kill_group(proc, leftovers=True)
