"""End to end, through real `acp-bridge run --otlp` and `export --otlp` processes and the
test OTLP receiver: what a hostile review found (fields of the wrong type from the agent,
secrets in titles, error messages and split replies, a bad OTEL_* value, a collector that
redirects, a malformed header variable holding a key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.capture.samples import FIXED, HEADER
from tests.conftest import SCRIPTED_AGENT

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is in the test extra")

from tests.telemetry.collector import Collector, running_collector

SECRET = "TOPSECRET-SYSTEM-PROMPT-TEXT"
TITLE = "Run curl -H 'Authorization: Bearer sk-live-ABC123' https://x"


def env_for(endpoint: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_METRICS_EXPORTER="none", OTEL_BSP_SCHEDULE_DELAY="100")
    env.update(extra)
    return env


def bridge(tmp_path: Path, script: dict[str, Any], stdin: bytes, env: dict[str, str],
           *options: str) -> subprocess.CompletedProcess[bytes]:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(script))
    return subprocess.run([sys.executable, "-m", "acp_bridge", "run", "--no-health", *options, "--",
                           sys.executable, "-u", str(SCRIPTED_AGENT), str(path)],
                          input=stdin, env=env, capture_output=True, timeout=60, check=False)


def requests(*msgs: tuple[int, str, dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}) + b"\n" for i, m, p in msgs)


def notify(update: dict[str, Any]) -> dict[str, Any]:
    return {"send": {"jsonrpc": "2.0", "method": "session/update",
                     "params": {"sessionId": "$sessionId", "update": update}}}


def test_wrong_typed_fields_from_the_agent_neither_crash_nor_stop_the_relay(tmp_path: Path) -> None:
    """The review's crash: a tool call's status as an object and a stop reason as a list.
    Every prompt is still answered, the exit status is 0, and the spans arrive (a prompt
    per session: the order the two sides' lines meet in does not change the spans)."""
    script = {"on": {"session/prompt": [
        notify({"sessionUpdate": "tool_call", "toolCallId": "t", "status": {"x": 1}}),
        {"respond": {"stopReason": ["end_turn"]}}]}}
    stdin = requests(*((i, "session/prompt", {"sessionId": f"s{i}", "prompt": []}) for i in (1, 2, 3)))
    with running_collector() as collector:
        done = bridge(tmp_path, script, stdin, env_for(collector.endpoint), "--otlp")
        spans = collector.wait_spans(9)
    assert (done.returncode, done.stderr.decode()) == (0, "")
    assert [orjson.loads(out).get("id") for out in done.stdout.splitlines()] == [None, 1, None, 2, None, 3]
    assert sorted((span["name"], span["attributes"].get("gen_ai.conversation.id"),
                   span["attributes"].get("acp.unfinished", False)) for span in spans) == sorted(
        # the tool never said it was done (its status is not one): it ends with its turn
        (name, f"s{i}", unfinished) for i in (1, 2, 3)
        for name, unfinished in (("execute_tool", True), ("invoke_agent", False), ("session", True)))
    assert all("gen_ai.response.finish_reasons" not in span["attributes"] for span in spans)


LEAKY = {"on": {
    "initialize": [{"respond": {"protocolVersion": 1, "agentInfo": {"name": "leak", "version": "1"}}}],
    "session/new": [{"respond": {"sessionId": "s1"}}],
    "session/prompt": [
        notify({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": SECRET[:10]}}),
        notify({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": SECRET[10:]}}),
        notify({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": TITLE, "kind": "execute",
                "status": "completed", "rawInput": {"command": "export API_TOKEN=sk-live-ABC123"}}),
        {"error": {"code": -32000, "message": f"bad system prompt: {SECRET}"}}]}}
CONVERSATION = requests((0, "initialize", {"protocolVersion": 1}), (1, "session/new", {"cwd": "/", "mcpServers": []}),
                        (2, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}))


def leaked(tmp_path: Path, option: str) -> dict[str, dict[str, Any]]:
    config = tmp_path / "bridge.toml"
    config.write_text(f'[system_prompt]\ntext = "{SECRET}"\n')
    with running_collector() as collector:
        done = bridge(tmp_path, LEAKY, CONVERSATION, env_for(collector.endpoint), "-c", str(config), option)
        spans = collector.wait_spans(5)
    assert done.returncode == 0, done.stderr
    assert SECRET in done.stdout.decode()  # the agent did echo it: the client sees what the agent sent
    assert "TOPSECRET" not in repr(spans) and "sk-live" not in repr(spans)
    return {span["name"]: span["attributes"] for span in spans}


def test_without_content_no_title_and_no_secret_leave_the_machine(tmp_path: Path) -> None:
    spans = leaked(tmp_path, "--otlp")
    assert spans["execute_tool execute"] == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "t1", "gen_ai.conversation.id": "s1",
        "acp.tool_call.kind": "execute", "acp.tool_call.status": "completed", "gen_ai.tool.name": "execute"}


def test_with_content_every_string_is_masked_as_it_is_sent(tmp_path: Path) -> None:
    """The system prompt in an error message and over two reply chunks, a bearer token
    in a title and an API token in a tool's input: masked, as the capture masks them."""
    spans = leaked(tmp_path, "--otlp-content")
    tool, turn = spans["execute_tool execute"], spans["invoke_agent"]  # prompted before initialize's answer
    assert (tool["acp.tool_call.title"], tool["gen_ai.tool.call.arguments"]) == (
        "Run curl -H 'Authorization: Bearer <redacted>' https://x", '{"command":"export API_TOKEN=<redacted>"}')
    assert turn["rpc.jsonrpc.error_message"] == "bad system prompt: <system prompt>"
    assert orjson.loads(turn["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "<system prompt>"}]}]


def test_an_otel_value_the_sdk_refuses_as_it_is_imported_is_a_usage_error(tmp_path: Path) -> None:
    """OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT=-1 makes the SDK raise while it is imported: exit 2,
    one line, and the agent is never started; `export --otlp` the same."""
    env = env_for("http://127.0.0.1:9", OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT="-1")
    done = bridge(tmp_path, {"start": [{"stderr": "agent started"}]}, b"", env, "--otlp")
    said = done.stderr.decode()
    assert (done.returncode, said.count("\n"), said.startswith("acp-bridge: OpenTelemetry settings: ")) == (
        2, 1, True), said
    assert "agent started" not in said and "Traceback" not in said
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in [HEADER, *FIXED]))
    exported = export(capture, env)
    assert (exported.returncode, exported.stderr.decode().splitlines()) == (2, said.splitlines())


def export(capture: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "acp_bridge", "export", str(capture), "--otlp"],
                          env=env, capture_output=True, timeout=60, check=False)


def exported_to(collector: Collector, tmp_path: Path, **extra: str) -> tuple[int, str]:
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in [HEADER, *FIXED]))
    done = export(capture, env_for(collector.endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="2", **extra))
    return done.returncode, done.stderr.decode()


