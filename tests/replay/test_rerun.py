"""`acp-bridge replay CAPTURE --rules`: the golden captures re-run through today's rules, and
a change to a rule's output caught by them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from acp_bridge.capture.reader import load_record
from acp_bridge.commands import main
from acp_bridge.core.rewrites import suggestion_shapes, system_prompt, system_prompt_shapes
from tests.golden.record import CAPTURE_CONFIG, CASES
from tests.replay.drive import GOLDEN, GOLDENS, comparable, records


def rerun(name: str, *extra: str, options: list[str] | None = None) -> tuple[int, str, str]:
    """`acp-bridge replay GOLDEN --rules` with the options it was recorded with (in this process,
    so that a test can change a rule)."""
    recorded = [o for o in CASES[name]["options"] if o not in ("-c", CAPTURE_CONFIG)]
    args = ["replay", str(GOLDEN / f"{name}.jsonl"), "--rules", *(recorded if options is None else options), *extra]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("name", GOLDENS)
def test_the_golden_captures_go_out_as_recorded_under_todays_rules(name: str) -> None:
    """A rule change that alters what a real session sends fails here: regenerate the golden
    on purpose (tests/golden/README.md) when the change is meant."""
    status, out, _ = rerun(name)
    compared = sum(1 for r in records(GOLDEN / f"{name}.jsonl")
                   if not (r["verdict"] == "emit" and r["rules"] == ["bridge"]))
    assert (status, out) == (0, f"acp-bridge replay --rules: {GOLDEN / name}.jsonl: 0 messages differ "
                                f"of {compared} compared\n")


def test_a_changed_suggestion_conversion_fails_the_golden(monkeypatch: pytest.MonkeyPatch) -> None:
    """The legacy-to-new conversion now adds a `_meta` to each suggestion: the new-client
    golden reports the two suggestion updates the bridge sent, at their seq."""
    original = suggestion_shapes.to_new_shape

    def changed(items: Any) -> list[Any]:
        return [{**s, "_meta": {"changed": True}} for s in original(items)]

    monkeypatch.setattr(suggestion_shapes, "to_new_shape", changed)
    status, out, _ = rerun("v1-new-client-unlock")
    assert status == 1
    assert out.splitlines() == [
        'seq 10 <- session/update: changed {"/params/update/suggestions/0/_meta":{"now":{"changed":true}}}',
        'seq 18 <- session/update: changed {"/params/update/suggestions/0/_meta":{"now":{"changed":true}}}',
        f"acp-bridge replay --rules: {GOLDEN}/v1-new-client-unlock.jsonl: 2 messages differ of 20 compared",
    ]


def test_a_changed_system_prompt_injection_fails_the_golden(monkeypatch: pytest.MonkeyPatch) -> None:
    """The injection into session setup now also sets a `_meta` flag: both setup requests of
    the v2 golden differ, and nothing else."""
    original = system_prompt_shapes.inject_setup  # the rule calls it by its own module's name

    def changed(msg: Any, plan: Any, config: Any) -> Any:
        out = original(msg, plan, config)
        return None if out is None else {**out, "params": {**out["params"], "_meta": {"injected": 1}}}

    monkeypatch.setattr(system_prompt, "inject_setup", changed)
    status, out, _ = rerun("v2-resume-spec-dialect")
    assert status == 1
    assert out.splitlines()[:-1] == [
        'seq 3 -> session/new: changed {"/params/_meta":{"now":{"injected":1}}}',
        'seq 9 -> session/resume: changed {"/params/_meta":{"now":{"injected":1}}}',
    ]


def test_other_options_show_as_differences_in_json() -> None:
    """--no-suggestions over the v2 golden: the system prompt is not given, so it is missing
    from both setup requests; the filtered image suggestion is back; the suggestion the bridge
    dropped during the replay is forwarded now."""
    status, out, _ = rerun("v2-resume-spec-dialect", "--json", options=["--no-suggestions"])
    assert status == 1
    report = json.loads(out)
    spec = {"mode": "override", "content": [{"type": "text", "text": "Follow the team style guide."}]}
    stale = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess_v2_1", "update": {
        "sessionUpdate": "prompt_suggestions_update", "suggestions": [{"prompt": [{"type": "text", "text": "Stale"}]}]}}}
    assert report == {
        "differences": [
            {"seq": 3, "direction": "to-agent", "method": "session/new", "change": "changed",
             "diff": {"/params/systemPrompt": {"was": spec}}},
            {"seq": 8, "direction": "to-client", "method": "session/update", "change": "changed",
             "diff": {"/params/update/suggestions/1": {"now": {"prompt": [
                 {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}}}},
            {"seq": 9, "direction": "to-agent", "method": "session/resume", "change": "changed",
             "diff": {"/params/systemPrompt": {"was": spec}}},
            {"seq": 11, "direction": "to-client", "method": "session/update", "change": "forwarded now",
             "diff": {"": {"now": stale}}},
        ],
        "summary": {"differ": 4, "compared": 12, "not_rerun": 0},
        "failures": [],
    }


def test_a_removed_withdrawal_is_reported_as_no_longer_emitted() -> None:
    """Without the suggestions rule the bridge writes nothing itself: each message it wrote in
    the recording is reported as no longer emitted."""
    status, out, _ = rerun("v1-new-client-unlock", options=["--no-suggestions", "--system-prompt",
                                                            "Answer in one sentence."])
    lines = out.splitlines()
    assert status == 1
    assert [line.split(":")[0] for line in lines[:-1]] == [
        "seq 1 -> initialize",  # no AIR marker added
        "seq 9 <- session/update", "seq 10 <- session/update",  # the legacy form passed on, not converted
        "seq 13 <- session/update",  # no withdrawal
        "seq 17 <- session/update", "seq 18 <- session/update"]
    assert sum(" no longer emitted " in line for line in lines) == 3  # two conversions, one withdrawal
    assert lines[-1].endswith("6 messages differ of 20 compared")


def test_write_gives_a_capture_that_the_readers_read(tmp_path: Path) -> None:
    """--write OUT.jsonl: a capture of the re-run, record for record the golden's when nothing
    differs (times as recorded), which show and stats read and which re-runs to itself."""
    out = tmp_path / "rerun.jsonl"
    name = "v1-legacy-air-meta"
    status, _, _ = rerun(name, "--write", str(out))
    assert status == 0
    assert (out.stat().st_mode & 0o777) == 0o600
    assert [comparable(r) for r in records(out)] == [comparable(r) for r in records(GOLDEN / f"{name}.jsonl")]
    first = load_record(out.read_bytes().splitlines()[0])
    assert first is not None and first["type"] == "header" and first["include_system_prompt"] is True
    for command in (["show", str(out)], ["stats", str(out)]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 0, result.stderr
    again = CliRunner().invoke(main, ["replay", str(out), "--rules", "--system-prompt", "Follow the team style guide."])
    assert again.exit_code == 0


def test_the_config_file_layers_as_for_run(tmp_path: Path) -> None:
    """-c FILE: the same file and precedence as `run` (the command line wins over the file)."""
    config = tmp_path / "c.toml"
    config.write_text('[system_prompt]\ntext = "Follow the team style guide."\n[suggestions]\nenabled = false\n')
    assert rerun("v1-legacy-air-meta", options=["-c", str(config)])[0] == 1  # no suggestions: differs
    status, out, _ = rerun("v1-legacy-air-meta", options=["-c", str(config), "--system-prompt", "Other text."])
    assert status == 1 and '"was":"Follow the team style guide.","now":"Other text."' in out
    bad = tmp_path / "bad.toml"
    bad.write_text("[nope]\n")
    status, _, err = rerun("v1-legacy-air-meta", options=["-c", str(bad)])
    assert status == 2 and err.startswith("acp-bridge: ") and err.count("\n") == 1
    assert f"{bad}:" in err and "nope" in err


def test_invalid_redact_pointers_in_the_capture_header_are_left_out(tmp_path: Path) -> None:
    """A capture edited by hand: pointers that are not pointers are skipped (as `export`
    does), the valid ones still mask, and the re-run goes on."""
    lines = (GOLDEN / "v1-legacy-air-meta.jsonl").read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["redact"] = [*header["redact"], "no-slash", "/a/~2", 5]
    path = tmp_path / "edited.jsonl"
    path.write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    recorded = [o for o in CASES["v1-legacy-air-meta"]["options"] if o not in ("-c", CAPTURE_CONFIG)]
    result = CliRunner().invoke(main, ["replay", str(path), "--rules", *recorded])
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == f"acp-bridge replay --rules: {path}: {rerun('v1-legacy-air-meta')[1].split(': ', 2)[2]}"


def test_a_failing_rule_fails_open_and_with_strict_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that raises: as in `run`, the line goes out as it came (so the recorded rewrite
    shows as a difference); with --strict the re-run stops at that record, exit 1."""
    def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(system_prompt, "inject_setup", broken)
    status, out, err = rerun("v2-resume-spec-dialect")
    assert status == 1 and out.splitlines()[0].startswith('seq 3 -> session/new: changed {"/params/systemPrompt":{"was":')
    assert err == (f"acp-bridge replay --rules: {GOLDEN}/v2-resume-spec-dialect.jsonl: rule 'system-prompt' failed "
                   "on 4 messages, first on seq 3: RuntimeError: boom\n")
    status, out, _ = rerun("v2-resume-spec-dialect", "--json")
    assert (status, json.loads(out)["failures"]) == (
        1, [{"rule": "system-prompt", "count": 4, "seq": 3, "error": "RuntimeError: boom"}])
    status, out, err = rerun("v2-resume-spec-dialect", "--strict")
    assert (status, out) == (1, "")
    assert err.endswith("v2-resume-spec-dialect.jsonl: rule 'system-prompt' failed on the line recorded as seq 3: RuntimeError: boom\n")
