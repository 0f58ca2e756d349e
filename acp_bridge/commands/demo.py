"""`acp-bridge demo`: a scripted new ACP client talking to the bundled legacy agent through a
real `acp-bridge run` process, narrating what each side sent and received.

Owns: the command, the demo script and its narration. Must never: need anything but this package.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson
import trio

from acp_bridge.core import LineSplitter
from acp_bridge.core.printable import printable
from acp_bridge.core.shapes import NEW, suggestion_form, update_of
from acp_bridge.extras import install

SYSTEM_PROMPT = "Answer in one sentence. Never touch files outside src/."
DEFAULT_DIR = "acp-bridge-demo"  # in the current folder, where a newcomer looks for what it made
TIMEOUT = 20
POLL = 0.01  # how often to look at the agent's log while waiting for an entry


def bridge_program(which: Callable[[str], str | None] = shutil.which,
                   argv0: str | None = None, executable: str | None = None) -> list[str]:
    """How to start this acp-bridge from a shell, so that the commands the demo prints work
    as printed: `acp-bridge` when that is on PATH, else the full path of the running script
    (the venv quickstart does not put it on PATH), else `python -m acp_bridge`."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if which("acp-bridge"):
        return ["acp-bridge"]
    if Path(argv0).name == "acp-bridge" and os.path.isfile(argv0):
        return [os.path.abspath(argv0)]
    beside = Path(os.path.abspath(executable)).parent / "acp-bridge"  # the venv's bin/ (not resolved:
    if beside.is_file() and os.access(beside, os.X_OK):                 # its python is a symlink)
        return [str(beside)]
    return [os.path.abspath(executable), "-m", "acp_bridge"]


class DemoClient:
    """Just enough of an ACP client: send requests, collect what comes back."""

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin, self.stdout = proc, proc.stdin, proc.stdout
        self.splitter = LineSplitter()
        self.received: list[dict[str, Any]] = []
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        await self.stdin.send_all(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                                "params": params}) + b"\n")
        return await self.wait_for(lambda m: m.get("id") == request_id and "method" not in m)

    async def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT) -> dict[str, Any]:
        for msg in self.received:
            if match(msg):
                self.received.remove(msg)
                return msg
        with trio.fail_after(timeout):
            while True:
                chunk = await self.stdout.receive_some()
                if not chunk:
                    raise RuntimeError("the bridge closed its stdout early")
                for line in self.splitter.feed(bytes(chunk)):
                    assert isinstance(line, bytes)
                    self.received.append(orjson.loads(line))
                for msg in self.received:
                    if match(msg):
                        self.received.remove(msg)
                        return msg


def is_suggestions(msg: dict[str, Any]) -> bool:
    return msg.get("method") == "session/update" and suggestion_form(update_of(msg)) == NEW


class Narrator:
    def __init__(self, color: bool) -> None:
        self.color = color

    def say(self, who: str, text: str, detail: Any = None) -> None:
        """One line of the story; what the agent or the bridge's log said is made printable
        (the log lines are already, but the agent's stderr comes with them as it was)."""
        colors = {"client": "cyan", "agent": "magenta", "bridge": "yellow", "": "white"}
        label = click.style(f"{who:>7}", fg=colors.get(who, "white"), bold=True) if self.color else f"{who:>7}"
        click.echo(f"{label}  {printable(text, quote_backslash=False)}")
        if detail is not None:
            shown = printable(detail if isinstance(detail, str) else json.dumps(detail), quote_backslash=False)
            click.echo(" " * 9 + (click.style(shown, dim=True) if self.color else shown))

    def heading(self, text: str) -> None:
        click.echo("")
        click.echo(click.style(text, bold=True) if self.color else text)


