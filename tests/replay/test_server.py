"""`acp-bridge replay CAPTURE`: what the client receives, a capture of a replay, divergence,
--strict, --timing recorded, and bad input. Served in this process on pipes (`serving`), but
as a real process behind a bridge (a capture of a replay: the replay is the agent, the bridge
in this process records what the replay's stdout carried) and where what is asked is what
the process writes: bad input, a torn last line said."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from acp_bridge.replay.server import ReplayOptions
from tests.cli_helpers import bridge_in_process
from tests.conftest import ROOT, run_cli
from tests.golden.record import CAPTURE_CONFIG, CASES
from tests.replay.drive import GOLDEN, GOLDENS, CaptureClient, comparable, received_by_client, records, sent
from tests.replay.hostile import FAST, Replay, serving

REPLAY = [sys.executable, "-m", "acp_bridge", "replay"]


def options(name: str) -> list[str]:
    """The options a golden was recorded with, the config file's path made absolute."""
    return [str(ROOT / o) if o == CAPTURE_CONFIG else o for o in CASES[name]["options"]]


def line(msg: dict[str, Any]) -> bytes:
    return orjson.dumps(msg) + b"\n"


@pytest.mark.parametrize("name", GOLDENS)
async def test_the_client_receives_what_the_editor_received(name: str) -> None:
    """By default the replay gives the client, byte for byte, what the recorded client got
    (the bridge's rewrites and its own messages included)."""
    capture = GOLDEN / f"{name}.jsonl"
    async with serving(capture, timeout=30) as replay:
        got = await CaptureClient(replay).play(capture)
        assert await replay.proc.wait() == 0
    assert [g.decode() for g in got] == received_by_client(capture)


@pytest.mark.parametrize("name", GOLDENS)
async def test_a_capture_of_a_replay_through_the_same_rules_equals_the_original(name: str, tmp_path: Path) -> None:
    """`acp-bridge run [the recorded options] --capture B -- acp-bridge replay --before-rules A`:
    B holds the same records as A (raw, out, verdicts, rules, ids, sessions), but for times."""
    original, again = GOLDEN / f"{name}.jsonl", tmp_path / "again.jsonl"
    args = ["run", "--capture", str(again), *options(name), "--", *REPLAY, "--before-rules", str(original)]
    async with bridge_in_process(args, timeout=30) as proc:
        await CaptureClient(proc).play(original)
        assert await proc.proc.wait() == 0
    assert [comparable(r) for r in records(again)] == [comparable(r) for r in records(original)]


async def test_a_capture_of_the_default_replay_holds_what_the_client_saw(tmp_path: Path) -> None:
    """`acp-bridge run --no-suggestions --capture B -- acp-bridge replay A` (no rule at work in
    B's bridge): every message both ways, as the recorded client sent and received it, in order."""
    original, again = GOLDEN / "v1-new-client-unlock.jsonl", tmp_path / "again.jsonl"
    async with bridge_in_process(["run", "--no-suggestions", "--capture", str(again), "--", *REPLAY,
                                  str(original)], timeout=30) as proc:
        await CaptureClient(proc).play(original)
        assert await proc.proc.wait() == 0

    def seen(path: Path, key: Any) -> list[tuple[Any, ...]]:
        return [(r["direction"], r["kind"], r["method"], r["id"], r["session"], key(r)) for r in records(path)
                if (r["direction"] == "to-client" and sent(r) is not None)
                or (r["direction"] == "to-agent" and r["verdict"] != "emit")]

    assert seen(again, lambda r: r["raw"]) == seen(original, lambda r: sent(r) if r["direction"] == "to-client"
                                                  else r["raw"])


def golden_lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in (GOLDEN / f"{name}.jsonl").read_bytes().splitlines()]


