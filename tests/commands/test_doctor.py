"""`acp-bridge doctor` against real agents, each started through a real bridge process (the
process is what doctor checks): the official Python SDK's agent, the TypeScript SDK's (where
it is installed), the bundled demo agent, and agents with each fault doctor names: missing,
a banner on stdout, no answer, an exit at once, a rejected version, an answer that is not
ACP. And `--editor`: an editor's entries checked."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acp_bridge.setup.probe import STOP_GRACE
from acp_bridge.shell.posix import process_exists
from tests.conftest import ROOT, invoke

PYTHON = os.path.abspath(sys.executable)
AGENTS = Path(__file__).parent.parent / "agents"
DOCTOR_AGENT = [PYTHON, str(AGENTS / "doctor_agent.py")]
SDK_TS = ROOT / ".sdk-ts"
NODE = shutil.which("node")


def doctor(*args: str) -> tuple[int, dict[str, Any]]:
    done = invoke(["doctor", "--json", *args])
    assert done.returncode != 2, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_python_sdk_agent_is_healthy() -> None:
    status, facts = doctor("--session", "--", PYTHON, str(AGENTS / "sdk_agent.py"))
    assert status == 0, facts["problems"]
    assert facts["agent_info"] == {"name": "sdk-echo-agent", "version": "1.0.0"}
    assert facts["protocol_version"] == 1 and facts["stray_stdout"] == [] and facts["problems"] == []
    assert facts["system_prompt"] == {"dialect": "first-prompt", "mode": "append"}
    assert [row["form"] for row in facts["suggestions"]] == ["new", "legacy", None]
    assert facts["session_seconds"] is not None


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed, so the TypeScript SDK cannot run")
@pytest.mark.skipif(not (SDK_TS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir(),
                    reason="the TypeScript SDK is not installed: npm install --prefix .sdk-ts "
                           "@agentclientprotocol/sdk zod (.ci/run does it where npm is available)")
def test_the_typescript_sdk_agent_is_healthy_and_its_commands_are_listed() -> None:
    assert NODE is not None
    status, facts = doctor("--session", "--", NODE, str(AGENTS / "ts_agent.mjs"), str(SDK_TS))
    assert status == 0, facts["problems"]
    assert facts["agent_info"] == {"name": "ts-sdk-agent", "version": "1.0.0"}
    assert facts["commands"] == ["hello"]


def test_commands_sent_a_moment_after_session_new_are_waited_for_before_the_session_is_closed() -> None:
    """Before, doctor closed the session at once and listed no commands (CI saw it with the
    TypeScript SDK's agent on a busy machine)."""
    status, facts = doctor("--session", "--", *DOCTOR_AGENT, "commands")
    assert status == 0, facts["problems"]
    assert facts["commands"] == ["compact"]
    assert facts["session_closed"] is True


def test_the_demo_agent_needs_the_unlock_for_a_client_that_reads_the_new_update() -> None:
    status, facts = doctor("--session", "--", PYTHON, "-m", "acp_bridge.demo.legacy_agent")
    assert status == 0, facts["problems"]
    assert facts["agent_info"]["name"] == "demo-legacy-agent"
    assert [row["unlock_needed"] for row in facts["suggestions"]] == [True, False, False]
    unlocked = invoke(["doctor", "--unlock-legacy-agent", "--", PYTHON, "-m", "acp_bridge.demo.legacy_agent"])
    assert "--unlock-legacy-agent (set) makes it predict" in unlocked.stdout.decode()


def test_a_missing_agent_is_named_with_the_fix() -> None:
    status, facts = doctor("--", "no-such-agent-xyz")
    assert status == 1 and facts["started"] is False
    assert facts["problems"] == [{
        "problem": "the agent cannot be started: 'no-such-agent-xyz' is not on PATH (the editor must find it on "
                   "its own PATH, or give its full path)",
        "fix": "give its full path (command -v no-such-agent-xyz), and check that it is executable"}]


def test_a_file_that_is_not_executable_is_named_by_its_full_path(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    status, facts = doctor("--", str(script))
    assert status == 1
    assert facts["problems"][0]["problem"] == f"the agent cannot be started: {script} is not executable"


def test_a_banner_on_stdout_is_found_and_the_fix_is_stray_output_stderr() -> None:
    status, facts = doctor("--", *DOCTOR_AGENT, "banner")
    assert status == 1
    assert facts["stray_stdout"] == ["Welcome to doctor-agent 0 -- type /help"]
    assert facts["agent_info"] == {"name": "doctor-agent", "version": "0"}
    assert "--stray-output stderr" in facts["problems"][0]["fix"]
    status, facts = doctor("--stray-output", "stderr", "--", *DOCTOR_AGENT, "banner")
    assert status == 0 and facts["stray_stdout"] == []


def test_an_agent_that_never_answers_is_reported_after_the_timeout_and_is_gone(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    status, facts = doctor("--timeout", "1", "--", "/bin/sh", "-c", f"echo $$ > {pidfile}; exec sleep 600")
    assert status == 1
    assert facts["problems"] == [{
        "problem": "it answered nothing within the timeout (1 s, waiting for the answer to initialize)",
        "fix": "check that the command starts the agent's ACP mode (it may be waiting for a terminal), or give "
               "it longer with --timeout"}]
    # Under load the bridge may be stopped before it started the agent; either way none is left.
    assert not pidfile.exists() or not process_exists(int(pidfile.read_text()))


def test_an_agent_that_exits_at_once_is_reported_with_its_stderr() -> None:
    status, facts = doctor("--", *DOCTOR_AGENT, "exit")
    assert status == 1
    problem = facts["problems"][0]["problem"]
    assert problem.startswith("it exited with status 3 before answering initialize; its stderr ends: ")
    assert "fatal: no API key set (DOCTOR_AGENT_KEY)" in problem


@pytest.mark.parametrize(("mode", "start"), [
    ("reject", "it rejects initialize (protocol version 1): unsupported protocol version"),
    ("not-acp", 'it answers with JSON that is not JSON-RPC 2.0 (first: {"id": 1, "result": {"protocolVersion": 1}})'),
])
def test_an_answer_that_is_no_acp_or_a_refusal_is_reported(mode: str, start: str) -> None:
    status, facts = doctor("--timeout", "5", "--", *DOCTOR_AGENT, mode)
    assert status == 1
    assert facts["problems"][0]["problem"].startswith(start)


def test_the_text_report_says_the_facts_in_lines() -> None:
    done = invoke(["doctor", "--", *DOCTOR_AGENT, "banner"])
    lines = done.stdout.decode().splitlines()
    assert lines[0] == f"agent: {PYTHON} {DOCTOR_AGENT[1]} banner"
    assert lines[1].startswith("started and answered initialize in ")
    assert "agentInfo: doctor-agent 0" in lines
    assert "system prompt: the bridge would use the first-prompt dialect (mode append)" in lines
    assert lines[-1] == "1 problem(s) found" and done.returncode == 1


def test_editor_lists_the_entries_and_whether_their_commands_start(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"agent_servers": {
        "ok": {"command": PYTHON, "args": ["-m", "acp_bridge", "run", "--", PYTHON]},
        "missing": {"command": "/nope/agent"},
        "registry": {"type": "registry"},
    }}))
    done = invoke(["doctor", "--editor", "zed", "--settings", str(path), "--json"])
    assert done.returncode == 1
    rows = {row["name"]: row for row in json.loads(done.stdout)["entries"]}
    assert rows["ok"]["through_bridge"] and rows["ok"]["ok"]
    assert [c["command"] for c in rows["ok"]["commands"]] == [PYTHON, PYTHON]
    assert not rows["missing"]["ok"] and rows["missing"]["commands"][0]["problem"] == "/nope/agent does not exist"
    assert rows["registry"]["registry"] and rows["registry"]["ok"]
    text = invoke(["doctor", "--editor", "zed", "--settings", str(path)])
    assert "registry: installed by the editor (registry), not through the bridge" in text.stdout.decode()


@pytest.mark.parametrize("args", [["doctor"], ["doctor", "--settings", "x", "--", "a"],
                                  ["doctor", "--editor", "zed", "--", "a"], ["doctor", "--protocol", "3", "--", "a"]])
def test_usage_errors_are_exit_2(args: list[str]) -> None:
    assert invoke(args).returncode == 2


def test_an_agent_that_answers_another_protocol_version_is_told_to_try_it() -> None:
    status, facts = doctor("--protocol", "2", "--stray-output", "stderr", "--", *DOCTOR_AGENT, "banner")
    assert status == 1
    assert facts["protocol_asked"] == 2 and facts["protocol_version"] == 1
    assert facts["problems"] == [{"problem": "it answers protocol version 1 to a client that asked for 2",
                                  "fix": "clients that speak only version 2 will disconnect; try --protocol 1"}]


def test_editor_json_is_valid_for_a_name_with_a_lone_surrogate_escape(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"agent_servers": {"A\\ud800": {"command": "/nope/x"}}}', encoding="utf-8")
    done = invoke(["doctor", "--editor", "zed", "--settings", str(path), "--json"])
    assert done.returncode == 1
    assert [row["name"] for row in json.loads(done.stdout)["entries"]] == ["A\ud800"]


def test_editor_says_what_doctor_finds_not_what_setup_writes(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"agent_servers": {"A": {"command": "nope-agent-x"}}}', encoding="utf-8")
    done = invoke(["doctor", "--editor", "zed", "--settings", str(path)])
    assert done.stdout.decode().splitlines()[1] == (
        "  nope-agent-x: 'nope-agent-x' is not on PATH (the editor must find it on its own PATH, or give its full path)")
    missing = invoke(["doctor", "--editor", "zed", "--settings", str(tmp_path / "a\nb" / "s.json\x1b")])
    assert missing.stdout.decode() == f"{tmp_path}/a\\nb/s.json\\u001b: no such file (no agent entries)\nall entries can start\n"
    path.write_text('{"agent_servers": []}', encoding="utf-8")
    link = tmp_path / "l\x1b"
    link.symlink_to(path)
    refused = invoke(["doctor", "--editor", "zed", "--settings", str(link)])
    assert refused.stderr.decode() == f"acp-bridge: doctor: {tmp_path}/l\\u001b: agent_servers is not an object; the file is left as it is\n"


def test_stray_stdout_is_counted_but_only_its_first_lines_are_kept_and_cut() -> None:
    """An agent that logs to stdout: doctor's memory and its --json stay small."""
    script = ('read line; i=0; while [ $i -lt 60 ]; do echo "log $i $(printf %05000d 0)"; i=$((i+1)); done; '
              'echo \'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}\'; exec cat >/dev/null')
    status, facts = doctor("--", "/bin/sh", "-c", script)
    assert status == 1 and facts["stray_stdout_lines"] == 60
    assert [line.split(" ")[1] for line in facts["stray_stdout"]] == [str(i) for i in range(20)]
    assert facts["stray_stdout"][0] == "log 0 " + "0" * 994 + " ... (5006 bytes)"
    assert facts["problems"][0]["problem"].startswith("it writes 60 line(s) to stdout that are no protocol (first: log 0 ")


def test_an_agent_that_ignores_sigterm_is_killed_a_second_after_doctor_is_done(tmp_path: Path) -> None:
    """Before, doctor waited out the bridge's stop ladder (5 s of silence, SIGTERM, 5 s,
    SIGKILL): about 11 s for an agent that ignores SIGTERM and the end of its input, whatever
    --timeout said. Now it gives it STOP_GRACE after SIGTERM, then SIGKILLs it itself."""
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    status, facts = doctor("--timeout", "3", "--", *DOCTOR_AGENT, "deaf", str(pidfile))
    elapsed = time.monotonic() - start
    assert status == 0, facts["problems"]
    assert facts["agent_info"] == {"name": "doctor-agent", "version": "0"}
    assert elapsed < 3 + STOP_GRACE + 3, elapsed  # the answer came at once; the ladder took 10 s more
    assert not process_exists(int(pidfile.read_text()))


@pytest.mark.parametrize(("mode", "problem", "fix"), [
    ("wrong-id", f"its answer to initialize did not match the request id (1): it answered id {'1' * 100}",
     "the agent must answer each request with the request's own id, as the client wrote it (JSON-RPC 2.0); "
     "update the agent, or tell its authors"),
    ("long-line", "it wrote a line over 16 MiB to stdout while doctor waited for the answer to initialize; "
                  "neither doctor nor the bridge reads a line that long (the bridge passes it on in pieces, unread)",
     "run the command by hand and see what it writes: an answer that long is the agent's fault (the limit is "
     "[relay] parse_limit_mib)"),
])
def test_an_answer_doctor_cannot_pair_or_read_is_named_for_what_it_is(mode: str, problem: str, fix: str) -> None:
    """Before, the 100-digit id (orjson reads a float) was passed over and the 17 MiB line was
    two lines of stray stdout, each reported after the timeout as no answer or no protocol."""
    status, facts = doctor("--timeout", "5", "--", *DOCTOR_AGENT, mode)
    assert status == 1
    assert facts["problems"] == [{"problem": problem, "fix": fix}]
    assert facts["stray_stdout_lines"] == 0 and facts["agent_info"] is None