def fresh_names(folder: Path) -> tuple[Path, Path]:
    """The capture and the agent's log of a new run in `folder` (made if missing):
    `capture.jsonl` and `agent.jsonl`, or `capture-N.jsonl` and `agent-N.jsonl` for the first
    N where neither exists. The log is created here (so a second demo in the same folder
    takes the next N), the capture is left for the bridge: a run never reads the log of an
    earlier one, and the path printed is the one the bridge wrote."""
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(10_000):
        suffix = f"-{n}" if n else ""
        capture, agent_log = folder / f"capture{suffix}.jsonl", folder / f"agent{suffix}.jsonl"
        if os.path.lexists(capture):
            continue
        try:
            os.close(os.open(agent_log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        return capture, agent_log
    raise FileExistsError(f"{folder} holds 10,000 demo captures already")


def has_ui_extra() -> bool:
    """Is the inspector's extra installed (without importing it)?"""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("starlette", "hypercorn"))


async def run_demo(workdir: Path, narrator: Narrator) -> int:
    capture, agent_log = fresh_names(workdir)
    command = [
        sys.executable, "-m", "acp_bridge", "run", "--unlock-legacy-agent",
        "--system-prompt", SYSTEM_PROMPT, "--capture", str(capture), "--",
        sys.executable, "-m", "acp_bridge.demo.legacy_agent", "--log", str(agent_log),
    ]
    program = shlex.join(bridge_program())
    narrator.heading("acp-bridge demo: a new ACP client in front of a legacy agent")
    narrator.say("", "The bundled agent speaks only the legacy suggestion channel, only to JetBrains AIR,")
    narrator.say("", "and has no systemPrompt capability. The bridge runs as (in outline):")
    narrator.say("", "acp-bridge run --unlock-legacy-agent --system-prompt TEXT --capture FILE -- legacy-agent")

    proc = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE)
    client = DemoClient(proc)
    stderr = bytearray()
    stderr_done = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_read_all, proc.stderr, stderr, stderr_done)
        try:
            await _converse(client, Path(await trio.Path(workdir).absolute()), agent_log, narrator)
        finally:
            await proc.stdin.aclose() if proc.stdin else None
            with trio.move_on_after(TIMEOUT):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            with trio.move_on_after(TIMEOUT):
                await stderr_done.wait()
            nursery.cancel_scope.cancel()

    log = stderr.decode("utf-8", "replace").strip()
    if log:
        narrator.heading("The bridge's log (stderr)")
        for entry in log.splitlines():
            narrator.say("bridge", entry.removeprefix("acp-bridge: "))

    narrator.heading("5. the capture")
    narrator.say("bridge", f"every line both ways was recorded in {capture}")
    quoted = shlex.quote(str(capture))
    narrator.say("", f"read it with:  {program} show {quoted} --detail 3")
    narrator.say("", f"summarise it:  {program} stats {quoted}")
    narrator.say("", f"share it:      {program} export {quoted} --html demo.html")
    narrator.say("", f"check it:      {program} check {quoted}")
    narrator.say("", f"browse it:     {program} ui {shlex.quote(str(workdir))} --open"
                 + ("" if has_ui_extra() else f"  (needs the ui extra: {install('ui')})"))
    narrator.say("", f"Each run adds its capture to {workdir}; `demo --dir DIR` puts it elsewhere.")
    click.echo("")
    return 0 if proc.returncode == 0 else 1


async def _read_all(stream: trio.abc.ReceiveStream | None, into: bytearray, done: trio.Event) -> None:
    """Collect what the bridge logs, as it comes: the pipe never fills, nothing is missed."""
    try:
        while stream is not None and (chunk := await stream.receive_some(65536)):
            into += chunk
    finally:
        done.set()


