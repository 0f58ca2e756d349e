"""Every finding, provoked through `acp-bridge run` (the bridge in this process, its agent a
scripted one in a process of its own): seen
live (log and capture records) and again by `acp-bridge check` on the capture; and
ordinary traffic (a long turn with tool calls and a permission request, the demo, an SDK
agent) gives none at warning level."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from tests.cli_helpers import bridge_in_process, run_cli_in_process
from tests.conftest import SCRIPTED_AGENT, invoke
from tests.health import scenarios as sc

# The requests answered at once get no threshold: on a loaded machine an answer may take
# longer than 0.3 s, and a finding for one of them (session null, like x/slow) would be the
# one told of its code.
THRESHOLDS = ("[health]\nrequest_seconds = 0.3\nprompt_seconds = 0.3\nclient_request_seconds = 0.3\n"
              "cancel_seconds = 5\nmethods = { \"initialize\" = 0, \"session/new\" = 0, \"x/both\" = 0 }\n"
              "[system_prompt]\ntext = \"Be brief.\"\n")


def script(tmp_path: Path, name: str, body: dict[str, Any]) -> list[str]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(body))
    return [sys.executable, "-u", str(SCRIPTED_AGENT), str(path)]


def records(path: Path) -> list[dict[str, Any]]:
    """The whole records of a capture, which may be still being written: a last line without
    its newline is not whole yet."""
    data = path.read_bytes()
    return [orjson.loads(line) for line in data[:data.rfind(b"\n") + 1].splitlines() if line.strip()]


def live_codes(path: Path) -> set[str]:
    return {r["code"] for r in records(path) if r["type"] == "finding"}


async def wait_for_codes(path: Path, codes: set[str]) -> None:
    """Wait (polling the capture) until the watchdog has written every one of `codes`."""
    while not codes <= live_codes(path):
        await trio.sleep(0.05)


@pytest.fixture(scope="module")
def broken_v1(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One v1 connection that provokes every live finding: its capture and config file."""
    tmp = tmp_path_factory.mktemp("broken")
    capture = tmp / "broken.jsonl"
    config = tmp / "health.toml"
    config.write_text(THRESHOLDS)
    agent = script(tmp, "agent", sc.BROKEN_V1)

    async def converse() -> None:
        async with bridge_in_process(["run", "-c", str(config), "--capture", str(capture), "--", *agent]) as bridge:
            with trio.fail_after(20):
                for message, wanted in sc.BROKEN_V1_CLIENT:
                    await bridge.send(sc.wire(message))
                    if wanted is not None:
                        await bridge.read_until(wanted)
                await wait_for_codes(capture, sc.BROKEN_V1_CODES)
                await bridge.close_stdin()
                await bridge.read_all()
                assert await bridge.proc.wait() == 0

    trio.run(converse)
    return capture, config


def test_the_watchdog_writes_each_finding_once_per_code_and_session(broken_v1: tuple[Path, Path]) -> None:
    capture, _ = broken_v1
    found = [r for r in records(capture) if r["type"] == "finding" and not r.get("total")]
    assert {r["code"] for r in found} == sc.BROKEN_V1_CODES
    pairs = [(r["code"], r["session"]) for r in found]
    assert len(pairs) == len(set(pairs))
    by_code = {r["code"]: r for r in found}
    assert by_code["update-unknown-session"]["session"] == "ghost"
    assert by_code["update-closed-session"]["session"] == "s1"
    assert by_code["response-unknown-id"]["id"] == 999
    assert by_code["request-unanswered"]["method"] == "x/slow"
    assert by_code["prompt-stalled"]["id"] == 6
    assert by_code["client-request-unanswered"]["method"] == "fs/read_text_file"
    assert by_code["cancel-ignored"]["message"].endswith("ended with stopReason end_turn, not cancelled")
    assert by_code["request-unanswered"]["level"] == "warning"
    assert by_code["response-duplicate"]["level"] == "error"
    assert by_code["air-only-client"]["level"] == "info"
    # `about` is the seq of the message concerned
    messages = {r["seq"]: r for r in records(capture) if r["type"] == "message"}
    assert messages[by_code["request-unanswered"]["about"]]["method"] == "x/slow"
    assert messages[by_code["response-unknown-id"]["about"]]["id"] == 999


async def test_check_finds_the_same_afterwards_and_fails_at_warning(broken_v1: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    capture, config = broken_v1
    junit = tmp_path / "junit.xml"
    result = invoke(["check", str(capture), "-c", str(config), "--json", "--junit", str(junit)])
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)["captures"][0]
    assert {f["code"] for f in report["findings"]} == sc.BROKEN_V1_CODES
    assert report["protocol_version"] == 1
    live = {(r["code"], r["about"]) for r in records(capture) if r["type"] == "finding" and not r.get("total")}
    after = {(f["code"], f["occurrences"][0]["seq"]) for f in report["findings"]}
    assert after == live  # the same message, live and afterwards
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    failed = {case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None}
    assert failed == {c for c in sc.BROKEN_V1_CODES
                      if c not in ("air-only-client", "legacy-suggestions", "suggestions-unadvertised",
                                   "system-prompt-fallback")}
    assert len(list(suite.iter("testcase"))) == 18  # every code but schema-invalid


