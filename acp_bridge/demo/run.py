"""The scripted demo client: a new ACP client talking to the bundled legacy agent through a
real `acp-bridge run` process, narrating what each side sent and received.

Owns: the demo script and its narration. Must never: need anything but this package.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson
import trio

from acp_bridge.core import LineSplitter

SYSTEM_PROMPT = "Answer in one sentence. Never touch files outside src/."
TIMEOUT = 20


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
    update = (msg.get("params") or {}).get("update") or {}
    return msg.get("method") == "session/update" and update.get("sessionUpdate") == "prompt_suggestions_update"


class Narrator:
    def __init__(self, color: bool) -> None:
        self.color = color

    def say(self, who: str, text: str, detail: Any = None) -> None:
        colors = {"client": "cyan", "agent": "magenta", "bridge": "yellow", "": "white"}
        label = click.style(f"{who:>7}", fg=colors.get(who, "white"), bold=True) if self.color else f"{who:>7}"
        click.echo(f"{label}  {text}")
        if detail is not None:
            shown = detail if isinstance(detail, str) else json.dumps(detail)
            click.echo(" " * 9 + (click.style(shown, dim=True) if self.color else shown))

    def heading(self, text: str) -> None:
        click.echo("")
        click.echo(click.style(text, bold=True) if self.color else text)


async def run_demo(workdir: Path, narrator: Narrator) -> int:
    capture = workdir / "capture.jsonl"
    agent_log = workdir / "agent.jsonl"
    command = [
        sys.executable, "-m", "acp_bridge", "run", "--unlock-legacy-agent",
        "--system-prompt", SYSTEM_PROMPT, "--capture", str(capture), "--",
        sys.executable, "-m", "acp_bridge.demo.legacy_agent", "--log", str(agent_log),
    ]
    narrator.heading("acp-bridge demo: a new ACP client in front of a legacy agent")
    narrator.say("", "The bundled agent speaks only the legacy suggestion channel, only to JetBrains AIR,")
    narrator.say("", "and has no systemPrompt capability. The bridge runs as:")
    narrator.say("", "acp-bridge run --unlock-legacy-agent --system-prompt TEXT --capture FILE -- legacy-agent")

    proc = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE)
    client = DemoClient(proc)
    try:
        narrator.heading("1. initialize")
        await client.request("initialize", {
            "protocolVersion": 1, "clientInfo": {"name": "demo-client", "version": "1.0.0"},
            "clientCapabilities": {"session": {"promptSuggestions": {}}}})
        narrator.say("client", "advertised session.promptSuggestions (the new capability), no AIR marker")
        sent_init = agent_received(agent_log, "initialize")
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
        first = agent_received(agent_log, "session/prompt")
        narrator.say("agent", "received the prompt with the system prompt injected in front:",
                     first["params"]["prompt"])
        legacy = agent_sent(agent_log, lambda m: "promptSuggestions" in json.dumps(m))
        narrator.say("agent", "sent a legacy suggestion:", legacy["params"]["update"])
        update = await client.wait_for(is_suggestions)
        narrator.say("client", "received the standard update instead:", update["params"]["update"])

        narrator.heading("4. the next prompt")
        await client.request("session/prompt", {"sessionId": session_id,
                                                "prompt": [{"type": "text", "text": "Now run the test suite"}]})
        withdrawal = await client.wait_for(is_suggestions)
        narrator.say("client", "received the withdrawal the moment it sent its next prompt:",
                     withdrawal["params"]["update"])
        later = agent_received(agent_log, "session/prompt", nth=1)
        narrator.say("agent", "received the second prompt unchanged (injection is once per session):",
                     later["params"]["prompt"])
    finally:
        await proc.stdin.aclose() if proc.stdin else None
        with trio.move_on_after(TIMEOUT):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    assert proc.stderr is not None
    log = (await proc.stderr.receive_some(65536)).decode("utf-8", "replace").strip()
    if log:
        narrator.heading("The bridge's log (stderr)")
        for entry in log.splitlines():
            narrator.say("bridge", entry.removeprefix("acp-bridge: "))

    narrator.heading("5. the capture")
    narrator.say("bridge", f"every line both ways was recorded in {capture}")
    narrator.say("", f"read it with:  acp-bridge show {capture} --detail 3")
    narrator.say("", f"summarise it:  acp-bridge stats {capture}")
    narrator.say("", f"share it:      acp-bridge export {capture} --html demo.html")
    click.echo("")
    return 0 if proc.returncode == 0 else 1


def _agent_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def agent_received(path: Path, method: str, nth: int = 0) -> dict[str, Any]:
    seen: list[dict[str, Any]] = [e["msg"] for e in _agent_log(path)
                                  if e["dir"] == "in" and e["msg"].get("method") == method]
    return seen[nth]


def agent_sent(path: Path, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    found: dict[str, Any] = next(e["msg"] for e in _agent_log(path) if e["dir"] == "out" and match(e["msg"]))
    return found


def main(keep: str | None = None, color: bool | None = None) -> int:
    narrator = Narrator(sys.stdout.isatty() if color is None else color)
    if keep:
        workdir = Path(keep)
        workdir.mkdir(parents=True, exist_ok=True)
        return trio.run(run_demo, workdir, narrator)
    workdir = Path(tempfile.mkdtemp(prefix="acp-bridge-demo-"))
    return trio.run(run_demo, workdir, narrator)
