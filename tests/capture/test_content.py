"""What goes into a capture, through the CLI (the bridge in this process): secrets in lines that do not parse,
secrets on the command line, one record for a line over the parse limit, and lines nested
too deep or with numbers beyond 64 bits (written, shown and exported without a crash)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.capture.long_line_records import HEAD_BYTES
from acp_bridge.capture.reader import record_bytes
from acp_bridge.capture.redaction import REDACTED
from acp_bridge.commands import main
from tests.capture.samples import page_rows
from tests.cli_helpers import run_cli_in_process
from tests.conftest import agent_cmd

MIB = 1024 * 1024


def records(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [orjson.loads(x) for x in data.splitlines()]


def everything_in(path: Path) -> bytes:
    """The capture's bytes and every raw and out it holds, decoded (base64 hides nothing)."""
    parts = [path.read_bytes()]
    for record in records(path):
        for key in ("raw", "out"):
            parts.append(record_bytes(record, key) or b"")
        if "raw_b64" in record:
            parts.append(base64.b64decode(record["raw_b64"]))
    return b"\n".join(parts)


def limit_config(tmp_path: Path) -> Path:
    toml = tmp_path / "limit.toml"
    toml.write_text("[relay]\nparse_limit_mib = 1\n")
    return toml


def show(*args: str) -> list[str]:
    result = CliRunner().invoke(main, ["show", *args])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def untimed(lines: list[str]) -> list[str]:
    """Summary lines without their clock (HH:MM:SS.mmm and a space)."""
    return [text[13:] if text[:2].isdigit() else text for text in lines]


# -- item: a secret in a line that does not parse never reaches the capture -------------------------

