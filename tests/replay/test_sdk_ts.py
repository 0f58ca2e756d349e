"""A session recorded through the bridge (the demo) replayed to a client written with the
official TypeScript SDK: it receives the same session updates, stop reasons and suggestions
as in the recording.

Runs where Node.js and the SDK are installed beside the tests (`npm install --prefix .sdk-ts
@agentclientprotocol/sdk zod`, which .ci/run does when npm is there); skips otherwise. The SDK
(2.4) rejects `prompt_suggestions_update` as invalid params, so the suggestions are checked on
the wire, as in test_sdk.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.replay.drive import recorded_updates, replayed, stop_reasons, suggestions

SDK = ROOT / ".sdk-ts"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="Node.js is not installed, so the TypeScript SDK cannot run"),
    pytest.mark.skipif(not (SDK / "node_modules" / "@agentclientprotocol" / "sdk").is_dir(),
                       reason="the TypeScript SDK is not installed: npm install --prefix .sdk-ts "
                              "@agentclientprotocol/sdk zod (.ci/run does it where npm is available)"),
]


def test_the_demo_session_replays_to_the_typescript_sdk_client(demo: Path, tmp_path: Path) -> None:
    capture, wire = demo, tmp_path / "wire.jsonl"
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps(["Explain the parser", "Now run the test suite"]))
    assert NODE is not None
    done = subprocess.run([NODE, str(Path(__file__).parent / "ts_client.mjs"), str(SDK), str(prompts), "--",
                           *replayed(capture, wire)], capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    got = json.loads(done.stdout)
    expected = recorded_updates(capture)
    assert got["sessionId"] == "sess_1"
    assert got["stopReasons"] == stop_reasons(capture) == ["end_turn", "end_turn"]
    assert [tuple(u) for u in got["updates"]] == [u for u in expected
                                                  if u[1]["sessionUpdate"] != "prompt_suggestions_update"]
    assert suggestions(recorded_updates(wire)) == suggestions(expected)
    assert len(suggestions(expected)) == 3
