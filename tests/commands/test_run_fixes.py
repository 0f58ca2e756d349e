"""The three built-in fixes through the real CLI: `python -m acp_bridge run -- scripted_agent.py`.

One session with all three at work (bridge-rules 6.1-6.3): the agent prints a banner and a
shell's echo on stdout, lists its slash commands only in the `session/new` response, and
ends its turn with a tool call still running. The client must receive exactly the protocol
lines, the commands notification after the setup response and the closing update before the
prompt response; the banner and the echo go to the bridge's stderr. The capture names each
rule, and `stats`, `check` and `replay --rules` read it back. The rules' cases are the
tables of tests/core/rewrites/test_commands.py, test_tool_calls.py and
tests/core/test_stray_output.py; here, once, what only a real run shows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.conftest import SCRIPTED_AGENT, example, line, run_cli

SID = "sess_1"
COMMANDS = [{"name": "web", "description": "Search", "input": {"type": "_voice", "rate": 1.50}}]
RUNNING = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": {
    "sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "Run make", "status": "in_progress"}}}
CLIENT = [
    example("v1-initialize-request-client-plain"),
    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}},
    {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": SID, "prompt": []}},
]
CLOSED = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":'
          b'{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"failed","content":[{"type":'
          b'"content","content":{"type":"text","text":"Closed by acp-bridge: the turn ended while this tool '
          b'call was still in_progress"}}]}}}\n')
MIRRORED = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":'
            b'{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"web","description":'
            b'"Search","input":{"type":"_voice","rate":1.50}}]}}}\n')


def agent_line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({
        "start": [{"raw": "Agent v1.2 starting\n"}],
        "on": {
            "initialize": [{"respond": example("v1-initialize-response-agent-no-system-prompt")["result"]}],
            # numbers as written: json.dumps writes 1.5, the raw line 1.50
            "session/new": [{"raw": '{"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "sess_1", '
                                    '"availableCommands": [{"name": "web", "description": "Search", '
                                    '"input": {"type": "_voice", "rate": 1.50}}]}}\n'}],
            "session/prompt": [{"send": RUNNING}, {"raw": "+ make\x1b[0m\n"},
                               {"respond": {"stopReason": "end_turn"}}],
        },
    }))
    return path


async def test_the_fixes_through_the_cli(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    result = await run_cli(
        ["run", "--close-tool-calls", "--stray-output", "stderr", "--capture", str(capture),
         "--", sys.executable, "-u", str(SCRIPTED_AGENT), str(script(tmp_path))],
        stdin=b"".join(line(msg) for msg in CLIENT))
    assert result.returncode == 0, result.stderr
    new_session = (b'{"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "sess_1", "availableCommands": '
                   b'[{"name": "web", "description": "Search", "input": {"type": "_voice", "rate": 1.50}}]}}\n')
    assert result.stdout == b"".join([
        agent_line({"jsonrpc": "2.0", "id": 0, "result": example("v1-initialize-response-agent-no-system-prompt")["result"]}),
        new_session, MIRRORED,
        agent_line(RUNNING), CLOSED,
        agent_line({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
    ])
    stderr = result.stderr.decode().splitlines()
    assert [s for s in stderr if "agent stdout" in s] == [
        "acp-bridge: agent stdout (not forwarded): Agent v1.2 starting",
        "acp-bridge: agent stdout (not forwarded): + make\\u001b[0m",
    ]

    records = [orjson.loads(r) for r in capture.read_bytes().splitlines()]
    ruled = [(r["verdict"], r["rules"], r.get("before")) for r in records if r.get("rules")]
    assert ruled == [
        ("diverted", ["stray-output"], None),
        ("pass", ["commands-mirror"], None), ("emit", ["commands-mirror"], None),
        ("diverted", ["stray-output"], None),
        ("emit", ["close-tool-calls"], True), ("pass", ["close-tool-calls"], None),
    ]

    runner = CliRunner()
    stats = runner.invoke(main, ["stats", str(capture)])
    assert stats.exit_code == 0, stats.stderr
    rows = [row.split() for row in stats.stdout.splitlines()]
    for rule, verdict, count in (["commands-mirror", "emit", "1"], ["close-tool-calls", "emit", "1"],
                                 ["stray-output", "diverted", "2"]):
        assert [rule, verdict, count] in rows, stats.stdout
    check = runner.invoke(main, ["check", str(capture), "--json"])
    assert check.exit_code == 1, check.stderr  # a warning: the stray output
    [report] = json.loads(check.stdout)["captures"]
    assert report["migration"]["changed_by_rule"] == {"commands-mirror": 1, "close-tool-calls": 1, "stray-output": 2}
    [finding] = report["findings"]
    assert (finding["code"], finding["count"]) == ("stray-output", 2)
    assert [(o["seq"], o["message"]) for o in finding["occurrences"]] == [
        (4, "the agent wrote 'Agent v1.2 starting' to stdout, which is not a JSON-RPC message; it went "
            "to the bridge's stderr instead of the client"),
        (9, "the agent wrote '+ make\\x1b[0m' to stdout, which is not a JSON-RPC message; it went "
            "to the bridge's stderr instead of the client")]
    replay = runner.invoke(main, ["replay", str(capture), "--rules", "--close-tool-calls", "--stray-output", "stderr"])
    assert (replay.exit_code, replay.stdout) == (
        0, f"acp-bridge replay --rules: {capture}: 0 messages differ of 11 compared\n")
    # The closing update was recorded ahead of the response (`before`): it is the response's.
    without = runner.invoke(main, ["replay", str(capture), "--rules", "--stray-output", "stderr"])
    assert without.exit_code == 1
    assert without.stdout.splitlines()[0].startswith("seq 10 <- session/update: no longer emitted")


async def test_open_tool_calls_are_closed_before_the_bridges_answer_when_the_agent_dies_mid_turn(
        tmp_path: Path) -> None:
    """The agent exits during the turn: the bridge's error answer to the prompt ends it, so
    the tool call left open is closed before that answer, toward the client and in the
    capture, as the agent's own answer would have had it."""
    from tests.cli_helpers import run_cli_in_process

    path = tmp_path / "script.json"
    path.write_text(json.dumps({"on": {
        "initialize": [{"respond": example("v1-initialize-response-agent-no-system-prompt")["result"]}],
        "session/new": [{"respond": {"sessionId": SID}}],
        "session/prompt": [{"send": RUNNING}, {"exit": 3}],
    }}))
    capture = tmp_path / "c.jsonl"
    result = await run_cli_in_process(
        ["run", "--no-health", "--close-tool-calls", "--capture", str(capture), "--", sys.executable, "-u",
         str(SCRIPTED_AGENT), str(path)], b"".join(line(msg) for msg in CLIENT))
    assert result.returncode == 3, result.stderr
    *_, running, closed, answer = result.stdout.splitlines(keepends=True)
    assert (running, closed) == (agent_line(RUNNING), CLOSED)
    assert orjson.loads(answer)["id"] == 2 and orjson.loads(answer)["error"]["message"].startswith("agent exited")
    records = [orjson.loads(r) for r in capture.read_bytes().splitlines()]
    assert [(r["verdict"], r["rules"], r.get("before"), r.get("out")) for r in records if r.get("rules")][-2:] == [
        ("emit", ["close-tool-calls"], True, CLOSED.decode()), ("emit", ["bridge"], None, answer.decode())]
