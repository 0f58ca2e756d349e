"""A stand-in agent for shell tests: stdlib only, behaviour chosen by argv.

    fake_agent.py echo                 copy stdin to stdout byte for byte, then exit 0
    fake_agent.py echo --exit N        ... then exit N
    fake_agent.py stderr TEXT          write TEXT to stderr, then echo
    fake_agent.py signal N             echo, then kill itself with signal N at EOF
    fake_agent.py ignore-term          echo; ignore SIGTERM and stdin EOF, sleep forever
    fake_agent.py ignore-eof           echo; at stdin EOF keep running until SIGTERM
    fake_agent.py huge N               write one line of N bytes (plus newline), then exit
    fake_agent.py banner TEXT          print TEXT on stdout first, then echo
    fake_agent.py crash-after K        echo K lines, then write half a line and exit 3
    fake_agent.py answer               answer every request with {"result": {}}
    fake_agent.py flood N FILE         write N lines of 1 KiB, noting progress in FILE
    fake_agent.py flood-watch N FILE   the same, but FILE reads "B blocked" (B bytes written)
                                       while stdout is full, else B

With FAKE_AGENT_PIDFILE set, the agent first writes its pid there.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time


def echo() -> None:
    out = sys.stdout.buffer
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            return
        out.write(chunk)
        out.flush()


def main(argv: list[str]) -> int:
    if os.environ.get("FAKE_AGENT_PIDFILE"):
        with open(os.environ["FAKE_AGENT_PIDFILE"], "w") as f:
            f.write(str(os.getpid()))
    mode = argv[1] if len(argv) > 1 else "echo"
    if mode == "echo":
        echo()
        return int(argv[3]) if len(argv) > 3 and argv[2] == "--exit" else 0
    if mode in ("stderr", "banner"):  # a line on stderr, or (wrongly) on stdout, then echo
        stream = sys.stderr if mode == "stderr" else sys.stdout
        stream.write(argv[2] + "\n")
        stream.flush()
        echo()
        return 0
    if mode == "signal":
        echo()
        os.kill(os.getpid(), int(argv[2]))
        time.sleep(5)  # a deadline, not an ordering: the signal should end it before this does
        return 1
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        echo()
        while True:
            time.sleep(1)  # idle until killed: what this mode is for
    if mode == "ignore-eof":
        echo()
        while True:
            time.sleep(1)  # idle until SIGTERM: what this mode is for
    if mode == "huge":
        size = int(argv[2])
        block = b"x" * 65536
        out = sys.stdout.buffer
        while size > 0:
            out.write(block[:size])
            size -= min(size, len(block))
        out.write(b"\n")
        out.flush()
        return 0
    if mode == "crash-after":
        count = int(argv[2])
        for _ in range(count):
            line = sys.stdin.buffer.readline()
            if not line:
                break
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        sys.stdout.buffer.write(b'{"jsonrpc":"2.0","met')
        sys.stdout.buffer.flush()
        return 3
    if mode == "flood":
        # Write LINES lines of 1 KiB, noting in PROGRESS how many went out so far.
        count, progress = int(argv[2]), argv[3]
        line = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"y" * 980 + b'"}}\n'
        for i in range(count):
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            if i % 256 == 0:
                with open(progress, "w") as f:
                    f.write(str(i))
        with open(progress, "w") as f:
            f.write(str(count))
        return 0
    if mode == "flood-watch":
        # As "flood", but PROGRESS tells whether the agent is held back: while a write would
        # block (stdout is non-blocking), it reads "B blocked", B the bytes written so far.
        count, progress = int(argv[2]), argv[3]
        line = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"y" * 980 + b'"}}\n'
        os.set_blocking(1, False)
        written = 0
        for _ in range(count):
            rest = memoryview(line)
            while rest:
                try:
                    n = os.write(1, rest)
                except BlockingIOError:
                    with open(progress, "w") as f:
                        f.write(f"{written} blocked")
                    select.select([], [1], [])
                    with open(progress, "w") as f:
                        f.write(str(written))
                    continue
                rest, written = rest[n:], written + n
        with open(progress, "w") as f:
            f.write(str(written))
        return 0
    if mode == "answer":
        for line in sys.stdin.buffer:
            msg = json.loads(line)
            if "id" in msg and "method" in msg:
                reply = {"jsonrpc": "2.0", "id": msg["id"], "result": {}}
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()
        return 0
    sys.stderr.write(f"fake_agent: unknown mode {mode!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
