"""An agent that misbehaves on cue, for the bridge's fuzz test: stdlib only.

    python -u chaos_agent.py PLAN.json

PLAN: {"log": PATH, "go": PATH, "steps": [STEP, ...]}: step k is what the agent does after
reading its k-th line (a line that is no request, or no more steps, gets "answer"). Every
byte the agent writes to stdout is also appended to "log", so a test can compare. With
"go", the agent acts on nothing before that file exists (the test creates it once it has
written all its input, so that everything the client sent is there to be read). Steps:

    "answer"        answer each request of the line (a batch gets a batch answer)
    "chatter"       write a notification, then answer
    "long"          write a notification of 1.5 MiB, then answer
    "stall"         sleep 50 ms, then answer
    "ignore"        answer nothing
    "torn"          write half a notification and exit 3
    "die"           exit 4 at once
    "close"         close stdout and sleep until killed

At stdin EOF the agent exits 0.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time


def main() -> int:
    plan = json.loads(open(sys.argv[1]).read())
    log = open(plan["log"], "ab", buffering=0)
    steps = plan["steps"]

    def out(data: bytes) -> None:
        log.write(data)
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    def note(text: str) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                                         "content": {"type": "text", "text": text}}}}).encode() + b"\n"

    # Lines are read as they come (so the client is never held back by this agent), and
    # acted on once "go" exists.
    lines: queue.Queue[bytes] = queue.Queue()
    def read_all() -> None:
        for line in iter(sys.stdin.buffer.readline, b""):
            lines.put(line)
        lines.put(b"")

    threading.Thread(target=read_all, daemon=True).start()
    go = plan.get("go")
    while go is not None and not os.path.exists(go):
        time.sleep(0.01)  # polling a condition the test sets
    for k, line in enumerate(iter(lines.get, b"")):
        step = steps[k] if k < len(steps) else "answer"
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if step == "die":
            return 4
        if step == "torn":
            out(note("half")[:25])
            return 3
        if step == "close":
            os.close(1)
            while True:
                time.sleep(1)
        if step == "ignore":
            continue
        if step == "chatter":
            out(note("thinking é \\u00e9"))
        elif step == "long":
            out(note("x" * (3 << 19)))
        elif step == "stall":
            time.sleep(0.05)
        requests = msg if isinstance(msg, list) else [msg]
        answers = [{"jsonrpc": "2.0", "id": r["id"], "result": {"ok": True}}
                   for r in requests if isinstance(r, dict) and "id" in r and "method" in r]
        if answers:
            out(json.dumps(answers if isinstance(msg, list) else answers[0]).encode() + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
