"""`acp-bridge demo` runs on its own and shows both rewrites."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import run_cli


async def test_demo_shows_the_conversion_the_withdrawal_and_the_injection(tmp_path: Path) -> None:
    result = await run_cli(["demo", "--no-color", "--dir", str(tmp_path)], timeout=60)
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert '{"sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": {"suggestions": [{"text": "Now run the test suite"}]}}}' in out
    assert '{"sessionUpdate": "prompt_suggestions_update", "suggestions": [{"prompt": [{"type": "text", "text": "Now run the test suite"}]}]}' in out
    assert '{"sessionUpdate": "prompt_suggestions_update", "suggestions": []}' in out
    assert '[{"type": "text", "text": "Answer in one sentence. Never touch files outside src/."}, {"type": "text", "text": "Explain the parser"}]' in out
    assert f"recorded in {tmp_path / 'capture.jsonl'}" in out
    records = [orjson.loads(line) for line in (tmp_path / "capture.jsonl").read_bytes().splitlines()]
    assert len(records) > 10