async def test_the_system_prompt_fallback_names_its_session_and_request(broken_v1: tuple[Path, Path]) -> None:
    """The prompt the system prompt went into has a session and an id: the finding carries
    both, live (the capture's record) and afterwards (`check`)."""
    capture, config = broken_v1
    [live] = [r for r in records(capture) if r["type"] == "finding" and r["code"] == "system-prompt-fallback"]
    assert (live["session"], live["id"], live["method"]) == ("s1", 2, "session/prompt")
    result = invoke(["check", str(capture), "-c", str(config), "--json"])
    [after] = [f for f in json.loads(result.stdout)["captures"][0]["findings"] if f["code"] == "system-prompt-fallback"]
    assert [(o["session"], o["id"], o["seq"]) for o in after["occurrences"]] == [("s1", 2, live["about"])]


async def test_v1_shape_on_a_v2_connection(tmp_path: Path) -> None:
    capture = tmp_path / "v2.jsonl"
    agent = script(tmp_path, "v2", sc.BROKEN_V2)
    result = await run_cli_in_process(["run", "--capture", str(capture), "--", *agent], sc.wire(sc.V2_CLIENT_INIT))
    assert result.returncode == 0
    assert result.stderr.decode().splitlines() == [
        "acp-bridge: WARNING: health: v1-shape-on-v2: v1 initialize keys on v2: agentCapabilities"]
    assert live_codes(capture) == {"v1-shape-on-v2"}
    checked = invoke(["check", str(capture), "--fail-on", "error"])
    assert checked.returncode == 0
    assert "  warning v1-shape-on-v2 (1x)  seq 2" in checked.stdout.decode()


async def test_no_health_writes_no_findings(tmp_path: Path) -> None:
    capture = tmp_path / "off.jsonl"
    agent = script(tmp_path, "v2", sc.BROKEN_V2)
    result = await run_cli_in_process(["run", "--no-health", "--capture", str(capture), "--", *agent],
                           sc.wire(sc.V2_CLIENT_INIT))
    assert result.returncode == 0 and b"health" not in result.stderr
    assert live_codes(capture) == set()


async def test_a_long_turn_with_tools_and_permission_has_no_warning(tmp_path: Path) -> None:
    capture = tmp_path / "long.jsonl"
    agent = script(tmp_path, "long", sc.LONG_TURN)
    async with bridge_in_process(["run", "--capture", str(capture), "--system-prompt", "Be brief.", "--", *agent]) as bridge:
        with trio.fail_after(20):
            await bridge.send(sc.wire(sc.msg(id=0, method="initialize", params=sc.NEW_CLIENT)))
            await bridge.read_until(b'"id": 0')
            await bridge.send(sc.wire(sc.msg(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []})))
            await bridge.read_until(b"available_commands_update")
            await bridge.send(sc.wire(sc.msg(id=2, method="session/prompt", params={
                "sessionId": "s1", "prompt": [{"type": "text", "text": "go"}]})))
            await bridge.read_until(b'"p1"')
            await bridge.send(sc.wire(sc.msg(id="p1", result={"outcome": {"outcome": "selected", "optionId": "ok"}})))
            await bridge.read_until(b'"end_turn"')
            await bridge.close_stdin()
            await bridge.read_all()
    assert live_codes(capture) == {"legacy-suggestions"}
    checked = invoke(["check", str(capture)])
    assert checked.returncode == 0, checked.stdout
    text = checked.stdout.decode()
    assert "  info    legacy-suggestions (1x)" in text
    assert "verdict: this pair still needs the bridge because the agent sends suggestions in the legacy form (1x)" in text


async def test_the_demo_has_no_warning_and_needs_the_bridge(tmp_path: Path) -> None:
    from acp_bridge.commands.demo import Narrator, run_demo

    assert await run_demo(tmp_path, Narrator(color=False)) == 0  # the demo's own function: its bridge and agent
    capture = tmp_path / "capture.jsonl"
    assert live_codes(capture) == {"legacy-suggestions", "system-prompt-fallback"}
    checked = invoke(["check", str(capture), "--json"])
    assert checked.returncode == 0
    report = json.loads(checked.stdout)["captures"][0]
    assert {f["level"] for f in report["findings"]} == {"info"}
    assert report["migration"]["agent_sent"] == {"legacy": 3, "new": 0}
    assert report["migration"]["client_received"] == {"legacy": 0, "new": 3}
    assert report["migration"]["system_prompt"] == {"first-prompt": 1}
    assert report["verdict"].startswith("this pair still needs the bridge because the agent sends suggestions "
                                        "in the legacy form (3x)")


def test_show_follow_findings_prints_the_watchdogs_records_in_place(broken_v1: tuple[Path, Path]) -> None:
    from click.testing import CliRunner

    from acp_bridge.commands import main

    capture, _ = broken_v1
    result = CliRunner().invoke(main, ["show", str(capture), "--follow", "--findings"])
    assert result.exit_code == 0
    marks = [line.split(" !! ", 1)[1] for line in result.stdout.splitlines() if " !! " in line]
    written = [r for r in records(capture) if r["type"] == "finding"]
    assert len(marks) == len(written)
    assert marks[0] == ("info air-only-client: the client is JetBrains AIR only (legacy suggestion form, no "
                        "session.promptSuggestions) [seq 1]")
