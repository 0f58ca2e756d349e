"""A scripted ACP agent for scenario tests: stdlib only, driven by a JSON script file.

    python -u scripted_agent.py SCRIPT.json

Every line the agent receives is appended, as it came, to `script["log"]` (if set), so a
test can assert exactly what the agent was sent. Script keys:

    "log":      path of the file that records received lines
    "on":       {method: reaction}; a reaction is a list of steps, run in order:
                  {"send": MSG}          write MSG (an object) as one line
                  {"send": MSG, "times": N}  ... N times (a long run of output)
                  {"raw": "TEXT"}        write TEXT as it is (add your own "\\n")
                  {"raw": "TEXT", "times": N}  ... N times (one long line, in pieces)
                  {"respond": RESULT}    answer the request with {"result": RESULT}
                  {"error": ERROR}       answer the request with {"error": ERROR}
                  {"sleep": SECONDS}     pause (a slow agent; never a way to order events)
                  {"exit": CODE}         exit at once with CODE
                  {"stderr": "TEXT"}     write TEXT and a newline to stderr
                In MSG, RESULT and ERROR the string "$sessionId" is replaced by the
                request's params.sessionId (or by "sess_1" if it has none).
    "default":  reaction for requests whose method is not in "on" (default: respond {}).
    "start":    steps run before reading anything.
    "eof":      steps run at stdin EOF (then the agent exits 0).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def substitute(value: Any, session_id: str) -> Any:
    if value == "$sessionId":
        return session_id
    if isinstance(value, dict):
        return {k: substitute(v, session_id) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, session_id) for v in value]
    return value


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def run_steps(steps: list[dict[str, Any]], request: dict[str, Any] | None) -> None:
    params = (request or {}).get("params") or {}
    session_id = params.get("sessionId", "sess_1") if isinstance(params, dict) else "sess_1"
    for step in steps:
        if "send" in step:
            line = json.dumps(substitute(step["send"], session_id)) + "\n"
            for _ in range(step.get("times", 1)):
                write(line)
        elif "raw" in step:
            for _ in range(step.get("times", 1)):
                write(step["raw"])
        elif "respond" in step and request is not None:
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": substitute(step["respond"], session_id)}
            write(json.dumps(reply) + "\n")
        elif "error" in step and request is not None:
            reply = {"jsonrpc": "2.0", "id": request["id"], "error": substitute(step["error"], session_id)}
            write(json.dumps(reply) + "\n")
        elif "sleep" in step:
            time.sleep(step["sleep"])  # a simulated delay: tests must not rely on it for order
        elif "stderr" in step:
            sys.stderr.write(step["stderr"] + "\n")
            sys.stderr.flush()
        elif "exit" in step:
            sys.stdout.flush()
            sys.exit(step["exit"])


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        script = json.load(f)
    log = open(script["log"], "ab") if script.get("log") else None
    on = script.get("on", {})
    default = script.get("default", [{"respond": {}}])
    run_steps(script.get("start", []), None)
    for line in sys.stdin.buffer:
        if log is not None:
            log.write(line)
            log.flush()
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "method" not in msg:
            continue
        steps = on.get(msg["method"])
        if "id" in msg:
            run_steps(default if steps is None else steps, msg)
        elif steps is not None:
            run_steps(steps, msg)
    run_steps(script.get("eof", []), None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
