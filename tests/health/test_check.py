"""`acp-bridge check` on real-shaped captures (recorded here through the bridge, in this
process, with scripted agents shaped like the agents in the wild): the migration verdict of each pair,
the text, JSON and JUnit outputs, --fail-on, unreadable input, --schema, and `show
--findings`."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.cli_helpers import bridge_in_process
from tests.conftest import ROOT, SCRIPTED_AGENT, invoke
from tests.health import scenarios as sc

# A legacy agent as claude-agent-acp 0.101 is: no systemPrompt capability, suggestions only
# in the legacy form and only for clients with the AIR marker (which --unlock-legacy-agent adds).
LEGACY_AGENT = {"on": {
    "initialize": [{"respond": {"protocolVersion": 1, "agentCapabilities": {"promptCapabilities": {}},
                                "agentInfo": {"name": "@agentclientprotocol/claude-agent-acp", "version": "0.101.0"}}}],
    "session/new": [{"respond": {"sessionId": "s1"}}],
    "session/prompt": [{"send": sc.chunk("s1", "Done.")}, {"respond": {"stopReason": "end_turn"}}, {"send": sc.LEGACY}],
}}
# An agent that speaks the RFDs: the new suggestion form and the systemPrompt capability.
NEW_AGENT = {"on": {
    "initialize": [{"respond": {"protocolVersion": 1, "agentCapabilities": {
        "sessionCapabilities": {"systemPrompt": {}}}, "agentInfo": {"name": "new-agent", "version": "1"}}}],
    "session/new": [{"respond": {"sessionId": "s1"}}],
    "session/prompt": [{"send": sc.update("s1", sessionUpdate="prompt_suggestions_update", suggestions=[])},
                       {"send": sc.chunk("s1", "Done.")}, {"respond": {"stopReason": "end_turn"}},
                       {"send": sc.NEW_FORM}],
}}
PAIRS: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {
    "legacy-agent-new-client": (LEGACY_AGENT, sc.NEW_CLIENT, ["--unlock-legacy-agent", "--system-prompt", "Be brief."]),
    "new-agent-air-client": (NEW_AGENT, sc.AIR_ONLY, []),
    "new-agent-new-client": (NEW_AGENT, sc.NEW_CLIENT, []),
}


async def record(tmp: Path, name: str) -> Path:
    agent, client, options = PAIRS[name]
    script = tmp / f"{name}.json"
    script.write_text(json.dumps(agent))
    capture = tmp / f"{name}.jsonl"
    command = [sys.executable, "-u", str(SCRIPTED_AGENT), str(script)]
    async with bridge_in_process(["run", "--capture", str(capture), *options, "--", *command]) as bridge:
        with trio.fail_after(20):
            await bridge.send(sc.wire(sc.msg(id=0, method="initialize", params=client)))
            await bridge.read_until(b'"id": 0')
            await bridge.send(sc.wire(sc.msg(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []})))
            await bridge.read_until(b'"s1"')
            for n in (2, 3):
                await bridge.send(sc.wire(sc.msg(id=n, method="session/prompt", params={
                    "sessionId": "s1", "prompt": [{"type": "text", "text": f"prompt {n}"}]})))
                while bridge.received.count(b"Run the tests") < n - 1:  # this turn's suggestion is in
                    await read_more(bridge)
            await bridge.close_stdin()
            await bridge.read_all()
    return capture


async def read_more(bridge: Any) -> None:
    chunk = await bridge.proc.stdout.receive_some(1 << 16)
    if not chunk:
        raise AssertionError(f"EOF; got {bytes(bridge.received)[-300:]!r}")
    bridge.received += chunk


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("pairs")

    async def all_pairs() -> dict[str, Path]:
        return {name: await record(tmp, name) for name in PAIRS}

    return trio.run(all_pairs)


def check(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["check", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("name", "verdict", "dialects"), [
    ("legacy-agent-new-client", "this pair still needs the bridge because the agent sends suggestions in the legacy "
     "form (2x), converted for a client that reads the new form; the bridge withdrew suggestions on the next "
     "prompt (1x), which the agent did not do; the agent lacks the systemPrompt capability (the prompt went "
     "through meta)", {"meta": 1}),
    ("new-agent-air-client", "this pair still needs the bridge because the client reads only the legacy form and "
     "the agent sends the new form (4x)", {}),
    ("new-agent-new-client", "nothing was rewritten: the bridge can be removed", {}),
])
def test_each_pair_gets_its_migration_verdict(captures: dict[str, Path], name: str, verdict: str,
                                              dialects: dict[str, int]) -> None:
    status, out, _ = check(str(captures[name]), "--json")
    assert status == 0
    report = json.loads(out)["captures"][0]
    assert report["verdict"] == verdict
    assert report["migration"]["system_prompt"] == dialects
    assert {f["level"] for f in report["findings"]} <= {"info"}


def test_text_report_groups_by_finding_with_the_seqs_to_show(captures: dict[str, Path]) -> None:
    path = captures["legacy-agent-new-client"]
    status, out, _ = check(str(path))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == (f"{path}: 15 messages, protocol v1, client new-client 1, agent "
                        "@agentclientprotocol/claude-agent-acp 0.101.0")
    assert "  info    legacy-suggestions (2x)  seq 8, 14" in lines
    assert "  info    system-prompt-fallback (1x)  seq 3" in lines
    # counts as plain numbers: "legacy 0x" read like a hex number
    assert lines[-4] == ("  suggestions: the client reads the new form; the agent sent 2 legacy and 0 new; the client "
                         "received 0 legacy and 3 new; the bridge wrote 3 (withdrawals: 1) and took out 2")
    assert lines[-2].startswith("  verdict: this pair still needs the bridge because")
    assert lines[-1] == f"  to see them in place: acp-bridge show {path} --findings"


def test_show_findings_marks_them_under_their_message(captures: dict[str, Path]) -> None:
    result = CliRunner().invoke(main, ["show", str(captures["legacy-agent-new-client"]), "--findings"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    marked = [i for i, line in enumerate(lines) if line.startswith("    !! ")]
    assert [lines[i] for i in marked] == [
        "    !! info system-prompt-fallback: the system prompt went through meta: the agent lacks the systemPrompt "
        "capability",
        "    !! info legacy-suggestions: the agent sent a legacy suggestion (_meta.promptSuggestions)",
        "    !! info legacy-suggestions: the agent sent a legacy suggestion (_meta.promptSuggestions)",
    ]
    assert "session/new id 1" in lines[marked[0] - 1]
    assert "session_info_update" in lines[marked[1] - 1]


def test_fail_on_and_junit_over_several_captures(captures: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    header = {"type": "header", "format": 1, "time": 0.0, "mono": 0.0}
    records = [header, {"type": "message", "seq": 1, "time": 1.0, "mono": 1.0, "direction": "to-client",
                        "kind": "response", "verdict": "pass", "method": None, "id": 9, "session": None, "rules": [],
                        "raw": '{"jsonrpc":"2.0","id":9,"result":{}}\n'},
               {"type": "message", "seq": 2, "time": 2.0, "mono": 2.0, "direction": "to-client",
                "kind": "notification", "verdict": "pass", "method": "session/update", "id": None,
                "session": "x", "rules": [], "raw": json.dumps(sc.chunk("x", "y")) + "\n"}]
    broken.write_text("".join(json.dumps(r) + "\n" for r in records))
    junit = tmp_path / "out.xml"
    good = str(captures["new-agent-new-client"])
    assert check(good, str(broken), "--junit", str(junit))[0] == 1
    suites = ET.parse(junit).getroot()
    assert suites.get("tests") == "36" and suites.get("failures") == "2"
    failures = [(s.get("name"), c.get("name")) for s in suites for c in s.iter("testcase") if c.find("failure") is not None]
    assert failures == [(str(broken), "response-unknown-id"), (str(broken), "update-unknown-session")]
    assert check(good, str(broken), "--fail-on", "error")[0] == 1
    assert check(good, "--fail-on", "error")[0] == 0
    only_warning = tmp_path / "warning.jsonl"
    only_warning.write_text("".join(json.dumps(r) + "\n" for r in (header, records[2])))
    assert check(str(only_warning), "--fail-on", "error")[0] == 0
    assert check(str(only_warning))[0] == 1


@pytest.mark.parametrize(("content", "problem"), [
    (None, "{path}: cannot read: No such file or directory"),
    ("", "{path}: empty, not a capture"),
    ('{"jsonrpc":"2.0"}\n', "{path}:1: not a capture (the first line is not a header record)"),
    ('{"type":"header","format":2}\n', "{path}:1: capture format 2; this acp-bridge reads format 1"),
    ('{"type":"header","format":true}\n', "{path}:1: capture format True; this acp-bridge reads format 1"),
    ('{"type":"header","format":1}\nnot json\n{"type":"end"}\n', "{path}:2: not a capture record"),
    ('{"type":"header","format":1}\n{"type":"end"}\nnot json\n', "{path}:3: not a capture record"),
])
def test_unreadable_input_is_one_line_and_exit_2(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "c.jsonl"
    if content is not None:
        path.write_text(content)
    status, out, err = check(str(path))
    assert (status, out, err) == (2, "", f"acp-bridge: {problem.format(path=path)}\n")


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    """A bridge killed while writing leaves a last line without its newline."""
    path = tmp_path / "c.jsonl"
    path.write_text('{"type":"header","format":1,"mono":0}\n{"type":"message","seq":1,"dire')
    status, out, _ = check(str(path))
    assert status == 0 and out.startswith(f"{path}: 0 messages, no end record")


def test_check_of_a_missing_file_is_exit_2(tmp_path: Path) -> None:
    """(The real CLI's exit 2 on bad input: tests/replay/test_server.py, from a real process.)"""
    result = invoke(["check", str(tmp_path / "missing.jsonl")])
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr.decode().splitlines() == [f"acp-bridge: {tmp_path / 'missing.jsonl'}: cannot read: "
                                                   "No such file or directory"]


SCHEMAS = Path(os.environ.get("ACP_SCHEMA_DIR", ROOT / ".schemas" / "package" / "schema"))


def test_schema_validation(captures: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("jsonschema")
    if not (SCHEMAS / "v1" / "schema.json").is_file():
        pytest.skip(f"ACP schemas not found in {SCHEMAS} (.ci/run fetches them with npm pack)")
    capture = captures["new-agent-new-client"]
    status, out, _ = check(str(capture), "--schema", str(SCHEMAS.parent), "--json")
    [invalid] = [f for f in json.loads(out)["captures"][0]["findings"] if f["code"] == "schema-invalid"]
    # The SDK 2.4.0 v1 schema predates prompt_suggestions_update (its union is closed): those
    # updates, and only those, fail there.
    suggestions = {r["seq"] for r in map(json.loads, capture.read_text().splitlines())
                   if r["type"] == "message" and "prompt_suggestions_update" in (r.get("out") or r.get("raw") or "")}
    assert status == 1 and {o["seq"] for o in invalid["occurrences"]} == suggestions and len(suggestions) == 5
    bad = tmp_path / "bad.jsonl"
    records = [{"type": "header", "format": 1, "mono": 0.0},
               {"type": "message", "seq": 1, "mono": 1.0, "direction": "to-agent", "kind": "request",
                "verdict": "pass", "method": "session/prompt", "id": 1, "session": "s", "rules": [],
                "raw": json.dumps(sc.msg(id=1, method="session/prompt", params={"sessionId": "s"})) + "\n"}]
    bad.write_text("".join(json.dumps(r) + "\n" for r in records))
    status, out, _ = check(str(bad), "--schema", str(SCHEMAS), "--json")
    assert status == 1
    [finding] = [f for f in json.loads(out)["captures"][0]["findings"] if f["code"] == "schema-invalid"]
    assert finding["occurrences"][0]["seq"] == 1
    assert finding["occurrences"][0]["message"] == "v1 schema: session/prompt params: 'prompt' is a required property"


def test_schema_dir_without_schemas_is_exit_2(captures: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("jsonschema")
    status, _, err = check(str(captures["new-agent-new-client"]), "--schema", str(tmp_path))
    assert status == 2
    assert err == (f"acp-bridge: {tmp_path}: no ACP schema found (expected v1/schema.json or v2/schema.json, "
                   "as in the npm package @agentclientprotocol/sdk: `npm pack @agentclientprotocol/sdk`, unpack "
                   "the .tgz and give the folder it makes)\n")


SCHEMA_PROBLEMS = [
    pytest.param(b"[]", "not a JSON schema: it holds a JSON array, not an object", id="array"),
    pytest.param(b"5", "not a JSON schema: it holds a JSON number, not an object", id="number"),
    pytest.param(b"null", "not a JSON schema: it holds a JSON null, not an object", id="null"),
    pytest.param(b'{"$defs": []}', "not a JSON schema: its $defs is a JSON array, not an object", id="defs-array"),
    pytest.param(b'{"type": 5}', "not a valid JSON schema at /type: 5 is not valid under any of the given schemas",
                 id="bad-keyword"),
    pytest.param(b'{"$defs": {"A": 5}, "$ref": "#/$defs/A"}',
                 "not a valid JSON schema at /$defs/A: 5 is not of type 'object', 'boolean'",
                 id="bad-definition"),
    pytest.param(b'{"properties": {"jsonrpc": {"pattern": "("}}}',
                 "not a valid JSON schema at /properties/jsonrpc/pattern: '(' is not a 'regex'", id="bad-pattern"),
    pytest.param(b'{"$ref": "#/nope"}',
                 "the schema cannot be used: PointerToNowhere: '/nope' does not exist within {'$ref': '#/nope'}",
                 id="ref-to-nowhere"),
    pytest.param(b'{"$ref": "#"}', "the schema cannot be used: a $ref loop, or nesting too deep", id="ref-loop"),
    pytest.param(b"notjson", "cannot read the schema: Expecting value: line 1 column 1 (char 0)", id="not-json"),
    pytest.param(b"\xff{}", "cannot read the schema: 'utf-8' codec can't decode byte 0xff in position 0: invalid "
                 "start byte", id="not-utf-8"),
    pytest.param(b"[" * 100_000, "cannot read the schema: nested too deep", id="too-deep"),
]


@pytest.mark.parametrize(("content", "problem"), SCHEMA_PROBLEMS)
def test_a_schema_file_that_is_no_usable_schema_is_named_with_its_problem(
        captures: dict[str, Path], tmp_path: Path, content: bytes, problem: str) -> None:
    """Said against the schema file, not as an internal error against the capture; exit 2."""
    pytest.importorskip("jsonschema")
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "schema.json").write_bytes(content)
    status, out, err = check(str(captures["new-agent-new-client"]), "--schema", str(tmp_path))
    assert (status, out, err) == (2, "", f"acp-bridge: {tmp_path}/v1/schema.json: {problem}\n")
