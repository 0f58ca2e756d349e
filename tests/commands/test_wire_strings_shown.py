"""A session id or method chosen by a hostile agent or client reaches a person's terminal
as visible escapes: the bridge's log, `show`, `stats`, `check` (and its JUnit file) and
the replay's reports, each through the CLI (in this process where it neither relays nor
prints local times). The agent's own stderr, which the bridge copies, stays byte for byte;
outputs that are JSON are left to the JSON encoder."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest

from tests.conftest import agent_cmd, invoke, run_cli
from tests.replay.hostile import msg, replaying, rpc, write_capture

HOSTILE = "x\x1b]0;PWNED\x07y"  # OSC 0: retitles the terminal
SHOWN = "x\\u001b]0;PWNED\\u0007y"
C1 = "a\x9bb"  # U+009B: an 8-bit CSI to some terminals
UTC = {"TZ": "UTC"}


def assert_inert(output: bytes) -> None:
    for byte in (b"\x1b", b"\x07", "\x9b".encode()):
        assert byte not in output, output


def hostile_capture(path: Path) -> Path:
    """initialize with a hostile client name, a request with a hostile method and session
    (unanswered), an update for that session (never created), and a rewrite the rules
    would not make now (so `replay --rules` reports it)."""
    init = rpc(id=0, method="initialize", params={"protocolVersion": 1, "clientInfo": {"name": HOSTILE}})
    request = rpc(id=1, method=HOSTILE, params={"sessionId": HOSTILE})
    update = rpc(method="session/update", params={"sessionId": HOSTILE, "update": {"sessionUpdate": C1}})
    rewritten = msg(4, "to-agent", "request", rpc(id=2, method=HOSTILE, params={"s": C1}), HOSTILE, 2, HOSTILE)
    rewritten.update(verdict="rewrite", rules=["r\x1b"], out=rpc(id=2, method=HOSTILE, params={}).decode(),
                     out_size=10)
    return write_capture(path, [
        msg(1, "to-agent", "request", init, "initialize", 0),
        msg(2, "to-agent", "request", request, HOSTILE, 1, HOSTILE),
        msg(3, "to-client", "notification", update, "session/update", None, HOSTILE),
        rewritten,
    ])


async def test_log_lines_escape_what_the_wire_says_and_the_agent_stderr_passes_as_it_came() -> None:
    """-vv logs every message with its method; the health watchdog quotes the session id.
    The agent's stderr line (ESC, BEL and all) is copied as it was written."""
    traffic = rpc(id=1, method=HOSTILE, params={"sessionId": HOSTILE}) + rpc(
        method="session/update", params={"sessionId": HOSTILE, "update": {"sessionUpdate": C1}})
    done = await run_cli(["run", "-vv", "--", *agent_cmd("stderr", "agent says \x1b[31mred\x07")], traffic)
    assert done.stdout.startswith(traffic)
    passthrough = b"agent says \x1b[31mred\x07\n"
    assert passthrough in done.stderr
    said = done.stderr.replace(passthrough, b"")
    assert_inert(said)
    lines = said.decode().splitlines()
    assert f"acp-bridge: DEBUG: -> pass {SHOWN} id 1 (107 bytes)" in lines
    assert (f"acp-bridge: WARNING: health: update-unknown-session: session/update for {SHOWN}, which was never "
            f"created, loaded or resumed (session {SHOWN})") in lines
    assert f"acp-bridge: INFO: <- emit response id 1 ({SHOWN}) by bridge (0 -> 173 bytes)" in lines


async def test_log_file_escapes_too(tmp_path: Path) -> None:
    log = tmp_path / "bridge.log"
    traffic = rpc(id=1, method=HOSTILE, params={})
    done = await run_cli(["run", "-vv", "--log-file", str(log), "--", *agent_cmd("echo")], traffic)
    assert done.returncode == 0
    assert_inert(log.read_bytes())
    assert f"acp-bridge: DEBUG: -> pass {SHOWN} id 1 (71 bytes)\n" in log.read_text()


async def test_show_escapes_methods_sessions_updates_marks_and_bodies(tmp_path: Path) -> None:
    capture = hostile_capture(tmp_path / "h.jsonl")
    done = await run_cli(["show", str(capture), "--detail", "3", "--findings"], env=UTC)
    assert done.returncode == 0
    assert_inert(done.stdout)
    lines = done.stdout.decode().splitlines()
    assert f"00:00:01.000 -> {SHOWN} id 1 ({SHOWN}) 107B" in lines
    assert f"00:00:01.000 <- session/update a\\u009bb ({SHOWN}) 125B" in lines
    assert '        "sessionUpdate": "a\\u009bb"' in lines
    assert f"00:00:01.000 -> {SHOWN} id 2 ({SHOWN}) 80B->10B [rewrite: r\\u001b]" in lines
    assert (f"    !! warning update-unknown-session: session/update for {SHOWN}, which was never created, "
            "loaded or resumed") in lines


