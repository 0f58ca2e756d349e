"""User rules in a real run (`acp-bridge run` with a scripted agent): a `[[rewrite]]` table
(configs/no-usage-updates.toml, the documented fix for clients that fail on `usage_update`)
changing live traffic, its name in the capture, `stats` and `check`, the same table offline
through `replay --rules`; and a rule that raises, failing open (said once) or, with --strict,
stopping the bridge with its name. The API's cases are tested in-process (tests/core/,
tests/config/); here only what needs a real run: `run` in this process with a real agent
(tests/cli_helpers.py), the real CLI process where the exit is the subject and for
the SDK agent."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import trio
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.cli_helpers import run_cli_in_process
from tests.commands.helpers import ANSWERS, INIT, PROMPT, SID, Client, line, script
from tests.conftest import ROOT, SCRIPTED_AGENT, TESTS, invoke, run_cli

USAGE = {"jsonrpc": "2.0", "method": "session/update",
         "params": {"sessionId": SID, "update": {"sessionUpdate": "usage_update", "used": 53000, "size": 200000}}}
CHUNK = {"jsonrpc": "2.0", "method": "session/update",
         "params": {"sessionId": SID, "update": {"sessionUpdate": "agent_message_chunk",
                                                 "content": {"type": "text", "text": "hi"}}}}


async def bridge(tmp_path: Path, *options: str, on_prompt: list[dict[str, Any]], process: bool = False) -> Any:
    """`run` in front of the scripted agent: in this process (tests/cli_helpers.py),
    or with `process` as `python -m acp_bridge`."""
    args = ["run", "--no-health", *options, "--", sys.executable, "-u", str(SCRIPTED_AGENT),
            str(script(tmp_path, on_prompt))]
    return await (run_cli if process else run_cli_in_process)(args, line(INIT) + line(PROMPT), timeout=20)


async def test_the_usage_update_table_live_in_the_capture_and_offline(tmp_path: Path) -> None:
    """The bug captured, the table tried on the capture, then run: the client no longer gets
    the update, and the table's name is what `stats` and `check` show."""
    table = str(ROOT / "configs" / "no-usage-updates.toml")
    turn: list[dict[str, Any]] = [{"send": USAGE}, {"send": CHUNK}, {"respond": ANSWERS[1]["result"]}]
    before = await bridge(tmp_path, "--capture", str(tmp_path / "bug.jsonl"), on_prompt=turn)
    assert before.stdout == line(ANSWERS[0]) + line(USAGE) + line(CHUNK) + line(ANSWERS[1])

    offline = CliRunner().invoke(main, ["replay", str(tmp_path / "bug.jsonl"), "--rules", "-c", table])
    assert (offline.exit_code, offline.stderr) == (1, "")
    assert offline.stdout.splitlines()[0].startswith("seq 4 <- session/update: dropped now ")
    assert offline.stdout.splitlines()[-1].endswith(": 1 message differs of 6 compared")
    by_file = CliRunner().invoke(main, ["replay", str(tmp_path / "bug.jsonl"), "--rules", "--rule",
                                        str(ROOT / "configs" / "rules" / "known_updates_only.py")])
    assert (by_file.exit_code, by_file.stdout.splitlines()[0][:37]) == (1, "seq 4 <- session/update: dropped now ")

    after = await bridge(tmp_path, "-c", table, "--capture", str(tmp_path / "fixed.jsonl"), on_prompt=turn)
    assert (after.returncode, after.stderr) == (0, b"")
    assert after.stdout == line(ANSWERS[0]) + line(CHUNK) + line(ANSWERS[1])  # the others byte for byte
    records = [orjson.loads(r) for r in (tmp_path / "fixed.jsonl").read_bytes().splitlines()]
    assert [(r["verdict"], r["rules"]) for r in records if r.get("rules")] == [("drop", ["no-usage-updates"])]
    stats = CliRunner().invoke(main, ["stats", str(tmp_path / "fixed.jsonl")])
    assert "no-usage-updates                     drop            1" in stats.stdout.splitlines()
    check = CliRunner().invoke(main, ["check", str(tmp_path / "fixed.jsonl")])
    assert "because it changed or wrote messages (no-usage-updates 1x)" in check.stdout


