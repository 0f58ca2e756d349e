"""A stand-in agent for `doctor`'s tests: stdlib only, its fault chosen by argv.

    doctor_agent.py banner     print a banner on stdout, then answer as an ACP v1 agent
    doctor_agent.py reject     answer initialize with an error (an unsupported version)
    doctor_agent.py not-acp    answer initialize with JSON that is not JSON-RPC 2.0
    doctor_agent.py exit       write why on stderr and exit 3 at once

Answering: initialize gets protocol version 1 and agentInfo, session/new a session id;
it exits at the end of stdin.
"""

from __future__ import annotations

import json
import sys


def answer(msg: dict[str, object], mode: str) -> dict[str, object] | None:
    method, id_ = msg.get("method"), msg.get("id")
    if method == "initialize":
        if mode == "reject":
            return {"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": "unsupported protocol version"}}
        if mode == "not-acp":
            return {"id": id_, "result": {"protocolVersion": 1}}
        return {"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "doctor-agent", "version": "0"}}}
    if method == "session/new":
        return {"jsonrpc": "2.0", "id": id_, "result": {"sessionId": "s1"}}
    return None


def main(mode: str) -> int:
    if mode == "exit":
        sys.stderr.write("fatal: no API key set (DOCTOR_AGENT_KEY)\n")
        return 3
    if mode == "banner":
        print("Welcome to doctor-agent 0 -- type /help", flush=True)
    for line in sys.stdin:
        reply = answer(json.loads(line), mode)
        if reply is not None:
            print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
