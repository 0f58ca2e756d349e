"""The bridge stopping itself, through the real CLI: a required capture that can no longer be
written, a rule that fails under --strict (here: its result cannot be written back). Either
way the exit status is 1 and every client request in flight is answered first, as when the
agent dies (bridge-rules 5); and where the capture went when its path was taken. Runs that
go on (fail open, the fresh capture name) run `run` in this process with a real agent
(tests/cli_helpers.py); `replay` runs through the click group in this process."""

from __future__ import annotations

import json
import resource
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli_helpers import run_cli_in_process
from tests.commands.scripted_run import AGENT_WITH_CAP, TEXT, V1_INIT, V1_NEW, Client, bridge
from tests.conftest import agent_cmd, invoke, line

PROMPT = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
          "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}}
BIG = "x" * 65536  # a line whose record cannot fit under the capture's size limit
FILE_LIMIT = 16384  # bytes the bridge may write to a file (RLIMIT_FSIZE): header and a few records
# Nested past the 254 levels orjson writes (and within the 1,024 it reads, and Python's json).
DEEP = {"deep": orjson.loads(b"[" * 600 + b"]" * 600)}


def stopped(why: str, id_: int) -> bytes:
    return line({"jsonrpc": "2.0", "id": id_, "error": {
        "code": -32603, "message": f"acp-bridge stopped before the agent answered: {why}"}})


