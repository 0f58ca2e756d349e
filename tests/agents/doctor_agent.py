"""A stand-in agent for `doctor`'s tests: stdlib only, its fault chosen by argv.

    doctor_agent.py banner     print a banner on stdout, then answer as an ACP v1 agent
    doctor_agent.py reject     answer initialize with an error (an unsupported version)
    doctor_agent.py not-acp    answer initialize with JSON that is not JSON-RPC 2.0
    doctor_agent.py exit       write why on stderr and exit 3 at once
    doctor_agent.py commands   offer session/close, and send its commands 0.2 s after session/new
                               (as claude-agent-acp does, once it has loaded them)
    doctor_agent.py wrong-id   answer initialize with an id of 100 digits, not the request's
    doctor_agent.py long-line  answer initialize in a line of 17 MiB (a huge agentInfo)
    doctor_agent.py deaf PID   write its pid to the file PID, ignore SIGTERM, answer as an ACP v1
                               agent, and keep running after the end of stdin (only SIGKILL stops it)

Answering: initialize gets protocol version 1 and agentInfo, session/new a session id;
it exits at the end of stdin.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

WRITING = threading.Lock()
COMMANDS = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
    "sessionUpdate": "available_commands_update",
    "availableCommands": [{"name": "compact", "description": "compact the context", "input": None}]}}}


def write(msg: dict[str, object]) -> None:
    with WRITING:
        print(json.dumps(msg), flush=True)


def answer(msg: dict[str, object], mode: str) -> dict[str, object] | None:
    method, id_ = msg.get("method"), msg.get("id")
    if method == "initialize":
        if mode == "reject":
            return {"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": "unsupported protocol version"}}
        if mode == "not-acp":
            return {"id": id_, "result": {"protocolVersion": 1}}
        if mode == "wrong-id":
            return {"jsonrpc": "2.0", "id": int("1" * 100), "result": {"protocolVersion": 1}}
        if mode == "long-line":
            return {"jsonrpc": "2.0", "id": id_, "result": {"protocolVersion": 1, "agentInfo": {
                "name": "x" * (17 * 1024 * 1024), "version": "0"}}}
        capabilities: dict[str, object] = {"sessionCapabilities": {"close": {}}} if mode == "commands" else {}
        return {"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": 1, "agentCapabilities": capabilities,
            "agentInfo": {"name": "doctor-agent", "version": "0"}}}
    if method == "session/new":
        if mode == "commands":
            threading.Timer(0.2, write, (COMMANDS,)).start()
        return {"jsonrpc": "2.0", "id": id_, "result": {"sessionId": "s1"}}
    if method == "session/close":
        return {"jsonrpc": "2.0", "id": id_, "result": {}}
    return None


def main(mode: str) -> int:
    if mode == "exit":
        sys.stderr.write("fatal: no API key set (DOCTOR_AGENT_KEY)\n")
        return 3
    if mode == "deaf":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(sys.argv[2], "w") as pidfile:
            pidfile.write(str(os.getpid()))
    if mode == "banner":
        print("Welcome to doctor-agent 0 -- type /help", flush=True)
    for line in sys.stdin:
        reply = answer(json.loads(line), mode)
        if reply is not None:
            write(reply)
    while mode == "deaf":
        time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
