"""The health watchdog's findings reach the collector as span events when both run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import SCRIPTED_AGENT
from tests.health import scenarios as sc
from tests.telemetry.collector import otel_env, running_collector

AGENT = {"on": {
    "initialize": [{"respond": sc.AGENT_V1_INIT}],
    "session/new": [{"respond": {"sessionId": "s1"}}, {"send": sc.LEGACY}],
}}


def test_a_finding_is_an_event_on_its_session(tmp_path: Path) -> None:
    script = tmp_path / "agent.json"
    script.write_text(json.dumps(AGENT))
    client = sc.wire(sc.msg(id=0, method="initialize", params=sc.NEW_CLIENT),
                     sc.msg(id=1, method="session/new", params={"cwd": "/tmp", "mcpServers": []}))
    with running_collector() as collector:
        done = subprocess.run([sys.executable, "-m", "acp_bridge", "run", "--otlp", "--", sys.executable, "-u",
                               str(SCRIPTED_AGENT), str(script)], input=client, capture_output=True,
                              env=otel_env(collector), timeout=60, check=False)
        spans = collector.wait_spans(3)
    assert done.returncode == 0, done.stderr.decode()
    events = [(span["name"], event) for span in spans for event in span["events"]
              if event[0] == "acp_bridge.finding"]
    # The legacy suggestion came with no turn running (the client sends no prompt, so none can
    # start first): its finding hangs on the session's span; its message only with --otlp-content.
    assert events == [("session", ("acp_bridge.finding", {
        "acp_bridge.finding.code": "legacy-suggestions", "acp_bridge.finding.level": "info"}))]
