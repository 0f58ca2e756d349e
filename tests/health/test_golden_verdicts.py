"""`check` over the golden captures (tests/golden, recorded through the bridge): the findings
and the migration verdict each real-shaped pair gets."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"

EXPECTED: dict[str, tuple[list[tuple[str, list[int]]], str]] = {
    "v1-legacy-air-meta": (
        [("air-only-client", [1]), ("legacy-suggestions", [10, 18]), ("system-prompt-fallback", [3])],
        "this pair still needs the bridge because the bridge withdrew suggestions on the next prompt (1x), which "
        "the agent did not do; the agent lacks the systemPrompt capability (the prompt went through meta)"),
    "v1-new-client-unlock": (
        [("legacy-suggestions", [9, 17]), ("system-prompt-fallback", [5])],
        "this pair still needs the bridge because the agent sends suggestions in the legacy form (2x), converted "
        "for a client that reads the new form; the bridge withdrew suggestions on the next prompt (1x), which the "
        "agent did not do; the agent lacks the systemPrompt capability (the prompt went through first-prompt)"),
    "v2-resume-spec-dialect": (
        [],
        "this pair still needs the bridge because the bridge took out suggestions the agent sent where the client "
        "must not get them (2x: during history replay, or for a turn already over); the system prompt comes from "
        "the bridge's configuration"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_check_gives_each_golden_pair_its_verdict(name: str) -> None:
    result = CliRunner().invoke(main, ["check", "--json", str(GOLDEN / f"{name}.jsonl")])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = orjson.loads(result.output)["captures"][0]
    findings, verdict = EXPECTED[name]
    assert sorted((f["code"], [o["seq"] for o in f["occurrences"]]) for f in report["findings"]) == findings
    assert all(f["level"] == "info" for f in report["findings"])
    assert report["verdict"] == verdict


def test_every_golden_capture_has_a_verdict_here() -> None:
    assert sorted(path.stem for path in GOLDEN.glob("*.jsonl")) == sorted(EXPECTED)