async def _converse(client: DemoClient, workdir: Path, agent_log: Path, narrator: Narrator) -> None:
    """The scripted conversation. What the agent received or sent is read from its log, and
    each read waits until the entry is there: the agent logs a line it sends only after
    sending it, so a reply can reach the client before its log entry reaches the file."""
    narrator.heading("1. initialize")
    await client.request("initialize", {
        "protocolVersion": 1, "clientInfo": {"name": "demo-client", "version": "1.0.0"},
        "clientCapabilities": {"session": {"promptSuggestions": {}}}})
    narrator.say("client", "advertised session.promptSuggestions (the new capability), no AIR marker")
    sent_init = await agent_received(agent_log, "initialize")
    caps = sent_init.get("params", {}).get("clientCapabilities", {})
    narrator.say("agent", "received these capabilities (the bridge added the AIR marker to unlock it):", caps)

    narrator.heading("2. session/new")
    session = await client.request("session/new", {"cwd": str(workdir), "mcpServers": []})
    session_id = session["result"]["sessionId"]
    narrator.say("client", f"got session {session_id}")
    narrator.say("bridge", "the agent has no systemPrompt capability: it will use the first-prompt dialect")

    narrator.heading("3. the first prompt")
    await client.request("session/prompt", {"sessionId": session_id,
                                            "prompt": [{"type": "text", "text": "Explain the parser"}]})
    first = await agent_received(agent_log, "session/prompt")
    narrator.say("agent", "received the prompt with the system prompt injected in front:",
                 first["params"]["prompt"])
    legacy = await agent_sent(agent_log, lambda m: "promptSuggestions" in json.dumps(m))
    narrator.say("agent", "sent a legacy suggestion:", legacy["params"]["update"])
    update = await client.wait_for(is_suggestions)
    narrator.say("client", "received the standard update instead:", update["params"]["update"])

    narrator.heading("4. the next prompt")
    await client.request("session/prompt", {"sessionId": session_id,
                                            "prompt": [{"type": "text", "text": "Now run the test suite"}]})
    withdrawal = await client.wait_for(is_suggestions)
    narrator.say("client", "received the withdrawal the moment it sent its next prompt:",
                 withdrawal["params"]["update"])
    later = await agent_received(agent_log, "session/prompt", nth=1)
    narrator.say("agent", "received the second prompt unchanged (injection is once per session):",
                 later["params"]["prompt"])


def _agent_log(path: Path) -> list[dict[str, Any]]:
    """The agent's log entries so far: whole lines only (the last may still be being written)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:  # the agent has not opened it yet
        return []
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n") and line.strip()]


async def _wait_for_entry(path: Path, pick: Callable[[list[dict[str, Any]]], dict[str, Any] | None],
                          what: str, timeout: float) -> dict[str, Any]:
    """The first entry `pick` finds in the agent's log, once it is there."""
    with trio.move_on_after(timeout):
        while (found := pick(_agent_log(path))) is None:  # noqa: ASYNC110 - a file sends no event
            await trio.sleep(POLL)
        return found
    raise RuntimeError(f"the agent's log {path} had no {what} after {timeout:g}s")


async def agent_received(path: Path, method: str, nth: int = 0, timeout: float = TIMEOUT) -> dict[str, Any]:
    """The `nth` message with this method that the agent received, waiting until it is logged."""
    def pick(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
        seen = [e["msg"] for e in entries if e["dir"] == "in" and e["msg"].get("method") == method]
        return seen[nth] if len(seen) > nth else None

    return await _wait_for_entry(path, pick, f"{method} received (#{nth + 1})", timeout)


async def agent_sent(path: Path, match: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT) -> dict[str, Any]:
    """The first message the agent sent that `match`es, waiting until it is logged."""
    def pick(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
        return next((e["msg"] for e in entries if e["dir"] == "out" and match(e["msg"])), None)

    return await _wait_for_entry(path, pick, "matching message sent", timeout)


@click.command()
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default=DEFAULT_DIR, show_default=True,
              metavar="DIR",
              help="Write the capture and the agent's log in this folder (made if missing); each run adds "
                   "a fresh capture, earlier ones are kept.")
@click.option("--color/--no-color", default=None, help="Colour the narration (default: when stdout is a terminal).")
def demo(workdir: str, color: bool | None) -> None:
    """Show the bridge at work, with nothing else installed.

    A scripted client that advertises the new prompt-suggestions capability talks to a
    bundled legacy agent (legacy suggestion channel only, no systemPrompt capability)
    through a real `acp-bridge run`. You see the legacy suggestion arrive, the standard
    update the client receives instead, the withdrawal on the next prompt, the system
    prompt injected, and the commands that read the capture, which is kept in
    ./acp-bridge-demo/ (or the folder `--dir` names).
    """
    narrator = Narrator(sys.stdout.isatty() if color is None else color)
    folder = Path(workdir)
    try:  # refused before anything starts: a folder that cannot be made or written in
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "permission denied")
    except OSError as exc:
        from acp_bridge.commands.captures import fail

        fail(f"the demo cannot write in {workdir}: {exc.strerror or exc}; choose a folder with --dir DIR", 1)
    raise SystemExit(trio.run(run_demo, folder, narrator))