async def test_show_names_the_sessions_a_prefix_fits_escaped(tmp_path: Path) -> None:
    capture = write_capture(tmp_path / "two.jsonl", [
        msg(1, "to-agent", "request", rpc(id=1, method="m", params={}), "m", 1, "s\x1b1"),
        msg(2, "to-agent", "request", rpc(id=2, method="m", params={}), "m", 2, "s\x1b2")])
    done = invoke(["show", str(capture), "--session", "s"])
    assert done.returncode == 2
    assert_inert(done.stderr)
    assert "'s' is the start of 2 sessions: s\\u001b1, s\\u001b2" in done.stderr.decode()


async def test_stats_escapes_methods_rules_and_sessions(tmp_path: Path) -> None:
    capture = hostile_capture(tmp_path / "h.jsonl")
    done = await run_cli(["stats", str(capture)], env=UTC)
    assert done.returncode == 0
    assert_inert(done.stdout)
    lines = done.stdout.decode().splitlines()
    assert f"{SHOWN}               to-agent        2        187" in lines
    assert "r\\u001b                              rewrite         1" in lines
    assert f"  00:00:01.000 -> {SHOWN} id 1 ({SHOWN})" in lines


async def test_check_escapes_its_text_and_its_json_is_json(tmp_path: Path) -> None:
    capture = hostile_capture(tmp_path / "h.jsonl")
    done = invoke(["check", str(capture)])
    assert done.returncode == 1
    assert_inert(done.stdout)
    lines = done.stdout.decode().splitlines()
    assert lines[0] == f"{capture}: 4 messages, client {SHOWN}"
    assert (f"          e.g. session/update for {SHOWN}, which was never created, loaded or resumed "
            f"(session {SHOWN})") in lines
    assert "  verdict: this pair still needs the bridge because it changed or wrote messages (r\\u001b 1x)" in lines
    as_json = invoke(["check", str(capture), "--json"])
    assert_inert(as_json.stdout)  # stdlib json writes ASCII: every control is a \u escape
    assert json.loads(as_json.stdout)["captures"][0]["client"] == HOSTILE


async def test_check_junit_parses_and_keeps_the_text_readable(tmp_path: Path) -> None:
    capture = hostile_capture(tmp_path / "h.jsonl")
    junit = tmp_path / "j.xml"
    assert (invoke(["check", str(capture), "--junit", str(junit)])).returncode == 1
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    said = cases["update-unknown-session"].find("failure")
    assert said is not None and said.text is not None
    assert f"seq 3: session/update for {SHOWN}, which was never created, loaded or resumed" in said.text


async def test_replay_rules_escapes_the_differences(tmp_path: Path) -> None:
    capture = hostile_capture(tmp_path / "h.jsonl")
    done = invoke(["replay", str(capture), "--rules"])
    assert_inert(done.stdout)
    assert done.stdout.decode().splitlines()[0] == (
        f'seq 4 -> {SHOWN}: changed {{"/params/s":{{"now":"a\\u009bb"}}}}')
    as_json = invoke(["replay", str(capture), "--rules", "--json"])
    assert orjson.loads(as_json.stdout)["differences"][0]["method"] == HOSTILE


async def test_replay_reports_escape_what_the_client_sent(tmp_path: Path) -> None:
    capture = write_capture(tmp_path / "c.jsonl", [
        msg(1, "to-agent", "request", rpc(id=0, method="initialize", params={}), "initialize", 0)])
    async with replaying([str(capture)]) as replay:
        await replay.ask(rpc(id=5, method=HOSTILE, params={"sessionId": "s\x9b"}))
        assert await replay.finish() == 0
    assert_inert(bytes(replay.err))
    assert (f"acp-bridge replay: divergence: the client sent {SHOWN} (session s\\u009b); the recording "
            "expected next: initialize id 0") in replay.stderr_lines()


@pytest.mark.parametrize("name", [b"a\x1b[2J", b"\xff"])
async def test_a_capture_path_that_is_no_text_still_gives_valid_junit(tmp_path: Path, name: bytes) -> None:
    """A file name is the one text in the JUnit file that is not from the capture: one that
    is not UTF-8 arrives as lone surrogates, which no UTF-8 file can hold."""
    weird = hostile_capture(tmp_path / "h.jsonl").rename(tmp_path / os.fsdecode(name + b".jsonl"))
    junit = tmp_path / "j.xml"
    done = invoke(["check", str(weird), "--junit", str(junit)])
    assert done.returncode == 1, done.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("name") == str(tmp_path) + ("/a\\u001b[2J.jsonl" if name == b"a\x1b[2J" else "/\\udcff.jsonl")
