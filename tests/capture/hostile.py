"""Hostile captures for the servers (`ui`, `mcp`): secrets in clear, made of the export's own
samples (`IN_CLEAR` and `UNMASKABLE` of secrets.py), which every server of
captures must serve masked exactly as the export's page shows them; one huge line; and how to
measure a server's peak memory."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson

from acp_bridge.capture.html_rows import RowBuilder
from acp_bridge.capture.reader import record_bytes
from acp_bridge.capture.redaction import Redactor
from acp_bridge.capture.summary import utc_clock
from acp_bridge.core.protocol import Json
from tests.capture.samples import HEADER, record
from tests.capture.secrets import IN_CLEAR, SECRET, UNMASKABLE

SECRETS = (b"hunter2", SECRET.encode())


@dataclass(frozen=True)
class Hostile:
    name: str
    given: list[Json]  # the message records as the capture holds them
    shown: list[Json]  # as the export's page masks them


def _capture(folder: Path, name: str, pointers: tuple[str, ...], given: list[Json]) -> Hostile:
    header = {**HEADER, "redact": list(pointers)}
    (folder / name).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in (header, *given)))
    builder = RowBuilder(Redactor(pointers), utc_clock)
    return Hostile(name, given, [builder.redact(r) for r in given])


def hostile_captures(folder: Path) -> list[Hostile]:
    """One capture per `IN_CLEAR` case (each with its header's pointers), and one holding
    every `UNMASKABLE` line, written into `folder`."""
    made = []
    for n, case in enumerate(IN_CLEAR):
        pointers, msg, raw = cast("tuple[tuple[str, ...], Any, str | None]", case.values[:3])
        given: dict[str, Any] = record(1, msg, "to-agent")
        if raw is not None:
            given["raw"] = raw
        made.append(_capture(folder, f"in-clear-{n}.jsonl", pointers, [given]))
    lines = []
    for seq, case in enumerate(UNMASKABLE, 1):
        line = cast(bytes, case.values[0])
        lines.append(record(seq, {"jsonrpc": "2.0", "id": seq, "method": "authenticate"}, "to-agent"))
        try:
            lines[-1]["raw"] = line.decode("utf-8")
        except UnicodeDecodeError:
            del lines[-1]["raw"]
            lines[-1]["raw_b64"] = base64.b64encode(line).decode()
    made.append(_capture(folder, "unmaskable.jsonl", (), lines))
    return made


def holds_a_secret(served: Any) -> bool:
    """Is a secret in what was served: any text in it, a record's raw or out, base64 or not."""
    if isinstance(served, dict):
        return any(holds_a_secret(record_bytes(served, key)) for key in ("raw", "out")) or any(
            holds_a_secret(value) for value in served.values())
    if isinstance(served, list):
        return any(holds_a_secret(value) for value in served)
    data = served.encode("utf-8", "surrogatepass") if isinstance(served, str) else served
    return isinstance(data, bytes) and any(secret in data for secret in SECRETS)


def one_huge_line(path: Path, size: int) -> None:
    """A capture whose first message's record is one line of `size` bytes and more (its raw a
    prompt of `size` x's), between two small ones (seq 2 answers it, seq 3 is a prompt)."""
    raw = '{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":"'
    with path.open("wb") as file:
        file.write(orjson.dumps(HEADER) + b"\n")
        file.write(orjson.dumps(record(1, {"jsonrpc": "2.0", "id": 1, "method": "session/prompt"}, "to-agent",
                                       raw=raw + "x" * size + '"}}\n')) + b"\n")
        for seq, msg in ((2, {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}),
                         (3, {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "s"}})):
            file.write(orjson.dumps(record(seq, msg, "to-client" if seq == 2 else "to-agent")) + b"\n")


# Linux keeps the high-water mark of the memory a process had before `exec` (see
# tests/capture/test_reader.py, PEAK_OF): a small Python starts the server and writes its
# peak, in KiB, to the file named first; SIGTERM to it is passed on to the server.
PEAK_OF_SERVER = ("import os, signal, subprocess, sys\n"
                  "child = subprocess.Popen(sys.argv[2:])\n"
                  "signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))\n"
                  "_, status, usage = os.wait4(child.pid, 0)\n"
                  "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
                  "sys.exit(os.waitstatus_to_exitcode(status) % 256)\n")
