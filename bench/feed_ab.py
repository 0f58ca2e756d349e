"""In-process A/B of the relay and the capture encoder: two source trees, alternated.

    python -m bench.feed_ab [--lines N] [--rounds R] TREE [TREE ...]

End-to-end rows (`python -m bench`) time three processes and two pipes; on a shared 2-core
machine other work moves them by more than most changes do. This times only the Python the
bridge runs per read, in one process per tree (`TREE/.venv/bin/python`, else this
interpreter), with the bridge's collector threshold, alternating the trees each round and
keeping each one's best, since the noise of a shared machine only ever adds time:

- to-client: row 1's chunk notifications, fed 1 MiB at a time with every rule on;
- to-agent: row 3's prompts and responses toward the agent, each read followed by the
  agent's answers to its prompts toward the client (what row 3's answering agent writes);
- to-agent unanswered: the same without the answers (row 3c);
- capture: encoding row 1's forwards into capture records (what row 2 adds), and writing
  them to a file.

Each figure is microseconds per line of the workload.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

# Runs inside the tree under test: only what every tree since the first round has.
PROBE = r'''
import gc, json, os, sys, tempfile, time
from bench.workloads import chunk_line, to_agent_line
from acp_bridge.capture.records import CaptureEncoder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.config import Config, SystemPromptConfig
from acp_bridge.core import Direction, Relay
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.shell.tuning import keep_heap

gc.set_threshold(500_000, 10, 10)
keep_heap()
n = int(sys.argv[1])
MIB = 1 << 20
INIT = (b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,'
        b'"clientCapabilities":{"session":{"promptSuggestions":{}}}}}\n')
INIT_ANSWER = b'{"jsonrpc":"2.0","id":"init","result":{"protocolVersion":1}}\n'


def relay():
    r = Relay(build_rewrites(Config(system_prompt=SystemPromptConfig(text="Follow the style guide."))))
    r.feed(Direction.TO_AGENT, INIT)
    r.feed(Direction.TO_CLIENT, INIT_ANSWER)
    return r


def reads(data):
    return [data[i:i + MIB] for i in range(0, len(data), MIB)]


def answers(reads):
    """Per read, the answers to the prompts whose lines it completes."""
    carry, out = b"", []
    for chunk in reads:
        *lines, carry = (carry + chunk).split(b"\n")
        found = []
        for line in lines:
            if b'"method":"session/prompt"' in line:
                i = line.index(b'"id":') + 5
                found.append(b'{"jsonrpc":"2.0","id":' + line[i:line.index(b",", i)]
                             + b',"result":{"stopReason":"end_turn"}}\n')
        out.append(b"".join(found))
    return out


chunks = reads(b"".join(chunk_line(i) for i in range(n)))
into = reads(b"".join(to_agent_line(i) for i in range(n)))
back = answers(into)
r = relay()
forwards = [r.feed(Direction.TO_CLIENT, c) for c in chunks]
out = {}


def clock(name, run):
    gc.collect()
    start = time.perf_counter()
    run()
    out[name] = (time.perf_counter() - start) / n * 1e6


def to_client():
    r = relay()
    for c in chunks:
        r.feed(Direction.TO_CLIENT, c)


def to_agent():
    r = relay()
    for c, a in zip(into, back):
        r.feed(Direction.TO_AGENT, c)
        r.feed(Direction.TO_CLIENT, a)


def unanswered():
    r = relay()
    for c in into:
        r.feed(Direction.TO_AGENT, c)


def capture():
    encoder = CaptureEncoder(Redactor((), "Follow the style guide."))
    for batch in forwards:
        encoder.encode_batch(1.0, 2.0, batch)


def capture_written():
    encoder = CaptureEncoder(Redactor((), "Follow the style guide."))
    with tempfile.TemporaryFile() as f:
        for batch in forwards:
            f.write(encoder.encode_batch(1.0, 2.0, batch))


clock("to-client", to_client)
clock("to-agent", to_agent)
clock("to-agent unanswered", unanswered)
clock("capture", capture)
clock("capture written", capture_written)
print(json.dumps(out))
'''


def python_of(tree: Path) -> str:
    own = tree / ".venv" / "bin" / "python"
    return str(own) if own.exists() else sys.executable


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.feed_ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best: dict[Path, dict[str, float]] = {tree: {} for tree in args.trees}
    seen: dict[Path, dict[str, list[float]]] = {tree: {} for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            done = subprocess.run([python_of(tree), "-c", PROBE, str(args.lines)], cwd=tree, check=False,
                                  capture_output=True, text=True)
            if done.returncode:  # not a tree of this project, or one it cannot run: its error, in one line
                reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
                print(f"bench.feed_ab: {tree}: {reason}", file=sys.stderr)
                return 2
            result = done.stdout
            for name, value in json.loads(result).items():
                best[tree][name] = min(best[tree].get(name, float("inf")), value)
                seen[tree].setdefault(name, []).append(value)
    names = list(best[args.trees[0]])
    print(f"us per line, best of {args.rounds} rounds (all rounds in brackets), {args.lines} lines")
    print(f"{'workload':22}" + "".join(f"{tree!s:>36}" for tree in args.trees))
    for name in names:
        cells = []
        for tree in args.trees:
            rounds = ", ".join(f"{v:.2f}" for v in seen[tree][name])
            cells.append(f"{best[tree][name]:.3f} [{rounds}]")
        print(f"{name:22}" + "".join(f"{cell:>36}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
