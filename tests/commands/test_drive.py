"""`acp-bridge drive CAPTURE -- AGENT` through the CLI against the scripted agent (a real child
process): the same agent drives with no difference, a changed one is named by turn, a request
the recording cannot answer, a hanging agent, an agent that cannot start, v2 turns.

The recording is made once, by `drive --capture` itself, from a seed capture that holds what a
client said (with a session id, a `cwd`, option ids and a redacted value of its own), so that
it is a capture the bridge wrote around a live agent.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.capture.records import dumps, header_record
from acp_bridge.commands import drive as drive_command
from acp_bridge.commands import main
from tests.conftest import SCRIPTED_AGENT, invoke
from tests.peak_memory import run
from tests.replay.drive import GOLDEN, GOLDENS

SID = "$sessionId"


def rec(seq: int, direction: str, kind: str, method: str | None, msg: dict[str, Any], session: Any = None,
        **extra: Any) -> dict[str, Any]:
    return {"type": "message", "seq": seq, "time": 0.0, "mono": 0.0, "direction": direction, "kind": kind,
            "verdict": "pass", "method": method, "id": msg.get("id"), "session": session, "rules": [],
            "raw": orjson.dumps({"jsonrpc": "2.0", **msg}).decode() + "\n", **extra}


def update(which: str, **fields: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": SID, "update": {"sessionUpdate": which, **fields}}}


def chunk(text: str) -> dict[str, Any]:
    return update("agent_message_chunk", content={"type": "text", "text": text})


PERMISSION: dict[str, Any] = {"jsonrpc": "2.0", "id": "p1", "method": "session/request_permission", "params": {
    "sessionId": SID, "toolCall": {"toolCallId": "c1"},
    "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}}


def turn(cwd: Path, *, kind: str = "read", stop: str = "end_turn", path: str = "a.py",
         skip: str | None = None) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [
        {"send": chunk("Hel")}, {"send": chunk("lo")},
        {"send": update("tool_call", toolCallId="c1", title="Read a.py", kind=kind, status="pending")},
        {"send": PERMISSION},
        {"send": {"jsonrpc": "2.0", "id": "r1", "method": "fs/read_text_file",
                  "params": {"sessionId": SID, "path": str(cwd / path)}}},
        {"send": update("tool_call_update", toolCallId="c1", status="completed")},
        {"respond": {"stopReason": stop}},
    ]
    return [step for step in steps if skip is None or skip not in json.dumps(step)]


def script(tmp: Path, cwd: Path, name: str = "agent", **changes: Any) -> Path:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({
        "log": str(tmp / f"{name}.log"),
        "on": {"initialize": [{"respond": {"protocolVersion": 1, "agentCapabilities": {}}}],
               "session/new": [{"respond": {"sessionId": "sess_live"}}],
               "session/prompt": turn(cwd, **changes)},
    }))
    return path


def agent(path: Path) -> list[str]:
    return ["--", sys.executable, "-u", str(SCRIPTED_AGENT), str(path)]


SESSION_NEW: dict[str, Any] = {"id": 1, "method": "session/new", "params": {"cwd": "/rec", "mcpServers": [
    {"name": "db", "command": "db-mcp", "args": [], "env": [{"name": "TOKEN", "value": "<redacted>"}]}]}}


def seed(path: Path) -> Path:
    """What a client said in a session of two prompts, the second cancelled."""
    old = "sess_old"
    records = [
        rec(1, "to-agent", "request", "initialize", {"id": 0, "method": "initialize",
                                                     "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        rec(2, "to-agent", "request", "session/new", SESSION_NEW,
            redacted=["/params/mcpServers/0/env/0/value"]),
        rec(3, "to-client", "response", "session/new", {"id": 1, "result": {"sessionId": old}}, old),
        rec(4, "to-agent", "request", "session/prompt", {"id": 2, "method": "session/prompt", "params": {
            "sessionId": old, "prompt": [{"type": "text", "text": "one"}]}}, old),
        rec(5, "to-client", "request", "session/request_permission", {**PERMISSION, "params": {
            **PERMISSION["params"], "sessionId": old, "options": [
                {"optionId": "yes-old", "name": "Allow", "kind": "allow_once"},
                {"optionId": "no-old", "name": "Reject", "kind": "reject_once"}]}}, old),
        rec(6, "to-agent", "response", "session/request_permission",
            {"id": "p1", "result": {"outcome": {"outcome": "selected", "optionId": "yes-old"}}}, old),
        rec(7, "to-client", "request", "fs/read_text_file", {"id": "r1", "method": "fs/read_text_file",
                                                             "params": {"sessionId": old, "path": "/rec/a.py"}}, old),
        rec(8, "to-agent", "response", "fs/read_text_file", {"id": "r1", "result": {"content": "print(1)"}}, old),
        rec(9, "to-agent", "request", "session/prompt", {"id": 3, "method": "session/prompt", "params": {
            "sessionId": old, "prompt": [{"type": "text", "text": "two"}]}}, old),
        rec(10, "to-client", "notification", "session/update", chunk("Hel"), old),
        rec(11, "to-agent", "notification", "session/cancel", {"method": "session/cancel",
                                                              "params": {"sessionId": old}}, old),
    ]
    header = header_record(wall=0.0, mono=0.0, argv=["acp-bridge", "run"], config_digest="x", pid=1)
    path.write_bytes(dumps(header) + b"".join(dumps(r) for r in records))
    return path


def drive(*args: str | Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["drive", *map(str, args)])
    return result.exit_code, result.stdout.splitlines()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The recording (made by driving the seed, with --cwd), and the live cwd."""
    tmp = tmp_path_factory.mktemp("recorded")
    cwd = tmp / "work"
    cwd.mkdir()
    out = tmp / "recorded.jsonl"
    first = CliRunner().invoke(main, ["drive", str(seed(tmp / "seed.jsonl")), "--cwd", str(cwd), "--capture", str(out),
                                      *agent(script(tmp, cwd))])
    assert first.stderr == ("acp-bridge: drive: session/new: /params/mcpServers/0/env/0/value was redacted in the "
                            "capture; sent as the placeholder\n")
    log = (tmp / "agent.log").read_bytes().splitlines()
    # Sent as the client sent them, the live session id and --cwd put in; the placeholder
    # sent for the redacted value; permission answered by kind with the live option id.
    assert log[0] == b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,' \
                     b'"clientCapabilities":{}}}'
    assert orjson.loads(log[1])["params"] == {**SESSION_NEW["params"], "cwd": str(cwd)}
    assert orjson.loads(log[2])["params"]["sessionId"] == "sess_live"
    assert orjson.loads(log[3]) == {"jsonrpc": "2.0", "id": "p1",
                                    "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}
    assert orjson.loads(log[4]) == {"jsonrpc": "2.0", "id": "r1", "result": {"content": "print(1)"}}
    # The second prompt, then, once the agent has said something in its turn, the cancel
    # (the answers to its requests go as they come).
    later = [orjson.loads(line) for line in log[5:]]
    assert later[0]["method"] == "session/prompt" and len(later) == 4
    assert sorted(str(msg.get("method", msg.get("id"))) for msg in later[1:]) == ["p1", "r1", "session/cancel"]
    return out, cwd


def test_the_same_agent_drives_with_no_difference(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    """The report on stdout, on stderr only what could not be sent as it was (the recording
    was redacted again as it was made)."""
    out, cwd = recorded
    done = invoke(["drive", str(out), "--cwd", str(cwd), "--json", *agent(script(tmp_path, cwd))])
    report = json.loads(done.stdout)
    assert (done.returncode, done.stderr) == (0, b"acp-bridge: drive: session/new: /params/mcpServers/0/env/0/value "
                                                 b"was redacted in the capture; sent as the placeholder\n")
    assert report["summary"] == "drive: 2 prompt turn(s) compared: 2 as recorded, 0 differ, 0 failed"
    assert [(t["where"], t["ok"]) for t in report["turns"]] == [
        ("connection", True), ("session 1 setup", True), ("session 1 turn 1", True), ("session 1 turn 2", True)]


def seqs(capture: Path, method: str, update_kind: str | None = None) -> list[int]:
    """The seqs of the agent's messages of `method` (and update kind) in a capture."""
    out = []
    for line in capture.read_bytes().splitlines():
        record = orjson.loads(line)
        if record.get("direction") == "to-client" and record.get("method") == method and (
                update_kind is None
                or orjson.loads(record["raw"])["params"]["update"]["sessionUpdate"] == update_kind):
            out.append(record["seq"])
    return out


@pytest.mark.parametrize(("change", "expected"), [
    ({"kind": "edit"}, ['session 1 turn {n}: recorded seq {tool_call} / live seq N <- update tool_call: /toolCall/kind '
                        '"read" -> "edit"']),
    ({"skip": "tool_call_update"}, [
        'session 1 turn {n}: recorded seq {tool_call} / live seq N <- update tool_call: /toolCall/status "completed" -> '
        '"pending"',
        "session 1 turn {n}: missing from live: recorded seq {tool_call_update} <- update tool_call_update"]),
    ({"stop": "refusal"}, [
        'session 1 turn {n}: recorded seq {response} / live seq N <- stop reason: /stopReason "end_turn" -> "refusal"']),
], ids=["tool-kind", "missing-update", "stop-reason"])
def test_a_changed_agent_is_named_by_turn(recorded: tuple[Path, Path], tmp_path: Path, change: dict[str, Any],
                                          expected: list[str]) -> None:
    """Each difference names its turn and the seq of the recorded message (the live one's is
    wherever the answers to the agent's requests fell)."""
    out, cwd = recorded
    status, lines = drive(out, "--cwd", cwd, *agent(script(tmp_path, cwd, **change)))
    where = {"tool_call": seqs(out, "session/update", "tool_call"),
             "tool_call_update": seqs(out, "session/update", "tool_call_update"),
             "response": seqs(out, "session/prompt")}
    assert status == 1
    assert [re.sub(r"live seq \d+", "live seq N", line) for line in lines[:-1]] == [
        line.format(n=n, **{key: value[n - 1] for key, value in where.items()}) for n in (1, 2) for line in expected]
    assert lines[-1] == "drive: 2 prompt turn(s) compared: 0 as recorded, 2 differ, 0 failed"


def test_a_request_the_recording_cannot_answer(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    out, cwd = recorded
    status, lines = drive(out, "--cwd", cwd, "--compare", "none", *agent(script(tmp_path, cwd, path="b.py")))
    params = json.dumps({"sessionId": "sess_live", "path": str(cwd / "b.py")}, separators=(",", ":"))
    why = "the recording has no answer to fs/read_text_file with these params"
    assert status == 1
    assert lines == [f"session 1 turn {n}: the agent asked fs/read_text_file {params}: {why}" for n in (1, 2)] + [
        "drive: 2 prompt turn(s) run (not compared): 0 as recorded, 0 differ, 2 failed"]
    answers = [orjson.loads(line) for line in (tmp_path / "agent.log").read_bytes().splitlines()
               if b'"r1"' in line]
    assert answers[0] == {"jsonrpc": "2.0", "id": "r1",
                          "error": {"code": -32603, "message": f"acp-bridge drive: {why}"}}


def test_a_hanging_agent_is_stopped_after_the_timeout(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    out, cwd = recorded
    hanging = script(tmp_path, cwd)
    data = json.loads(hanging.read_text())
    data["on"]["session/prompt"] = [{"send": chunk("Hel")}, {"sleep": 60}]
    hanging.write_text(json.dumps(data))
    # The timeout covers every wait, the agent's start and its answer to initialize included:
    # long enough for those on a loaded machine, as it is only waited out once.
    status, lines = drive(out, "--cwd", cwd, "--compare", "none", "--timeout", "2", "--junit",
                          tmp_path / "j.xml", *agent(hanging))
    assert status == 1
    assert lines == [
        "session 1 turn 1: timed out after 2s waiting for the end of the turn (session/prompt seq 5); "
        "the agent was stopped",
        "session 1 turn 2: not run: the run ended before it",
        "drive: 2 prompt turn(s) run (not compared): 0 as recorded, 0 differ, 2 failed"]
    junit = (tmp_path / "j.xml").read_text()
    assert junit.count("<testcase ") == 2 and 'failures="2"' in junit


def test_without_timeout_a_turn_is_bounded_by_the_default(recorded: tuple[Path, Path], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --timeout a drive waited as long as the agent did: in CI, a job hung until the
    runner killed it. The default (300 s, made 2 here) bounds each turn as --timeout does."""
    out, cwd = recorded
    hanging = script(tmp_path, cwd)
    data = json.loads(hanging.read_text())
    data["on"]["session/prompt"] = [{"send": chunk("Hel")}, {"sleep": 60}]
    hanging.write_text(json.dumps(data))
    monkeypatch.setattr(drive_command, "TURN_TIMEOUT", 2.0)
    status, lines = drive(out, "--cwd", cwd, "--compare", "none", *agent(hanging))
    assert (status, lines[0]) == (1, "session 1 turn 1: timed out after 2s waiting for the end of the turn "
                                     "(session/prompt seq 5); the agent was stopped")


def test_timeout_0_is_no_limit(recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--timeout 0` waits as long as the agent takes: here past the default (made 0.5 s)."""
    out, cwd = recorded
    slow = script(tmp_path, cwd)
    data = json.loads(slow.read_text())
    data["on"]["session/prompt"].insert(0, {"sleep": 1.0})
    slow.write_text(json.dumps(data))
    monkeypatch.setattr(drive_command, "TURN_TIMEOUT", 0.5)
    assert drive(out, "--cwd", cwd, "--timeout", "0", *agent(slow)) == (
        0, ["drive: 2 prompt turn(s) compared: 2 as recorded, 0 differ, 0 failed"])


def test_the_default_timeout_is_in_the_help() -> None:
    result = CliRunner().invoke(main, ["drive", "--help"], terminal_width=200)
    assert "the agent is stopped. [default: 300; 0: no limit]" in " ".join(result.stdout.split())


def test_an_agent_that_cannot_start_is_exit_2(recorded: tuple[Path, Path], capfd: pytest.CaptureFixture[str]) -> None:
    status, lines = drive(recorded[0], "--", "/nonexistent/agent")
    assert (status, lines) == (2, [])
    assert "cannot start agent '/nonexistent/agent': No such file or directory" in capfd.readouterr().err


def test_bad_input_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a capture\n")
    result = CliRunner().invoke(main, ["drive", str(bad), "--", "true"])
    assert result.exit_code == 2
    assert result.stderr == f"acp-bridge: {bad}:1: not a capture (the first line is not a header record)\n"


V2_PROMPT = [{"respond": {}}, {"send": chunk("Hi")}, {"sleep": 0.1},
             {"send": update("state_update", state="idle", stopReason="end_turn")}]


def test_a_v2_turn_ends_at_the_idle_state_update(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    """The second prompt goes only after the first turn's idle update, not after its response:
    driving a v1 recording against a v2 agent, then that v2 session again, which matches."""
    out, cwd = recorded
    v2 = tmp_path / "v2.json"
    v2.write_text(json.dumps({"on": {"initialize": [{"respond": {"protocolVersion": 2}}],
                                     "session/new": [{"respond": {"sessionId": "sess_v2"}}],
                                     "session/prompt": V2_PROMPT}}))
    live, again = tmp_path / "live.jsonl", tmp_path / "again.jsonl"
    assert drive(out, "--cwd", cwd, "--compare", "none", "--capture", live, *agent(v2))[0] == 0
    assert drive(live, "--capture", again, *agent(v2)) == (
        0, ["drive: 2 prompt turn(s) compared: 2 as recorded, 0 differ, 0 failed"])
    for capture in (live, again):
        order = [(r["direction"], r["method"], ((orjson.loads(r["raw"]).get("params") or {}).get("update") or {})
                  .get("state")) for r in map(orjson.loads, capture.read_bytes().splitlines()[1:-1])
                 if r["session"] == "sess_v2"]
        first_idle = order.index(("to-client", "session/update", "idle"))
        second_prompt = [n for n, entry in enumerate(order) if entry[:2] == ("to-agent", "session/prompt")][1]
        assert first_idle < second_prompt


@pytest.mark.parametrize(("args", "problem"), [
    (["--timeout", "nan"], "Invalid value for '--timeout': nan is not a number of seconds (see 'acp-bridge drive --help')"),
    (["--timeout", "-1"], "Invalid value for '--timeout': -1.0 is not in the range x>=0. (see 'acp-bridge drive --help')"),
    (["--compare", "bytes"], "Invalid value for '--compare': 'bytes' is not one of 'structure', 'text', 'none'. "
                             "(see 'acp-bridge drive --help')"),
    # a template run refuses was a traceback and exit 1, after the agent had started
    (["--capture", "o{x}.jsonl"], "Invalid value for '--capture': unknown placeholder {x} (known: {time}, {pid}) "
                                  "(see 'acp-bridge drive --help')"),
    (["--capture", "o{.jsonl"], "Invalid value for '--capture': bad template 'o{.jsonl': expected '}' before end of "
                                "string (see 'acp-bridge drive --help')"),
    # as run refuses them: no capture can be made there, and /dev/null made /dev/null-1
    (["--capture", "/dev/null"], "Invalid value for '--capture': /dev/null is a character device, not a regular file "
                                 "(see 'acp-bridge drive --help')"),
    (["--capture", ""], "Invalid value for '--capture': is empty; name a capture file (see 'acp-bridge drive --help')"),
])
def test_bad_options_are_exit_2(recorded: tuple[Path, Path], args: list[str], problem: str) -> None:
    result = CliRunner().invoke(main, ["drive", str(recorded[0]), *args, "--", "true"], prog_name="acp-bridge")
    assert (result.exit_code, result.stderr) == (2, f"acp-bridge: {problem}\n")


@pytest.mark.parametrize("agent", [[], ["--"]])
def test_no_agent_is_exit_2_saying_where_it_goes(recorded: tuple[Path, Path], agent: list[str]) -> None:
    result = CliRunner().invoke(main, ["drive", str(recorded[0]), *agent], prog_name="acp-bridge")
    assert (result.exit_code, result.stderr) == (
        2, "acp-bridge: no agent to drive: put its command after `--` (acp-bridge drive CAPTURE -- AGENT [ARG...])\n")


def test_a_junit_path_that_is_a_folder_is_refused_before_the_agent_starts(recorded: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    marker = tmp_path / "started"
    result = CliRunner().invoke(main, ["drive", str(recorded[0]), "--junit", str(tmp_path), "--", "touch", str(marker)])
    assert not marker.exists()
    assert (result.exit_code, result.stderr) == (
        2, f"acp-bridge: --junit: {tmp_path} is a directory, not a regular file; it is left as it is\n")


def test_a_capture_path_that_is_a_symlink_is_refused_before_the_agent_starts(
        recorded: tuple[Path, Path], tmp_path: Path) -> None:
    link = tmp_path / "out.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    marker = tmp_path / "started"
    result = CliRunner().invoke(main, ["drive", str(recorded[0]), "--capture", str(link), "--", "touch", str(marker)])
    assert (result.exit_code, result.stdout) == (2, "")
    assert not marker.exists() and not (tmp_path / "elsewhere.jsonl").exists()
    assert result.stderr == f"acp-bridge: capture: refusing {link}: it is a symbolic link (capture.required is set)\n"


def test_other_words_match_the_structure_but_not_the_text(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    out, cwd = recorded
    reworded = script(tmp_path, cwd)
    reworded.write_text(reworded.read_text().replace('"Hel"', '"Bye"'))
    assert drive(out, "--cwd", cwd, *agent(reworded))[0] == 0
    status, lines = drive(out, "--cwd", cwd, "--compare", "text", *agent(reworded))
    chunks = seqs(out, "session/update", "agent_message_chunk")
    assert status == 1
    assert [re.sub(r"live seq \d+", "live seq N", line) for line in lines[:-1]] == [
        f'session 1 turn 1: recorded seq {chunks[0]} / live seq N <- update agent_message_chunk: /text "Hello" -> "Byelo"',
        f'session 1 turn 2: recorded seq {chunks[2]} / live seq N <- update agent_message_chunk: /text "Hello" -> "Byelo"']


@pytest.mark.parametrize("name", GOLDENS)
def test_each_golden_capture_drives_its_scripted_agent_as_recorded(name: str) -> None:
    """Recorded through rules (system prompt, suggestions); driven with none: what the bridge
    wrote itself is not the agent's doing, and a v2 turn the recording ended without an idle
    update ends at the prompt's response."""
    status, lines = drive(GOLDEN / f"{name}.jsonl", "--timeout", "10",
                          *agent(GOLDEN / "agents" / f"{name}.json"))
    assert status == 0, lines
    assert lines[-1].endswith(" as recorded, 0 differ, 0 failed")


def test_memory_stays_flat_however_much_the_agent_writes(tmp_path: Path) -> None:
    """The agent's output passed through memory without bound (an in-memory stream), was read
    back whole to be compared, and a line past the parse limit was held whole: 400 lines of
    1 MB took drive to 445 MiB. Now each line is held only while it is read, and a long one
    is dropped as it comes: 60 MB of chunks and a 40 MB line, in a real process, took it to
    190 MiB and now 90 to 120: the interpreter and the package (about 25 MiB) and a few times
    the parse limit (16 MiB) of one line, whatever the agent writes (the bridge holds the
    start of a long line and passes it on, the stream between them copies it, the driver
    holds it until it is past the limit)."""
    sid = "sess_r"
    say = {**chunk("Hi"), "params": {**chunk("Hi")["params"], "sessionId": sid}}
    records = [
        rec(1, "to-agent", "request", "initialize", {"id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
        rec(2, "to-client", "response", "initialize", {"id": 0, "result": {"protocolVersion": 1}}),
        rec(3, "to-agent", "request", "session/new", {"id": 1, "method": "session/new",
                                                      "params": {"cwd": "/r", "mcpServers": []}}),
        rec(4, "to-client", "response", "session/new", {"id": 1, "result": {"sessionId": sid}}, sid),
        rec(5, "to-agent", "request", "session/prompt", {"id": 2, "method": "session/prompt", "params": {
            "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}}, sid),
        rec(6, "to-client", "notification", "session/update", say, sid),
        rec(7, "to-client", "response", "session/prompt", {"id": 2, "result": {"stopReason": "end_turn"}}, sid),
    ]
    header = header_record(wall=0.0, mono=0.0, argv=["acp-bridge", "run"], config_digest="x", pid=1)
    recording = tmp_path / "recording.jsonl"
    recording.write_bytes(dumps(header) + b"".join(dumps(r) for r in records))
    agent_script = tmp_path / "agent.json"
    agent_script.write_text(json.dumps({"on": {
        "initialize": [{"respond": {"protocolVersion": 1}}],
        "session/new": [{"respond": {"sessionId": "sess_live"}}],
        "session/prompt": [{"send": chunk("w " * 500_000), "times": 60},
                           {"raw": "x" * (1 << 20), "times": 40}, {"raw": "\n"},
                           {"respond": {"stopReason": "end_turn"}}]}}))
    ran = run(["drive", str(recording), "--", sys.executable, "-u", str(SCRIPTED_AGENT), str(agent_script)],
              tmp_path, timeout=120)
    assert ran.peak_mib < 140, (ran.peak_mib, ran.stderr)
    assert (ran.status, ran.stdout) == (0, "drive: 1 prompt turn(s) compared: 1 as recorded, 0 differ, 0 failed\n")
    # (on a loaded machine the bridge may also say it had to stop the agent at the end)
    assert ran.stderr.splitlines().count("acp-bridge: drive: the agent wrote a line longer than 16,777,216 bytes "
                                         "(the parse limit): it was not read") == 1, ran.stderr
