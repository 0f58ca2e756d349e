"""From a hostile review: what a peer's odd line, a flood of sessions or odd files do to the
watchdog, `check`, `show --findings` and `export`."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.commands import main
from acp_bridge.health import watchdog
from tests.cli_helpers import run_cli_in_process
from tests.conftest import agent_cmd

ODD_KIND: dict[str, Any] = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "q", "update": {"sessionUpdate": [1]}}}


async def capture_of(tmp_path: Path, lines: list[dict[str, Any]], *extra: str) -> Path:
    """Run the bridge (in this process) over an agent that writes `lines` (an echo agent):
    its capture."""
    capture = tmp_path / "c.jsonl"
    data = b"".join(orjson.dumps(m) + b"\n" for m in lines)
    done = await run_cli_in_process(["run", "--capture", str(capture), *extra, "--", *agent_cmd("echo")], data)
    assert done.returncode == 0 and done.stdout == data, done.stderr
    assert b"watchdog failed" not in done.stderr, done.stderr.decode()
    return capture


async def test_an_update_kind_that_is_no_string_is_no_crash_live_or_after(tmp_path: Path) -> None:
    capture = await capture_of(tmp_path, [ODD_KIND])
    runner = CliRunner()
    checked = runner.invoke(main, ["check", str(capture)])
    assert checked.exit_code in (0, 1) and "internal error" not in checked.output, checked.output
    assert "update-unknown-session" in checked.output
    shown = runner.invoke(main, ["show", str(capture), "--findings"])
    assert shown.exit_code == 0 and "Traceback" not in shown.output, shown.output
    page = tmp_path / "p.html"
    exported = runner.invoke(main, ["export", str(capture), "--html", str(page)])
    assert exported.exit_code == 0 and page.is_file(), exported.output


async def test_a_flood_of_new_sessions_logs_and_records_ten_findings_then_counts(tmp_path: Path) -> None:
    # Each update has an "id" member (in its content): a line with one is always parsed, also
    # when a busy machine lets several lines arrive in one read, which would otherwise pass as
    # a run of untouched lines that nothing looks into.
    ghosts = [{"jsonrpc": "2.0", "method": "session/update",
               "params": {"sessionId": f"ghost-{i}", "update": {"sessionUpdate": "agent_message_chunk",
                                                                "content": {"type": "text", "text": "boo", "id": i}}}}
              for i in range(300)]
    capture = tmp_path / "c.jsonl"
    data = b"".join(orjson.dumps(m) + b"\n" for m in ghosts)
    agent = [sys.executable, "-u", "-c", "import sys,time\nfor line in sys.stdin.buffer:\n"
             " sys.stdout.buffer.write(line); sys.stdout.buffer.flush()"]
    done = await run_cli_in_process(["run", "-v", "--capture", str(capture), "--", *agent], data)
    assert done.returncode == 0 and done.stdout == data
    warned = [line for line in done.stderr.decode().splitlines() if "update-unknown-session:" in line]
    records = [orjson.loads(line) for line in capture.read_bytes().splitlines()]
    findings = [r for r in records if r["type"] == "finding" and r["code"] == "update-unknown-session"]
    assert len(warned) <= watchdog.REPORTED_PER_CODE and len(findings) <= watchdog.REPORTED_PER_CODE
    assert len(warned) >= 1
    assert "health: update-unknown-session came" in done.stderr.decode()


async def test_junit_replaces_a_symlink_and_never_writes_through_it(tmp_path: Path) -> None:
    capture = await capture_of(tmp_path, [ODD_KIND])
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    junit = tmp_path / "j.xml"
    junit.symlink_to(victim)
    result = CliRunner().invoke(main, ["check", str(capture), "--junit", str(junit)])
    assert result.exit_code in (0, 1), result.output
    assert victim.read_text() == "keep me" and not junit.is_symlink()
    assert junit.read_text().startswith("<?xml")


@pytest.mark.parametrize("sessions", [3000])
def test_check_keeps_a_bounded_number_of_findings_per_code(tmp_path: Path, sessions: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_bridge.capture.reader import load_record
    from acp_bridge.health import offline as posthoc

    monkeypatch.setattr(posthoc, "KEPT_PER_CODE", 100)
    header = {"type": "header", "format": 1}
    records = [header] + [
        {"type": "message", "seq": i, "mono": float(i), "direction": "to-client", "kind": "notification",
         "verdict": "pass", "method": "session/update", "session": f"s{i}",
         "raw": orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
             "sessionId": f"s{i}", "update": {"sessionUpdate": "plan", "entries": []}}}).decode()}
        for i in range(1, sessions + 1)]
    report = posthoc.analyse("x", [load_record(orjson.dumps(r)) or {} for r in records])
    assert report.counts["update-unknown-session"] == sessions
    assert len([f for f in report.findings if f.code == "update-unknown-session"]) == 100


def test_a_session_that_is_a_big_object_is_logged_bounded(caplog: pytest.LogCaptureFixture) -> None:
    from acp_bridge.config import Config
    from acp_bridge.core.session import Connection
    from acp_bridge.health.findings import Finding, Level

    dog = watchdog.Watchdog(Config(), Connection())
    huge = {f"key{i}": "v" * 10_000 for i in range(100)}
    with caplog.at_level(logging.INFO, logger="acp_bridge.health"):
        dog._report(Finding("update-unknown-session", Level.WARNING, huge, "an update", 0.0))
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("health: update-unknown-session: an update (session {") and len(line) < 400