RAISING = """\
from acp_bridge.rules import Rule

class Flaky(Rule):
    name = "flaky"
    triggers = (b'"agent_message_chunk"',)

    def notification(self, msg, session):
        raise RuntimeError("boom")

rules = [Flaky()]
"""


async def test_a_rule_that_raises_fails_open_said_once_and_stops_the_bridge_under_strict(tmp_path: Path) -> None:
    rule = tmp_path / "flaky.py"
    rule.write_text(RAISING)
    turn: list[dict[str, Any]] = [{"send": CHUNK}, {"send": CHUNK}, {"send": CHUNK}, {"respond": ANSWERS[1]["result"]}]
    loose = await bridge(tmp_path, "--rule", str(rule), "--capture", str(tmp_path / "c.jsonl"), on_prompt=turn)
    assert (loose.returncode, loose.stdout) == (0, line(ANSWERS[0]) + line(CHUNK) * 3 + line(ANSWERS[1]))
    assert loose.stderr.decode().splitlines() == [
        "acp-bridge: WARNING: rule 'flaky' failed: RuntimeError: boom, on <Frame <- notification session/update "
        "172B>; the line went on as it came (its further failures are not reported; -vv shows each, with its "
        "traceback)"]
    records = [orjson.loads(r) for r in (tmp_path / "c.jsonl").read_bytes().splitlines()]
    assert [(r["verdict"], r["rules"], r["error"]) for r in records if r.get("verdict") == "error"] == [
        ("error", ["flaky"], "RuntimeError: boom")] * 3

    # The process: what stops it is reported by the command, as its exit status and last line.
    strict = await bridge(tmp_path, "--rule", str(rule), "--strict", on_prompt=turn, process=True)
    stopped = {"code": -32603, "message": "acp-bridge stopped before the agent answered: rule 'flaky' failed: "
                                          "RuntimeError: boom (strict is set)"}
    answered = {msg["id"]: msg for msg in map(orjson.loads, strict.stdout.splitlines())}
    # The initialize answer may share the agent's read with the chunk: it goes out all the
    # same, before the bridge stops, as it would have one line at a time.
    assert answered[0] == ANSWERS[0]
    assert (strict.returncode, len(answered), answered[2]) == (1, 2, {"jsonrpc": "2.0", "id": 2, "error": stopped})
    assert strict.stderr.decode().splitlines()[-1] == "acp-bridge: rule 'flaky' failed: RuntimeError: boom"


async def test_the_usage_update_table_against_an_sdk_agent(tmp_path: Path) -> None:
    """The official Python SDK's agent (tests/agents/sdk_agent.py --usage) streams a
    `usage_update` before its chunks: with the table the client gets the chunks only."""
    agent = [sys.executable, "-u", str(TESTS / "agents" / "sdk_agent.py"), "--usage"]
    command = [sys.executable, "-m", "acp_bridge", "run", "--no-health", "-c",
               str(ROOT / "configs" / "no-usage-updates.toml"), "--capture", str(tmp_path / "c.jsonl"), "--", *agent]
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
    prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
              "params": {"sessionId": "sess_1", "prompt": [{"type": "text", "text": "hi"}]}}
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(partial(trio.run_process, command, stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, check=False))
            client = Client(proc)
            for msg in (INIT, new):
                await client.send(msg)
                await client.lines(1)
            await client.send(prompt)
            turn = [orjson.loads(got) for got in await client.lines(3)]  # two chunks, the answer
            assert await client.close() == b""
    assert [m.get("params", {}).get("update", {}).get("sessionUpdate") or m.get("result") for m in turn] == [
        "agent_message_chunk", "agent_message_chunk", {"stopReason": "end_turn"}]
    records = [orjson.loads(r) for r in (tmp_path / "c.jsonl").read_bytes().splitlines()]
    assert [(r["verdict"], r["rules"]) for r in records if r.get("rules")] == [("drop", ["no-usage-updates"])]


