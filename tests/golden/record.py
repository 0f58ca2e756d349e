"""Record the golden captures through the real bridge (see README.md beside this file).

    python -m tests.golden.record            # all of them, written beside this file
    python -m tests.golden.record NAME ...   # only these

Each case is a scripted agent (tests/agents/scripted_agent.py, its script in
`agents/NAME.json`), the bridge options it was recorded with, and a scripted client: each
request is sent once the previous one has been answered (the agent's requests to the client
answered as they come), and `after` more lines are read before going on, so that what the
agent sends after an answer is recorded before the client's next request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent
ROOT = GOLDEN.parent.parent
SCRIPTED_AGENT = "tests/agents/scripted_agent.py"
CAPTURE_CONFIG = "tests/golden/capture.toml"  # the system prompt in clear, so the goldens show it

Case = dict[str, Any]


def init_v1(caps: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": caps,
                       "clientInfo": {"name": "golden-client", "version": "1.0.0"}}}


def request(id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def update(session: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": body}}


def chunk(session: str, text: str) -> dict[str, Any]:
    return update(session, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})


def legacy_suggestions(session: str, *texts: str) -> dict[str, Any]:
    return update(session, {"sessionUpdate": "session_info_update",
                            "_meta": {"promptSuggestions": {"suggestions": [{"text": t} for t in texts]}}})


def prompt(id_: int, session: str, text: str) -> dict[str, Any]:
    return request(id_, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]})


PERMISSION = {"outcome": {"outcome": "selected", "optionId": "allow"}}

CASES: dict[str, Case] = {
    # A legacy agent (the claude-agent-acp `_meta` dialect) and a JetBrains AIR client.
    "v1-legacy-air-meta": {
        "options": ["-c", CAPTURE_CONFIG, "--system-prompt", "Follow the team style guide."],
        "agent": {
            "on": {
                "initialize": [{"respond": {
                    "protocolVersion": 1,
                    "agentInfo": {"name": "@zed-industries/claude-agent-acp", "version": "0.23.1"},
                    "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}},
                    "authMethods": []}}],
                "session/new": [{"respond": {"sessionId": "sess_air_1"}}],
                "session/prompt": [
                    {"send": chunk("$sessionId", "Reading parser.py")},
                    {"send": request(100, "session/request_permission", {
                        "sessionId": "sess_air_1", "toolCall": {"toolCallId": "call_1", "title": "Run tests"},
                        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]})},
                    {"send": chunk("$sessionId", "The parser splits lines.")},
                    {"respond": {"stopReason": "end_turn"}},
                    {"send": legacy_suggestions("$sessionId", "Now run the test suite")},
                ],
            },
        },
        "client": [
            {"send": init_v1({"fs": {"readTextFile": True}, "_meta": {"jetbrains": {"air": {
                "version": 1, "capabilities": ["diffPatch"]}}}})},
            {"send": request(1, "session/new", {"cwd": "/work/project", "mcpServers": [
                {"name": "db", "command": "db-mcp", "args": [], "env": [{"name": "DB_TOKEN", "value": "s3cret"}]}]})},
            {"send": prompt(2, "sess_air_1", "Explain the parser"), "after": 1},
            {"send": prompt(3, "sess_air_1", "Now run the test suite"), "after": 1},
        ],
        "answers": {"session/request_permission": PERMISSION},
    },
    # A new client in front of a legacy agent, unlocked; the system prompt in the first prompt.
    "v1-new-client-unlock": {
        "options": ["-c", CAPTURE_CONFIG, "--unlock-legacy-agent", "--system-prompt", "Answer in one sentence."],
        "agent": {
            "on": {
                "initialize": [{"respond": {
                    "protocolVersion": 1, "agentInfo": {"name": "legacy-agent", "version": "2.6.0"},
                    "agentCapabilities": {"promptCapabilities": {}}, "authMethods": []}}],
                "session/new": [{"respond": {"sessionId": "sess_new_1"}}],
                "session/prompt": [
                    {"send": request(7, "fs/read_text_file", {"sessionId": "sess_new_1", "path": "/work/project/a.py"})},
                    {"send": chunk("$sessionId", "a.py defines one function.")},
                    {"respond": {"stopReason": "end_turn"}},
                    {"send": legacy_suggestions("$sessionId", "Add a test", "  ")},
                ],
                "session/cancel": [],
            },
        },
        "client": [
            {"send": init_v1({"fs": {"readTextFile": True}, "session": {"promptSuggestions": {}}})},
            {"send": request(1, "session/new", {"cwd": "/work/project", "mcpServers": []})},
            {"send": prompt(2, "sess_new_1", "What is in a.py?"), "after": 1},
            {"send": prompt(3, "sess_new_1", "Add a test"), "after": 1},
            {"send": {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess_new_1"}}},
        ],
        "answers": {"fs/read_text_file": {"content": "def f():\n    return 1\n"}},
    },
    # ACP v2: the spec's systemPrompt field (override), new-form suggestions, resume with replay.
    "v2-resume-spec-dialect": {
        "options": ["-c", CAPTURE_CONFIG, "--system-prompt", "Follow the team style guide.",
                    "--system-prompt-mode", "override"],
        "agent": {
            "on": {
                "initialize": [{"respond": {
                    "protocolVersion": 2, "info": {"name": "v2-agent", "version": "1.0.0"},
                    "capabilities": {"session": {"prompt": {"image": {}},
                                                 "systemPrompt": {"mode": {"override": {}}}}},
                    "authMethods": []}}],
                "session/new": [{"respond": {"sessionId": "sess_v2_1"}}],
                "session/prompt": [
                    {"respond": {"messageId": "msg_user_1"}},
                    {"send": update("$sessionId", {"sessionUpdate": "agent_message_chunk", "messageId": "msg_a_1",
                                                   "content": {"type": "text", "text": "Looking at parser.py"}})},
                    {"send": update("$sessionId", {"sessionUpdate": "prompt_suggestions_update", "suggestions": [
                        {"prompt": [{"type": "text", "text": "Run the tests"}]},
                        {"prompt": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}]})},
                ],
                "session/resume": [
                    {"send": update("$sessionId", {"sessionUpdate": "user_message", "messageId": "msg_user_1",
                                                   "content": [{"type": "text", "text": "Fix parser.py"}]})},
                    {"send": update("$sessionId", {"sessionUpdate": "prompt_suggestions_update", "suggestions": [
                        {"prompt": [{"type": "text", "text": "Stale"}]}]})},
                    {"respond": {"configOptions": []}},
                ],
            },
        },
        "client": [
            {"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": 2, "info": {"name": "golden-client", "version": "1.0.0"},
                "capabilities": {"session": {"promptSuggestions": {}}}}}},
            {"send": request(1, "session/new", {"cwd": "/work/project"})},
            {"send": prompt(2, "sess_v2_1", "Fix parser.py"), "after": 2},
            {"send": request(3, "session/resume", {"sessionId": "sess_v2_1", "cwd": "/work/project",
                                                    "replayFrom": {"type": "start"}})},
        ],
        "answers": {},
    },
}


class Client:
    """The scripted client: reads the bridge's stdout line by line, answering the agent's requests."""

    def __init__(self, proc: subprocess.Popen[bytes], answers: dict[str, Any]) -> None:
        self.proc, self.answers = proc, answers

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the bridge closed its stdout early")
        msg: dict[str, Any] = json.loads(line)
        if "method" in msg and "id" in msg:  # the agent asks the client: answer at once
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": self.answers[msg["method"]]})
        return msg

    def step(self, step: dict[str, Any]) -> None:
        msg = step["send"]
        self.send(msg)
        if "id" in msg:
            while not ((got := self.read()).get("id") == msg["id"] and "method" not in got):
                pass
        for _ in range(step.get("after", 0)):
            self.read()


def record(name: str, case: Case, out: Path) -> None:
    """Run the case through `acp-bridge run --capture OUT`, from the repository root."""
    script = GOLDEN / "agents" / f"{name}.json"
    script.parent.mkdir(exist_ok=True)
    script.write_text(json.dumps(case["agent"], indent=2) + "\n", encoding="utf-8")
    if out.exists():
        out.unlink()
    command = [sys.executable, "-m", "acp_bridge", "run", "--capture", os.path.relpath(out, ROOT),
               *case["options"], "--", "python3", "-u", SCRIPTED_AGENT, os.path.relpath(script, ROOT)]
    proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        client = Client(proc, case["answers"])
        for step in case["client"]:
            client.step(step)
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.stdout is not None
        proc.stdout.read()
        if proc.wait(timeout=30) != 0:
            raise RuntimeError(f"{name}: the bridge exited with status {proc.returncode}")
    finally:
        if proc.poll() is None:
            proc.kill()


def main(names: list[str]) -> int:
    for name in names or list(CASES):
        record(name, CASES[name], GOLDEN / f"{name}.jsonl")
        print(f"recorded {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
