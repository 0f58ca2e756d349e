"""A folder of real captures for the mcp tests: the golden ones, the demo's, and a capture
holding a message bigger than one answer; beside them what must not be served (a link
leading out, a FIFO, a capture in a subfolder, a `.jsonl` that is no capture)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import TESTS

TOOLS = ["list_captures", "capture_summary", "find_problems", "show_messages", "get_message", "search",
         "diff_captures"]
GOLDEN = ("v1-legacy-air-meta.jsonl", "v1-new-client-unlock.jsonl", "v2-resume-spec-dialect.jsonl")
BIG_TEXT = 1_500_000  # characters of text in big.jsonl's prompt: more than one answer holds
OUTSIDE_MARK = "only-outside-the-folder"


def capture_lines(*records: dict[str, object]) -> bytes:
    return b"".join(orjson.dumps(record) + b"\n" for record in records)


def big_capture() -> bytes:
    """A capture whose second message is a prompt of `BIG_TEXT` characters."""
    prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "big " + "y" * BIG_TEXT}]}}
    base = {"type": "message", "time": 1_000_000.5, "mono": 1.0, "direction": "to-agent", "kind": "request",
            "verdict": "pass", "session": "s", "rules": []}
    small = {"jsonrpc": "2.0", "id": 0, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}
    return capture_lines(
        {"type": "header", "format": 1, "started": "1970-01-12T13:46:40Z", "time": 1_000_000.0, "mono": 0.0,
         "pid": 0},
        {**base, "seq": 1, "method": "session/new", "id": 0, "size": 60, "raw": orjson.dumps(small).decode() + "\n"},
        {**base, "seq": 2, "method": "session/prompt", "id": 1, "size": BIG_TEXT + 100,
         "raw": orjson.dumps(prompt).decode() + "\n"},
        {"type": "end", "records": 2})


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The served folder: demo's capture.jsonl (and its agent.jsonl, a log, no capture), the
    goldens, big.jsonl, live.jsonl (its bridge is this process); a link to a capture outside,
    a FIFO and sub/deep.jsonl not served."""
    root = tmp_path_factory.mktemp("captures")
    subprocess.run([sys.executable, "-m", "acp_bridge", "demo", "--dir", str(root), "--no-color"],
                   check=True, capture_output=True, timeout=60)
    for name in GOLDEN:
        shutil.copy(TESTS / "golden" / name, root / name)
    (root / "big.jsonl").write_bytes(big_capture())
    # a capture whose bridge (this process) still runs: no end record yet
    (root / "live.jsonl").write_bytes(capture_lines(
        {"type": "header", "format": 1, "started": "1970-01-01T00:00:01Z", "time": 1.0, "mono": 0.0,
         "pid": os.getpid()}))
    outside = tmp_path_factory.mktemp("outside") / "secret.jsonl"
    outside.write_bytes(big_capture().replace(b"big ", OUTSIDE_MARK.encode() + b" ", 1))
    (root / "outside.jsonl").symlink_to(outside)
    os.mkfifo(root / "fifo.jsonl")
    (root / "sub").mkdir()
    shutil.copy(outside, root / "sub" / "deep.jsonl")
    return root