async def test_a_table_that_drops_the_prompt_has_it_answered_said_and_captured(tmp_path: Path) -> None:
    """The client would wait for its prompt's answer for ever (the agent never got it):
    the bridge answers it with an error naming the table, once on stderr, in the capture."""
    config = tmp_path / "c.toml"
    config.write_text('[[rewrite]]\nname = "no-prompts"\nmethod = "session/prompt"\ndrop = true\n')
    ran = await bridge(tmp_path, "-c", str(config), "--capture", str(tmp_path / "c.jsonl"),
                       on_prompt=[{"respond": ANSWERS[1]["result"]}])
    answer = (b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"acp-bridge: rule \'no-prompts\' dropped '
              b'this request: it was not sent to the agent","data":{"rule":"no-prompts"}}}\n')
    # The bridge's answer goes out as the client's read is relayed: before or after the
    # agent's answer to initialize.
    assert (ran.returncode, sorted(ran.stdout.splitlines(keepends=True))) == (0, sorted([line(ANSWERS[0]), answer]))
    assert ran.stderr.decode().splitlines() == [
        "acp-bridge: WARNING: rule 'no-prompts' dropped the client's request session/prompt id 2; the bridge answered "
        "it with an error naming the rule, so that the client does not wait for ever (further ones by this rule "
        "are not reported)"]
    records = [orjson.loads(r) for r in (tmp_path / "c.jsonl").read_bytes().splitlines()]
    assert [(r["direction"], r["verdict"], r["method"], r["rules"], r.get("raw"), r.get("out")) for r in records
            if r.get("rules")] == [
        ("to-agent", "drop", "session/prompt", ["no-prompts"], line(PROMPT).decode(), None),
        ("to-client", "emit", "session/prompt", ["no-prompts"], None, answer.decode())]


async def test_a_rule_that_fails_is_visible_afterwards(tmp_path: Path) -> None:
    """What a new user meets after a rule failed on every chunk: the health log says so at
    error, the capture holds the finding, `check` fails with it and will not say the bridge can
    go, `replay --rules` exits 1 naming the rule, and the exported page counts it."""
    rule = tmp_path / "flaky.py"
    rule.write_text(RAISING)
    capture = tmp_path / "c.jsonl"
    turn: list[dict[str, Any]] = [{"send": CHUNK}, {"send": CHUNK}, {"send": CHUNK}, {"respond": ANSWERS[1]["result"]}]
    run = await run_cli_in_process(["run", "--rule", str(rule), "--capture", str(capture), "--", sys.executable, "-u",
                                    str(SCRIPTED_AGENT), str(script(tmp_path, turn))],
                                   line(INIT) + line(PROMPT), timeout=20)
    assert run.returncode == 0
    assert ("acp-bridge: ERROR: health: rule-failed: rule 'flaky' failed: RuntimeError: boom (the message went on "
            "as it came) (session s)") in run.stderr.decode().splitlines()
    records = [orjson.loads(r) for r in capture.read_bytes().splitlines()]
    errors = [r["seq"] for r in records if r.get("verdict") == "error"]
    assert len(errors) == 3
    assert [(r["code"], r["level"], r["about"], r["count"], r.get("total")) for r in records
            if r.get("code") == "rule-failed"] == [("rule-failed", "error", errors[0], 1, None),
                                           ("rule-failed", "error", None, 3, True)]

    check = CliRunner().invoke(main, ["check", str(capture), "--fail-on", "error"])  # the session is a ghost: warnings
    assert check.exit_code == 1
    assert f"  error   rule-failed (3x)  seq {errors[0]}" in check.stdout.splitlines()
    assert ("  verdict: rules failed (flaky 3x): what they would have done is not known, so whether the bridge "
            "can be removed is not either; fix them and check a new capture") in check.stdout.splitlines()

    replay = CliRunner().invoke(main, ["replay", str(capture), "--rules", "--rule", str(rule)])
    assert replay.exit_code == 1
    assert replay.stdout == f"acp-bridge replay --rules: {capture}: 0 messages differ of 7 compared\n"
    assert replay.stderr.splitlines()[-1] == (
        f"acp-bridge replay --rules: {capture}: rule 'flaky' failed on 3 messages, first on seq "
        f"{errors[0]}: RuntimeError: boom")

    page = tmp_path / "c.html"
    assert CliRunner().invoke(main, ["export", str(capture), "--html", str(page)]).exit_code == 0
    html = page.read_text()
    summary = orjson.loads(html.split('class="summary">', 1)[1].split("</script>", 1)[0])[0]
    marks = orjson.loads(html.split('class="findings">', 1)[1].split("</script>", 1)[0])
    assert summary["findings"] == len(marks)
    assert [m for m in marks if m[2] == "rule-failed"] == [
        [errors[0], "error", "rule-failed", "rule 'flaky' failed: RuntimeError: boom (the message went on as it came)"]]