class Session:
    """A replay and its stdout, read a line at a time."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.buffer = b""

    async def ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Send a request; return its answer (what came before it is skipped)."""
        await self.proc.send(line(msg))
        while True:
            got = await self.read()
            if "method" in got and "id" in got:  # the agent asks (fs, permission): answered
                await self.proc.send(line({"jsonrpc": "2.0", "id": got["id"], "result": {}}))
            elif got.get("id") == msg["id"]:
                return got

    async def read(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.proc.proc.stdout.receive_some(1 << 16)
            assert chunk, "EOF"
            self.buffer += chunk
        one, _, self.buffer = self.buffer.partition(b"\n")
        msg: dict[str, Any] = orjson.loads(one)
        return msg


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


@pytest.fixture
async def unlock_replay(request: pytest.FixtureRequest) -> AsyncIterator[Replay]:
    async with serving(GOLDEN / "v1-new-client-unlock.jsonl", getattr(request, "param", FAST)) as replay:
        yield replay


EXPECTED_NEW = ("acp-bridge replay: no recorded session/load (session sess_new_1) left to answer it with; "
                "the recording expected next: session/new id 1")


async def test_a_request_with_no_recorded_counterpart_gets_an_error_naming_what_was_expected(
        unlock_replay: Replay) -> None:
    """The error names the next recorded request; stderr says so once, however often it
    happens; the replay stays up and goes on when the client does what was recorded."""
    with trio.fail_after(20):
        session = Session(unlock_replay)
        assert (await session.ask(INIT))["result"]["agentInfo"]["name"] == "legacy-agent"
        load = {"jsonrpc": "2.0", "method": "session/load", "params": {"sessionId": "sess_new_1"}}
        for id_ in (5, 6):
            answer = await session.ask({**load, "id": id_})
            assert answer == {"jsonrpc": "2.0", "id": id_, "error": {
                "code": -32603, "message": EXPECTED_NEW,
                "data": {"expected": {"method": "session/new", "sessionId": None}}}}
        new = await session.ask({"jsonrpc": "2.0", "id": "n", "method": "session/new",
                                 "params": {"cwd": "/", "mcpServers": []}})
        assert new == {"jsonrpc": "2.0", "id": "n", "result": {"sessionId": "sess_new_1"}}
        assert await unlock_replay.finish() == 0
        await unlock_replay.stderr_ended.wait()
    assert unlock_replay.stderr_lines() == [
        "acp-bridge replay: divergence: the client sent session/load (session sess_new_1); "
        "the recording expected next: session/new id 1",
        "acp-bridge replay: 2 requests had no counterpart in the recording",
    ]


async def test_after_the_recording_is_exhausted_requests_get_the_error(unlock_replay: Replay) -> None:
    capture = GOLDEN / "v1-new-client-unlock.jsonl"
    with trio.fail_after(20):
        session = Session(unlock_replay)
        for record in records(capture):
            if record["direction"] == "to-agent" and record["kind"] == "request":
                await session.ask(json.loads(record["raw"]))
        again = await session.ask({"jsonrpc": "2.0", "id": 9, "method": "session/prompt",
                                   "params": {"sessionId": "sess_new_1", "prompt": []}})
        assert again["error"]["message"] == (
            "acp-bridge replay: no recorded session/prompt (session sess_new_1) left to answer it with; "
            "the recording expected next: nothing more: every recorded request has been served")
        assert again["error"]["data"] == {"expected": None}


@pytest.mark.parametrize("unlock_replay", [ReplayOptions(strict=True)], indirect=True)
async def test_strict_ends_the_replay_at_the_first_divergence(unlock_replay: Replay) -> None:
    """For CI: the divergent request is still answered, then the replay exits 1."""
    with trio.fail_after(20):
        session = Session(unlock_replay)
        await session.ask(INIT)
        answer = await session.ask({"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
                                    "params": {"sessionId": "s"}})
        assert answer["error"]["message"].endswith("the recording expected next: session/new id 1")
        assert await unlock_replay.proc.wait() == 1


def rewritten(tmp_path: Path, name: str, change: Any) -> Path:
    """A golden with `change(records)` applied (a derived capture for one test)."""
    lines = golden_lines(name)
    change(lines)
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    return path


async def test_recorded_timing_keeps_the_gaps_up_to_max_gap(tmp_path: Path) -> None:
    """The initialize answer was recorded 30 s after the request: with --max-gap 0.3 it
    comes at least 0.3 s late (the gap is kept), and far sooner than 30 s (capped)."""
    gap, max_gap, least, most = 30.0, 0.3, 0.3, 10.0
    def delay(lines: list[dict[str, Any]]) -> None:
        request = next(r for r in lines if r.get("method") == "initialize" and r.get("kind") == "request")
        for r in lines[lines.index(request) + 1:]:
            if "mono" in r:
                r["mono"] += gap
    capture = rewritten(tmp_path, "v1-new-client-unlock", delay)
    async with serving(capture, ReplayOptions(timing="recorded", max_gap=max_gap), timeout=30) as replay:
        session = Session(replay)
        start = trio.current_time()
        await session.ask(INIT)
        took = trio.current_time() - start
    assert least <= took < most


BAD_INPUT = [
    ("not-a-capture", b"hello\n", 1, "not a capture (the first line is not a header record)"),
    ("empty", b"", None, "empty, not a capture"),
    ("version", b'{"type":"header","format":2}\n', 1, "capture format 2; this acp-bridge reads format 1"),
    ("malformed", b'{"type":"header","format":1}\n{"type":"message","direction":"to-agent"}\n[1,2]\n', 3,
     "not a capture record"),
    ("direction", b'{"type":"header","format":1}\n{"type":"message","direction":"up"}\n', 2,
     "malformed message record: 'direction' is not to-agent or to-client"),
    ("format-true", b'{"type":"header","format":true}\n', 1, "capture format True; this acp-bridge reads format 1"),
    ("torn-in-the-middle", b'{"type":"header","format":1}\n{"type":"message","dir\n{"type":"end"}\n', 2,
     "not a capture record"),
    ("torn-after-the-end", b'{"type":"header","format":1}\n{"type":"end"}\n{"type":"mess', 3, "not a capture record"),
    ("torn-header", b'{"type":"hea', 1, "not a capture (the first line is not a header record)"),
]


def invoke(args: list[str]) -> tuple[int, str, str]:
    """The CLI in this process (click's runner): exit status, stdout, stderr."""
    from click.testing import CliRunner

    from acp_bridge.commands import main

    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("mode", [[], ["--rules"]])
@pytest.mark.parametrize(("name", "data", "number", "problem"), BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
def test_bad_input_is_one_line_naming_file_and_line_exit_2(tmp_path: Path, mode: list[str], name: str,
                                                            data: bytes, number: int | None, problem: str) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(data)
    where = str(path) if number is None else f"{path}:{number}"
    assert invoke(["replay", str(path), *mode]) == (2, "", f"acp-bridge: {where}: {problem}\n")


async def test_bad_input_from_a_real_process(tmp_path: Path) -> None:
    """The same through `python -m acp_bridge`: one line, no traceback, nothing on stdout."""
    path = tmp_path / "v2.jsonl"
    path.write_bytes(b'{"type":"header","format":2}\n')
    done = await run_cli(["replay", str(path)])
    assert (done.returncode, done.stdout, done.stderr.decode()) == (
        2, b"", f"acp-bridge: {path}:1: capture format 2; this acp-bridge reads format 1\n")


async def test_a_torn_last_line_of_a_killed_bridge_is_ignored_and_said(tmp_path: Path) -> None:
    """No end record and a last line cut short: the capture is served up to its last whole
    record (initialize is answered), and stderr says which line was ignored. --rules too."""
    data = (GOLDEN / "v1-new-client-unlock.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    path = tmp_path / "killed.jsonl"
    path.write_bytes(b"".join(lines[:3]) + lines[3][:40])
    note = f"acp-bridge: {path}:4: the torn last line (the bridge was killed while writing it) was ignored\n"
    async with serving(path) as replay:
        answer = await Session(replay).ask(INIT)
        assert answer["result"]["agentInfo"]["name"] == "legacy-agent"
        assert await replay.finish() == 0
    done = await run_cli(["replay", str(path)])  # the note, said by the command
    assert (done.returncode, done.stdout, done.stderr.decode()) == (0, b"", note)
    status, out, err = invoke(["replay", str(path), "--rules", *options("v1-new-client-unlock")])
    assert (status, err) == (0, note)
    assert out.endswith(": 0 messages differ of 2 compared\n")


def test_a_missing_capture_is_one_line_exit_2(tmp_path: Path) -> None:
    assert invoke(["replay", str(tmp_path / "none.jsonl")]) == (
        2, "", f"acp-bridge: {tmp_path / 'none.jsonl'}: cannot read: No such file or directory\n")


async def test_a_capture_without_its_end_record_replays_up_to_its_last_record(tmp_path: Path) -> None:
    """A killed bridge: the capture stops after the first prompt's request. What was
    recorded is served; the prompt, whose answer was never recorded, gets an error."""
    def cut(lines: list[dict[str, Any]]) -> None:
        first = next(i for i, r in enumerate(lines) if r.get("method") == "session/prompt")
        del lines[first + 1:]
    capture = rewritten(tmp_path, "v1-new-client-unlock", cut)
    async with serving(capture) as proc:
        session = Session(proc)
        await session.ask(INIT)
        new = await session.ask({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}})
        assert new["result"] == {"sessionId": "sess_new_1"}
        answer = await session.ask({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                                    "params": {"sessionId": "sess_new_1", "prompt": []}})
        assert answer["error"]["message"] == ("acp-bridge replay: the recording ends before the agent "
                                              "answered this request (session/prompt id 2 (session sess_new_1))")
        assert await proc.finish() == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--system-prompt", "x"], "--system-prompt: only with --rules"),
    (["--json"], "--json: only with --rules"),
    (["--rules", "--timing", "recorded"], "--timing: only when serving, not with --rules"),
    (["--timing", "recorded", "--max-gap", "nan"], "nan is not a number of seconds"),
    (["--max-gap", "1"], "--max-gap: only with --timing recorded"),
])
def test_options_of_the_other_mode_are_a_usage_error(args: list[str], message: str) -> None:
    status, out, err = invoke(["replay", str(GOLDEN / "v1-new-client-unlock.jsonl"), *args])
    assert (status, out, err.count("\n")) == (2, "", 1)
    assert message in err


