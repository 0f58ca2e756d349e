"""A password or token in the collector's URL never reaches stderr or the log file, from
`run --otlp` or `export --otlp`, whether the collector takes the spans or is down (the
exporter's errors quote the URL too)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from tests.capture.samples import FIXED, HEADER
from tests.conftest import agent_cmd, run_cli

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is in the test extra")

from tests.telemetry.collector import running_collector

SECRETS = ("PASSWORD", "SIGSECRET")
PROMPT = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}\n'


def with_secrets(endpoint: str, *, query: bool) -> dict[str, str]:
    """The OTEL_* environment for a collector at `endpoint` (http://host:port), with a
    user and password in it, and with `query` a signature in the traces URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    url = endpoint.replace("http://", "http://user:PASSWORD@")
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=url, OTEL_BSP_SCHEDULE_DELAY="100", OTEL_EXPORTER_OTLP_TIMEOUT="1")
    if query:
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{url}/v1/traces?sig=SIGSECRET&x=1"
    return env


@contextmanager
def collector_down() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens: refused
    yield f"http://127.0.0.1:{port}"


def assert_no_secret(*outputs: bytes) -> None:
    for output in outputs:
        for secret in SECRETS:
            assert secret.encode() not in output, output


def capture(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in [HEADER, *FIXED]))
    return path


@pytest.mark.parametrize("query", [False, True])
async def test_export_to_a_collector_that_is_down_masks_the_url(tmp_path: Path, query: bool) -> None:
    with collector_down() as endpoint:
        done = await run_cli(["export", str(capture(tmp_path)), "--otlp"], env=with_secrets(endpoint, query=query))
    assert done.returncode == 1
    assert_no_secret(done.stderr)
    said = done.stderr.decode()
    where = endpoint.replace("http://", "http://<redacted>@")
    assert f"telemetry: cannot export to {where}" in said
    assert ("?sig=<redacted>&x=1" in said) is query
    assert said.count("telemetry: cannot export to") == 1, said
    # FIXED has a turn (and so its session) and the `tag` request: three spans, none taken.
    taken_by = f"{where}/v1/traces?sig=<redacted>&x=1" if query else where
    assert said.endswith(f"acp-bridge: {tmp_path / 'c.jsonl'}: 0 of 3 spans taken by {taken_by}; "
                         "the rest could not be sent\n"), said


async def test_export_to_a_collector_that_is_up_masks_the_url(tmp_path: Path) -> None:
    with running_collector() as collector:
        done = await run_cli(["export", str(capture(tmp_path)), "--otlp"],
                             env=with_secrets(collector.endpoint, query=False))
        assert len(collector.wait_spans(3)) == 3  # the password went as Basic auth, the spans arrived
    assert done.returncode == 0, done.stderr
    where = collector.endpoint.replace("http://", "http://<redacted>@")
    assert done.stderr.decode() == f"acp-bridge: {tmp_path / 'c.jsonl'}: sent 3 spans to {where}\n"


# Each case runs once: a run logging to stderr for two of them, to a log file for the other
# two. The URL is masked where the message is made (telemetry/sdk.py), before any handler
# sees it, so one sink per case proves both; every output of every run is searched.
@pytest.mark.parametrize(("up", "query", "log_file"), [
    (False, False, False), (False, True, True), (True, False, True), (True, True, False)])
async def test_run_masks_the_url_on_stderr_and_in_the_log_file(tmp_path: Path, up: bool, query: bool,
                                                               log_file: bool) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[telemetry]\nflush_seconds = 0.5\n")
    log = tmp_path / "bridge.log"
    log_option = ["--log-file", str(log)] if log_file else []
    with running_collector() if up else collector_down() as where:
        endpoint = where if isinstance(where, str) else where.endpoint
        done = await run_cli(["run", "-vv", "-c", str(config), "--otlp", *log_option, "--",
                              *agent_cmd("answer")], PROMPT, env=with_secrets(endpoint, query=query))
    assert done.stdout == b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n'
    said = log.read_bytes() if log_file else done.stderr
    assert b"acp-bridge: DEBUG: " in said  # the -vv log went where it was told
    assert_no_secret(done.stderr, said)
    if not up or query:  # the traces URL with a query is not one the collector takes
        assert b"telemetry: cannot export to http://<redacted>@127.0.0.1:" in said