AUTH = '{"jsonrpc":"2.0","id":%d,"method":"authenticate","params":{"methodId":"k","token":"S3CR3T-%d"%s}}\n'
UNPARSABLE = [
    (AUTH % (1, 1, ',"x":"\\ud83d"')).encode(),  # a lone surrogate, as JSON.stringify writes (read since issue 23)
    (b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[{"name":"m",'
     b'"command":"c","args":[],"env":[{"name":"K","value":"S3CR3T-2"}]}],"n":NaN}}\n'),  # NaN
    b'{"jsonrpc":"2.0","id":3,"method":"auth/login","params":{"password":"S3CR3T-3","x":"\xff"}}\n',  # not UTF-8
    (b'{"jsonrpc":"2.0","id":4,"method":"authenticate","params":{"token":"S3CR3T-4"},'
     b'"params":{}}\n'),  # a member named twice: the parse sees only the last
    (AUTH % (5, 5, ',"pad":"' + "p" * (2 * MIB) + '"')).encode(),  # over the parse limit
]


async def test_secrets_in_lines_that_do_not_parse_never_reach_the_capture(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    stdin = b"".join(UNPARSABLE)
    result = await run_cli_in_process(["run", "-c", str(limit_config(tmp_path)), "--capture", str(path), "--",
                            *agent_cmd("echo")], stdin)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(stdin)  # the agent got every secret: redaction is the capture's only
    kept = everything_in(path)
    for n in range(1, 6):
        assert f"S3CR3T-{n}".encode() not in kept
    mine = [r for r in records(path)[1:-1] if r["direction"] == "to-agent"]
    # The lone surrogate is read (issue 23), so that line is masked member by member.
    masked = ('{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"<m>","token":"<m>",'
              '"x":"<m>"}}\n').replace("<m>", REDACTED)
    assert [(r["size"], r["raw"], r["redacted"]) for r in mine] == [
        (len(UNPARSABLE[0]), masked, ["/params/methodId", "/params/token", "/params/x"]),
    ] + [(len(x), REDACTED, "whole") for x in UNPARSABLE[1:]]
    assert [r.get("truncated", False) for r in mine] == [False] * 4 + [True]


async def test_argv_secrets_are_masked_in_the_header(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    agent = agent_cmd("echo", "-H", "Authorization: Bearer X1", "--header=Authorization: Bearer X2",
                      "--header", "Authorization:Bearer", "X3", "https://user:X4@example.com/p", "--api-key", "X5")
    result = await run_cli_in_process(["run", "--capture", str(path), "--", *agent], b"")
    assert result.returncode == 0, result.stderr
    header = records(path)[0]
    assert header["argv"][-9:] == [
        "-H", f"Authorization: Bearer {REDACTED}", f"--header=Authorization: Bearer {REDACTED}",
        "--header", "Authorization:Bearer", REDACTED, f"https://{REDACTED}@example.com/p", "--api-key", REDACTED]
    assert not any(f"X{n}".encode() in path.read_bytes() for n in range(1, 6))


# -- item: one record for a line over the parse limit ---------------------------------------------

async def test_a_line_over_the_parse_limit_is_one_record(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    size = 3 * MIB
    result = await run_cli_in_process(["run", "-c", str(limit_config(tmp_path)), "--capture", str(path), "--",
                            *agent_cmd("huge", str(size))], b"")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"x" * size + b"\n"
    header, message, end = records(path)
    assert (header["type"], end["type"], end["records"]) == ("header", "end", 1)
    assert message == {**message, "seq": 1, "direction": "to-client", "kind": "other", "verdict": "opaque",
                       "size": size + 1, "raw": "x" * HEAD_BYTES, "truncated": True}
    assert "redacted" not in message and "unfinished" not in message
    # ... and the readers show it as one line.
    os.environ["TZ"] = "UTC"
    try:
        assert untimed(show(str(path))) == [f"<- (line over the parse limit) {size + 1}B [truncated]"]
        assert untimed(show(str(path), "--detail", "2")) == [
            f"<- (line over the parse limit) {size + 1}B [truncated]",
            "    b'" + "x" * HEAD_BYTES + "'", f"    … ({size + 1 - HEAD_BYTES} more bytes not kept)"]
    finally:
        del os.environ["TZ"]
    stats = CliRunner().invoke(main, ["stats", str(path)])
    assert stats.exit_code == 0 and stats.output.splitlines()[1] == (
        f"messages: 1 ({size + 1} bytes), malformed lines: 0, over the parse limit: 1, redacted: 0")
    page = tmp_path / "page.html"
    exported = CliRunner().invoke(main, ["export", str(path), "--html", str(page)])
    assert exported.exit_code == 0
    html = page.read_text()
    assert [row["l"] for row in page_rows(html) if "h" not in row] == ["(line over the parse limit)"]
    assert f"… (the first {HEAD_BYTES} of {size + 1} bytes)" in html


# -- item: nested too deep, numbers beyond 64 bits ------------------------------------------------

DEEP = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","x":'
        + b"[" * 1000 + b"]" * 1000 + b"}}\n")
BIG = b"1" * 100
BIG_REQ = (b'{"jsonrpc":"2.0","id":' + BIG + b',"method":"session/prompt","params":{"sessionId":"s","n":'
           + b"2" * 100 + b"}}\n")


@pytest.fixture
def odd_capture(tmp_path: Path) -> Path:
    return tmp_path / "c.jsonl"


async def test_deep_lines_and_big_numbers_are_captured_shown_and_exported(odd_capture: Path, tmp_path: Path) -> None:
    path = odd_capture
    result = await run_cli_in_process(["run", "--no-health", "--capture", str(path), "--", *agent_cmd("echo")], DEEP + BIG_REQ)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(DEEP + BIG_REQ)
    kept = records(path)
    assert [r["type"] for r in kept] == ["header"] + ["message"] * 5 + ["end"]
    assert b'"id":' + BIG + b"," in path.read_bytes()  # the id as written, not as a float
    assert [record_bytes(r, "raw") for r in kept[1:5]] == [DEEP, BIG_REQ, DEEP, BIG_REQ]

    deep_summary = f"-> session/update (s) {len(DEEP)}B"
    big_summary = f"-> session/prompt id {BIG.decode()} (s) {len(BIG_REQ)}B"
    assert untimed(show(str(path), "--detail", "0")) == []
    assert untimed(show(str(path), "--detail", "1", "--direction", "to-agent")) == [deep_summary, big_summary]
    params = ["    {", '      "sessionId": "s",', f'      "n": {"2" * 100}', "    }"]
    for detail in ("2", "3"):
        assert untimed(show(str(path), "--detail", detail, "--direction", "to-agent")) == [
            deep_summary, "    " + DEEP.decode().rstrip("\n"), big_summary, *params]
    page = tmp_path / "page.html"
    exported = CliRunner().invoke(main, ["export", str(path), "--html", str(page)])
    assert exported.exit_code == 0, exported.output
    html = page.read_text()
    rows = [row for row in page_rows(html) if "h" not in row]
    assert len(rows) == 5 and any(f"id {BIG.decode()}" in row["l"] for row in rows) and "2" * 100 in html