async def test_an_answer_that_differs_from_the_recorded_one_is_reported_not_fatal(unlock_replay: Replay) -> None:
    """The agent's fs/read_text_file is answered with {} where the recorded client sent the
    file: stderr shows the difference, and the session goes on to its end."""
    with trio.fail_after(20):
        session = Session(unlock_replay)
        await session.ask(INIT)
        await session.ask({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}})
        for id_ in (2, 3):
            answer = await session.ask({"jsonrpc": "2.0", "id": id_, "method": "session/prompt",
                                        "params": {"sessionId": "sess_new_1", "prompt": []}})
            assert answer["result"] == {"stopReason": "end_turn"}
        assert await unlock_replay.finish() == 0
        await unlock_replay.stderr_ended.wait()
    assert unlock_replay.stderr_lines() == [  # once for each method, then how many
        'acp-bridge replay: the client\'s answer to fs/read_text_file differs from the recording: '
        '{"/result/content":{"was":"def f():\\n    return 1\\n"}}',
        "acp-bridge replay: 2 answers of the client differed from the recording (the first for each method "
        "is shown)"]


async def test_answers_carry_the_live_ids() -> None:
    """A client that numbers its requests otherwise (strings here) gets each recorded answer
    with its own id, and the answer otherwise as recorded."""
    capture = GOLDEN / "v2-resume-spec-dialect.jsonl"
    recorded = records(capture)
    answers = {r["id"]: json.loads(sent(r) or "null") for r in recorded
               if r["direction"] == "to-client" and r["kind"] == "response"}
    async with serving(capture) as proc:
        session = Session(proc)
        for r in recorded:
            if r["direction"] == "to-agent" and r["kind"] == "request":
                msg = {**json.loads(r["raw"]), "id": f"live-{r['id']}"}
                assert await session.ask(msg) == {**answers[r["id"]], "id": f"live-{r['id']}"}