def test_a_collector_that_redirects_has_not_taken_the_spans(tmp_path: Path) -> None:
    """The OTLP/HTTP exporter counts a 307 as success and does not follow it: nothing was
    stored, so the export fails (exit 1) and says why."""
    with running_collector(answer=307) as collector:
        status, said = exported_to(collector, tmp_path)
    assert collector.answered == [307] and status == 1, said
    assert (f"acp-bridge: telemetry: cannot export to {collector.endpoint} (the collector answered HTTP 307, a redirect, which "
            "the exporter does not follow: give the address it redirects to); what was not sent is counted") in said
    assert said.endswith(f"0 of 3 spans taken by {collector.endpoint}; the rest could not be sent\n")


def test_a_malformed_header_variable_is_not_printed_and_does_not_hide_a_real_failure(tmp_path: Path) -> None:
    """OTEL_EXPORTER_OTLP_HEADERS holding a key and a piece that is not name=value: the SDK
    quotes it whole in its warning. It is named, not quoted, and the collector's refusal
    (401) is still the one "cannot export" line; so is it after a setting the batch
    processor (an export-path logger) could not read."""
    with running_collector(answer=401) as collector:
        status, said = exported_to(collector, tmp_path, OTEL_EXPORTER_OTLP_HEADERS="x-api-key=sk-live-123;other",
                                   OTEL_BSP_SCHEDULE_DELAY="abc")
    assert status == 1 and "sk-live-123" not in said, said
    assert said.count("cannot export") == 1 and "401" in said.split("cannot export")[1].splitlines()[0], said
    assert ("acp-bridge: telemetry: the OpenTelemetry SDK says: OTEL_EXPORTER_OTLP_HEADERS (or a _TRACES_/_METRICS_ "
            "variant) holds a header that is not name=value") in said
    assert ("acp-bridge: telemetry: the OpenTelemetry SDK says: Unable to parse value for OTEL_BSP_SCHEDULE_DELAY "
            "as integer. Defaulting to 5000.\n") in said


GOLDEN_CAPTURE = Path(__file__).parent.parent / "golden" / "v2-resume-spec-dialect.jsonl"


def exported(capture: Path) -> tuple[subprocess.CompletedProcess[str], str, list[tuple[Any, ...]]]:
    """`export CAPTURE --otlp` to a fresh receiver: the process, the endpoint, and the spans
    without their ids (sorted)."""
    with running_collector() as collector:
        done = subprocess.run([sys.executable, "-m", "acp_bridge", "export", str(capture), "--otlp"],
                              env=env_for(collector.endpoint), capture_output=True, text=True, timeout=60, check=False)
        spans = collector.wait_spans(0)
    return done, collector.endpoint, sorted((s["name"], s["start"], s["end"], sorted(s["attributes"].items()))
                                            for s in spans)


def _golden_records() -> list[Any]:
    return [orjson.loads(line) for line in GOLDEN_CAPTURE.read_bytes().splitlines()]


# Times before 1970 or past what OTLP's nanoseconds hold (the export of 1e300 was a traceback).
ABSURD: list[float] = [1e300, -1e300, -1.0, 10**19, 2**63 // 10**9 + 1, -(2**63)]


def test_a_record_time_no_span_can_carry_is_left_out_with_a_notice(tmp_path: Path) -> None:
    """A capture edited by hand: messages 3 to 8 and the end record, each at one of the
    absurd times. Each such record is left out, said once; the spans are those of the
    capture without them."""
    records = _golden_records()
    odd = {3 + n: absurd for n, absurd in enumerate(ABSURD)}
    assert [r.get("seq") for r in records[3:9]] == list(odd) and records[-1]["type"] == "end"
    capture, reference = tmp_path / "odd.jsonl", tmp_path / "without.jsonl"
    capture.write_bytes(b"".join(
        orjson.dumps(r | {"time": odd[r["seq"]]} if r.get("seq") in odd else r | {"time": ABSURD[0]}
                     if r["type"] == "end" else r) + b"\n" for r in records))
    reference.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records
                                   if r.get("seq") not in odd and r["type"] != "end"))

    expected_done, _, expected = exported(reference)
    count = expected_done.stderr.split(" sent ")[1].split()[0]
    done, endpoint, spans = exported(capture)

    assert (done.returncode, done.stderr) == (0, (
        f"acp-bridge: {capture}: 7 record(s) with a time no span can carry (before 1970 or after 2262) were left "
        f"out (the first: seq 3)\nacp-bridge: {capture}: sent {count} spans to {endpoint}\n"))
    assert spans == expected and int(count) > 0