def limit_file_size() -> None:
    """In the bridge's process: writes past FILE_LIMIT bytes fail with EFBIG ("File too
    large"; Python ignores SIGXFSZ), as on a full disk, while the pipes are unaffected."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def running(args: list[str], script: dict[str, Any], tmp_path: Path, file_limit: bool = False,
            process: bool = True) -> AbstractAsyncContextManager[Client]:
    """The bridge driven by the test as the client (`bridge`): the real CLI process, its file
    size limited when asked, or, where it goes on and its exit is not the subject, `run` in
    this process (tests/cli_helpers.py)."""
    return bridge(args, script, tmp_path, preexec_fn=limit_file_size if file_limit else None, timeout=30,
                  process=process)


def required_capture(tmp_path: Path) -> list[str]:
    config = tmp_path / "required.toml"
    config.write_text(f'[capture]\npath = "{tmp_path / "c.jsonl"}"\nrequired = true\n', encoding="utf-8")
    return ["--no-health", "-c", str(config)]


def received(tmp_path: Path) -> list[Any]:
    return [orjson.loads(raw) for raw in (tmp_path / "received.jsonl").read_bytes().splitlines()]


# -- a required capture that fails ---------------------------------------------------------------

@pytest.mark.parametrize("big_answer", [False, True], ids=["update-while-in-flight", "the-answer-itself"])
async def test_a_required_capture_that_fails_answers_the_requests_in_flight(tmp_path: Path,
                                                                            big_answer: bool) -> None:
    """The agent writes a line too big for what is left of the capture's room: the bridge
    stops (exit 1) without sending it, and the prompt in flight gets an error that says so.
    When that line was the prompt's own answer, the prompt is in flight again: its answer
    was never sent."""
    big = {"jsonrpc": "2.0", "method": "session/update",
           "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                                    "content": {"type": "text", "text": BIG}}}}
    reaction = [{"respond": {"stopReason": "end_turn", "text": BIG}}] if big_answer else [{"send": big}]
    script = {"on": {"initialize": [{"respond": {"protocolVersion": 1}}], "session/prompt": reaction}}
    async with running(required_capture(tmp_path), script, tmp_path, file_limit=True) as client:
        assert await client.call(V1_INIT) == {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}
        await client.send(PROMPT)
    why = f"capture: cannot write {tmp_path / 'c.jsonl'}: File too large (capture.required is set)"
    assert (client.returncode, client.rest) == (1, stopped(why, 2))
    assert client.stderr.decode().splitlines() == [
        "acp-bridge: WARNING: stopping: answered 1 client request(s) left in flight", f"acp-bridge: {why}"]


# -- --strict and a rule's result that cannot be written ----------------------------------------------

def deep_new() -> dict[str, Any]:
    return {**V1_NEW, "params": {**V1_NEW["params"], "_meta": DEEP}}


async def send_deep_new(client: Client) -> None:
    """The request as one line, written by the stdlib (orjson writes no such line)."""
    await client.stdin.send_all(json.dumps(deep_new(), separators=(",", ":")).encode() + b"\n")


def spec_agent(tmp_path: Path) -> dict[str, Any]:
    return {"log": str(tmp_path / "received.jsonl"), "on": {
        "initialize": [{"respond": AGENT_WITH_CAP}], "session/new": [{"respond": {"sessionId": "s1"}}]}}


async def test_an_unwritable_rule_result_fails_open_without_strict(tmp_path: Path) -> None:
    """The system prompt rule would set `systemPrompt` on a session/new nested 600 deep:
    the result cannot be written, so the request goes on as it came (verdict error)."""
    async with running(["--no-health", "--system-prompt", TEXT], spec_agent(tmp_path), tmp_path,
                       process=False) as client:
        await client.call(V1_INIT)
        await send_deep_new(client)
        assert await client.receive() == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}
    assert (client.returncode, client.rest) == (0, b"")
    assert received(tmp_path) == [V1_INIT, deep_new()]


async def test_an_unwritable_rule_result_stops_the_bridge_under_strict(tmp_path: Path) -> None:
    """--strict: the same request is not forwarded; it is answered with why, and exit 1."""
    args = ["--no-health", "--strict", "--system-prompt", TEXT]
    async with running(args, spec_agent(tmp_path), tmp_path) as client:
        await client.call(V1_INIT)
        await send_deep_new(client)
    why = ("rule 'system-prompt' failed: Unencodable: what the rules (system-prompt) made of session/new id 1 "
           "cannot be written back: Recursion limit reached (strict is set)")
    assert (client.returncode, client.rest) == (1, stopped(why, 1))
    assert received(tmp_path) == [V1_INIT]
    assert client.stderr.decode().splitlines()[-1] == (
        "acp-bridge: rule 'system-prompt' failed: Unencodable: what the rules (system-prompt) made of "
        "session/new id 1 cannot be written back: Recursion limit reached")


async def test_replay_rules_strict_stops_on_an_unwritable_rule_result(tmp_path: Path) -> None:
    """A capture of that session re-run with the same rules: fails open (nothing differs, but
    the failure is said and the exit status is 1), and with --strict stops at the record, exit 1."""
    capture = tmp_path / "cap.jsonl"
    args = ["--no-health", "--system-prompt", TEXT, "--capture", str(capture)]
    async with running(args, spec_agent(tmp_path), tmp_path, process=False) as client:
        await client.call(V1_INIT)
        await send_deep_new(client)
        await client.receive()
    assert client.returncode == 0
    loose = invoke(["replay", str(capture), "--rules", "--system-prompt", TEXT])
    assert (loose.returncode, loose.stdout) == (1, f"acp-bridge replay --rules: {capture}: 0 messages "
                                                   f"differ of 4 compared\n".encode())
    assert loose.stderr.decode().splitlines()[-1] == (
        f"acp-bridge replay --rules: {capture}: the rules could not change a message on 1 message, first on "
        "seq 3: cannot re-encode: nested deeper than can be written back")
    strict = invoke(["replay", str(capture), "--rules", "--system-prompt", TEXT, "--strict"])
    assert (strict.returncode, strict.stdout) == (1, b"")
    assert strict.stderr.decode().splitlines() == [
        f"acp-bridge: {capture}: rule 'system-prompt' failed on the line recorded as seq 3: Unencodable: what the rules "
        "(system-prompt) made of session/new id 1 cannot be written back: Recursion limit reached"]


# -- where the capture went ------------------------------------------------------------------------------

async def test_a_capture_written_under_a_fresh_name_is_said_at_the_default_level(tmp_path: Path) -> None:
    """Run twice with the same --capture: the second run says, on stderr and in one line,
    that it wrote beside the first one's file, not over it."""
    path = tmp_path / "cap.jsonl"
    note = line({"jsonrpc": "2.0", "method": "n"})
    first = await run_cli_in_process(["run", "--no-health", "--capture", str(path), "--", *agent_cmd("echo")], note)
    assert (first.returncode, first.stdout, first.stderr) == (0, note, b"")
    second = await run_cli_in_process(["run", "--no-health", "--capture", str(path), "--", *agent_cmd("echo")],
                                      note)
    assert (second.returncode, second.stdout) == (0, note)
    assert second.stderr.decode().splitlines() == [
        f"acp-bridge: WARNING: capture: {path} exists; writing {tmp_path / 'cap-1.jsonl'}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap-1.jsonl", "cap.jsonl"]