def doc_rules(tmp_path: Path) -> dict[str, Path]:
    """The rule files docs/rules.md shows (each Python block that starts `# rules/NAME.py`,
    indented or not), written to `tmp_path` as they are printed there."""
    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    files = {}
    for block in re.finditer(r"^(?P<indent> *)```python\n(?P<body>.*?)^(?P=indent)```", text, re.M | re.S):
        code = "".join(row.removeprefix(block["indent"]) for row in block["body"].splitlines(keepends=True))
        name = code.splitlines()[0].removeprefix("# rules/")
        files[name] = tmp_path / name
        files[name].write_text(code, encoding="utf-8")
    return files


async def test_the_documented_rules_in_the_short_and_the_long_form_do_the_same(tmp_path: Path) -> None:
    """docs/rules.md's first rule as a decorated hook and as API 1 first wrote it: run, each
    drops the update and leaves the rest byte for byte; replayed on the capture of the bug,
    each finds the one message."""
    rules = doc_rules(tmp_path)
    assert sorted(rules) == ["no_usage.py", "no_usage_long.py", "paused.py"]
    turn: list[dict[str, Any]] = [{"send": USAGE}, {"send": CHUNK}, {"respond": ANSWERS[1]["result"]}]
    await bridge(tmp_path, "--capture", str(tmp_path / "bug.jsonl"), on_prompt=turn)
    for rule, name in (("no_usage.py", "NoUsageUpdates"), ("no_usage_long.py", "no-usage-updates")):
        ran = await bridge(tmp_path, "--strict", "--rule", str(rules[rule]), "--capture", str(tmp_path / f"{rule}.jsonl"),
                           on_prompt=turn)
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, line(ANSWERS[0]) + line(CHUNK) + line(ANSWERS[1]), b"")
        records = [orjson.loads(r) for r in (tmp_path / f"{rule}.jsonl").read_bytes().splitlines()]
        assert [(r["verdict"], r["rules"]) for r in records if r.get("rules")] == [("drop", [name])]
        offline = invoke(["replay", str(tmp_path / "bug.jsonl"), "--rules", "--rule", str(rules[rule])])
        assert (offline.returncode, offline.stderr) == (1, b"")
        shown = offline.stdout.decode().splitlines()
        assert (shown[0][:37], shown[-1][-33:]) == ("seq 4 <- session/update: dropped now ", ": 1 message differs of 6 compared")


async def test_the_walk_through_from_a_capture_to_a_fix(tmp_path: Path) -> None:
    """docs/rules.md's walk-through, with its rule file: a `Match` on a response whose hook
    returns nothing for what it leaves alone. The bug captured, the rule tried on the
    capture, then run: the client gets `end_turn`, the rest byte for byte."""
    paused = doc_rules(tmp_path)["paused.py"]
    turn: list[dict[str, Any]] = [{"send": CHUNK}, {"respond": {"stopReason": "paused", "n": 1e3}}]
    bug = await bridge(tmp_path, "--capture", str(tmp_path / "bug.jsonl"), on_prompt=turn)
    assert bug.stdout.splitlines()[-1] == b'{"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "paused", "n": 1000.0}}'

    offline = invoke(["replay", str(tmp_path / "bug.jsonl"), "--rules", "--rule", str(paused)])
    assert (offline.returncode, offline.stderr) == (1, b"")
    assert offline.stdout.decode().splitlines()[0] == (
        'seq 5 <- session/prompt: changed {"/result/stopReason":{"was":"paused","now":"end_turn"}}')

    fixed = await bridge(tmp_path, "--strict", "--rule", str(paused), on_prompt=turn)
    assert (fixed.returncode, fixed.stderr) == (0, b"")
    assert fixed.stdout == line(ANSWERS[0]) + line(CHUNK) + b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","n":1000.0}}\n'
