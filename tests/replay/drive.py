"""Test helpers: a client that plays a capture's client side against a replay or a bridge, and
capture records compared without what a second recording may change (times)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from tests.cli_helpers import InProcessBridge
from tests.conftest import BridgeProcess
from tests.replay.hostile import Replay

GOLDEN = Path(__file__).parent.parent / "golden"
PY = [sys.executable, "-m", "acp_bridge"]
GOLDENS = sorted(path.stem for path in GOLDEN.glob("*.jsonl"))


def records(path: Path) -> list[dict[str, Any]]:
    """The message records of a capture."""
    out = []
    for line in path.read_bytes().splitlines():
        record = json.loads(line)
        if record["type"] == "message":
            out.append(record)
    return out


def sent(record: dict[str, Any]) -> str | None:
    """What went out for a record (None: dropped)."""
    line: str | None = record["out"] if "out" in record else record["raw"]
    return line


def received_by_client(path: Path) -> list[str]:
    """The lines the client received, in order, as the capture recorded them."""
    return [line for r in records(path) if r["direction"] == "to-client" and (line := sent(r)) is not None]


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A message record without what a second recording of the same session changes: times,
    and the sizes of a line whose masked values ("<redacted>") were sent as masked."""
    changes = ("time", "mono", "latency", *(("size", "out_size") if "redacted" in record else ()))
    return {k: v for k, v in record.items() if k not in changes}


class CaptureClient:
    """Plays the client side of a capture (the lines the client sent, as it sent them): each
    request waits for its answer, and an agent request is answered, when it arrives, with the
    client's recorded answer."""

    def __init__(self, proc: BridgeProcess | InProcessBridge | Replay) -> None:
        self.proc = proc
        self.buffer = b""
        self.lines: list[bytes] = []

    async def line(self) -> bytes:
        assert self.proc.proc.stdout is not None
        while b"\n" not in self.buffer:
            chunk = await self.proc.proc.stdout.receive_some(1 << 20)
            if not chunk:
                raise AssertionError(f"EOF; received so far: {self.lines[-5:]!r}")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        self.lines.append(line + b"\n")
        return line + b"\n"

    async def play(self, capture: Path) -> list[bytes]:
        client = [r for r in records(capture) if r["direction"] == "to-agent" and r["verdict"] != "emit"]
        answers: dict[str, list[dict[str, Any]]] = {}
        for r in client:
            if r["kind"] == "response":
                answers.setdefault(json.dumps(r["id"]), []).append(r)
        done: set[int] = set()
        for record in client:
            if record["seq"] in done:
                continue
            await self.proc.send(record["raw"].encode())
            if record["kind"] != "request":
                continue
            while True:
                msg = orjson.loads(await self.line())
                if "method" in msg and "id" in msg:  # the agent asks: the recorded answer
                    waiting = [a for a in answers.get(json.dumps(msg["id"]), []) if a["seq"] not in done]
                    if waiting:
                        done.add(waiting[0]["seq"])
                        await self.proc.send(waiting[0]["raw"].encode())
                elif "method" not in msg and msg.get("id") == record["id"]:
                    break
        await self.proc.close_stdin()
        rest = self.buffer + await self.proc.read_all()  # read_all holds only what it read itself
        return self.lines + [line + b"\n" for line in rest.split(b"\n") if line]


# -- what a client received, from a capture (for the SDK tests) -------------------------------


def recorded_updates(capture: Path) -> list[tuple[str, Any]]:
    """(sessionId, update) of every session/update the recorded client received."""
    out = []
    for record in records(capture):
        line = sent(record) if record["direction"] == "to-client" else None
        if line is not None and record["method"] == "session/update":
            params = json.loads(line)["params"]
            out.append((params["sessionId"], params["update"]))
    return out


def stop_reasons(capture: Path) -> list[str]:
    return [json.loads(sent(r) or "{}")["result"]["stopReason"] for r in records(capture)
            if r["direction"] == "to-client" and r["kind"] == "response" and r["method"] == "session/prompt"]


def suggestions(updates: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(sid, u) for sid, u in updates if u["sessionUpdate"] == "prompt_suggestions_update"]


def replayed(capture: Path, wire: Path) -> list[str]:
    """The replay of `capture` behind a bridge that changes nothing and records to `wire`."""
    return [*PY, "run", "--no-suggestions", "--capture", str(wire), "--", *PY, "replay", str(capture)]


def demo_capture(tmp_path: Path) -> Path:
    """Run `acp-bridge demo`; the capture it recorded."""
    done = subprocess.run([*PY, "demo", "--dir", str(tmp_path / "demo"), "--no-color"],
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return tmp_path / "demo" / "capture.jsonl"


def rec(seq: int, direction: str, kind: str, method: str | None, msg: dict[str, Any], session: Any = None,
        **extra: Any) -> dict[str, Any]:
    return {"type": "message", "seq": seq, "direction": direction, "kind": kind, "method": method,
            "id": msg.get("id"), "session": session, "raw": orjson.dumps(msg).decode() + "\n", **extra}


def permission(id_: Any, options: list[dict[str, Any]]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "session/request_permission",
            "params": {"sessionId": "s", "options": options}}
