"""The capture's records and what they mask: pure, table-driven, plus properties; then the
records for what the parser cannot take whole: lines over the parse limit (one record each),
lines that do not parse (withheld when they could hold a secret), values that cannot be
written back (numbers beyond 64 bits, ids nested too deep). The encoder never raises and never
lets a secret through: a property drives it with broken lines. (Reading them back is
tests/capture/test_reader.py and test_summary.py; the lean path for runs, test_runs.py.)"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.long_line_records import HEAD_BYTES
from acp_bridge.capture.reader import load_record, record_bytes
from acp_bridge.capture.records import CaptureEncoder, header_record
from acp_bridge.capture.redaction import PROMPT_REDACTED, REDACTED, Redactor
from acp_bridge.core import (
    DROP,
    Connection,
    Direction,
    Emit,
    Forward,
    Frame,
    Relay,
    Replace,
    Rule,
    Verdict,
)
from acp_bridge.core.pointer import parse_pointer
from acp_bridge.core.rewrites.base import Outcome
from acp_bridge.core.session import Pending
from tests.capture.samples import DROPPED, NOTE, PING, REQ, RESP, TAG, WALL, base

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


class Tagger(Rule):
    """Test rewrite: `tag` requests get a param, `drop` notifications vanish, `ping` emits."""

    name = "tagger"
    triggers = (b'"drop"', b'"ping"')

    def request(self, frame: Frame, session: Connection) -> Outcome:
        if frame.method == "tag":
            assert frame.msg is not None
            return Replace({**frame.msg, "params": {"tagged": True}})
        return super().request(frame, session)

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        if frame.method == "drop":
            return DROP
        if frame.method == "ping":
            return Replace(frame.msg, (Emit(C, {"jsonrpc": "2.0", "method": "pong"}),))
        return super().notification(frame, session)


def records(chunks: list[tuple[Direction, bytes, float]], redactor: Redactor | None = None) -> list[dict[str, Any]]:
    """Feed chunks through a relay with Tagger, encode every forward, read the records back."""
    relay = Relay([Tagger()], strict=True)
    encoder = CaptureEncoder(redactor)
    out = b""
    for direction, chunk, mono in chunks:
        out += encoder.encode_batch(WALL + mono, mono, relay.feed(direction, chunk, mono))
    return [orjson.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize(("chunks", "expected"), [
    pytest.param([(A, REQ, 1.0)], [
        base(1, "to-agent", "request", "pass", 1.0, method="session/prompt", id=7, session="s1",
             size=len(REQ), raw=REQ.decode()),
    ], id="request"),
    pytest.param([(A, REQ, 1.0), (C, RESP, 1.5)], [
        base(1, "to-agent", "request", "pass", 1.0, method="session/prompt", id=7, session="s1",
             size=len(REQ), raw=REQ.decode()),
        base(2, "to-client", "response", "pass", 1.5, method="session/prompt", id=7, session="s1",
             size=len(RESP), latency=0.5, raw=RESP.decode()),
    ], id="response-carries-method-session-latency"),
    pytest.param([(C, NOTE, 2.0)], [
        base(1, "to-client", "notification", "pass", 2.0, method="session/update", session="s1",
             size=len(NOTE), raw=NOTE.decode()),
    ], id="notification-unparsed-by-relay"),
    pytest.param([(C, b"{oops\n", 0.0)], [
        base(1, "to-client", "other", "pass", size=6, raw="{oops\n"),
    ], id="other-unparsed-by-relay"),
    pytest.param([(C, b"hello\n", 0.0)], [
        base(1, "to-client", "other", "other", size=6, raw="hello\n"),
    ], id="other-not-an-object"),
    pytest.param([(C, b'[{"id":1}]\n', 0.0)], [
        base(1, "to-client", "other", "other", size=11, raw='[{"id":1}]\n'),
    ], id="other-batch"),
    pytest.param([(A, TAG, 0.0)], [
        base(1, "to-agent", "request", "rewrite", method="tag", id="t", rules=["tagger"],
             size=len(TAG), raw=TAG.decode(),
             out='{"jsonrpc":"2.0","id":"t","method":"tag","params":{"tagged":true}}\r\n', out_size=68),
    ], id="rewrite"),
    pytest.param([(C, DROPPED, 0.0)], [
        base(1, "to-client", "notification", "drop", method="drop", session="s2", rules=["tagger"],
             size=len(DROPPED), raw=DROPPED.decode(), out=None, out_size=0),
    ], id="drop"),
    pytest.param([(A, PING, 0.0)], [
        base(1, "to-agent", "notification", "pass", method="ping", rules=["tagger"], size=len(PING),
             raw=PING.decode()),
        base(2, "to-client", "notification", "emit", method="pong", rules=["tagger"], size=0,
             out='{"jsonrpc":"2.0","method":"pong"}\n', out_size=34),
    ], id="emit"),
])
def test_record_fields(chunks: list[tuple[Direction, bytes, float]], expected: list[dict[str, Any]]) -> None:
    """Every record carries the fields docs/capture-format.md promises, exactly."""
    assert records(chunks) == expected


def test_a_run_of_untouched_lines_gives_one_record_per_line() -> None:
    """The relay forwards a chunk's untouched lines as one run; the capture still has a
    record for each line, as it came (CRLF kept)."""
    note2 = NOTE.replace(b"\n", b"\r\n")
    lines = [NOTE, note2] * 20  # a chunk long enough for the relay to make a run of it
    relay = Relay()
    forwards = relay.feed(C, b"".join(lines))
    assert len(forwards) == 1 and forwards[0].untouched_lines and len(forwards[0].lines()) == len(lines)
    out = CaptureEncoder().encode_batch(WALL, 0.0, forwards)
    got = [orjson.loads(x) for x in out.splitlines()]
    assert [r["seq"] for r in got] == list(range(1, len(lines) + 1))
    assert [r["raw"].encode() for r in got] == lines
    assert all(r["method"] == "session/update" and r["session"] == "s1" for r in got)


def test_opaque_piece_is_recorded_as_other_with_raw() -> None:
    """Pieces of an over-long line are never parsed, by the relay or by the capture."""
    relay = Relay(max_line=8)
    encoder = CaptureEncoder()
    line = b'{"id":1,"method":"x"}\n'
    [record] = [orjson.loads(x) for x in encoder.encode_batch(WALL, 0.0, relay.feed(A, line)).splitlines()]
    assert record == base(1, "to-agent", "other", "opaque", size=len(line), raw=line.decode())


def test_error_verdict_keeps_the_error() -> None:
    fwd = Forward(A, REQ, REQ, Verdict.ERROR, None, ("tagger",), None, error="KeyError: 'x'")
    record = CaptureEncoder().record(fwd, WALL, 0.0)
    assert record["verdict"] == "error" and record["error"] == "KeyError: 'x'"
    assert record["rules"] == ["tagger"] and record["raw"] == REQ.decode() and "out" not in record


@pytest.mark.parametrize(("line", "redacted"), [
    (b'{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"token":"s3cret"}}\n', ["/params/token"]),
    (b'{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"token":"s3cret"},}\n', "whole"),
])
def test_the_error_of_a_rule_that_failed_on_a_secret_does_not_repeat_it(line: bytes, redacted: Any) -> None:
    """A rule's exception often quotes the value it choked on (`int('s3cret')`): the record
    masked the line and wrote the secret in `error`. Its text is withheld, its type kept."""
    error = "ValueError: invalid literal for int() with base 10: 's3cret'"
    fwd = Forward(A, line, line, Verdict.ERROR, None, ("tagger",), None, error=error)
    record = CaptureEncoder().record(fwd, WALL, 0.0)
    assert (record["error"], record["redacted"]) == (f"ValueError: {REDACTED}", redacted)
    assert b"s3cret" not in orjson.dumps(record)


def test_invalid_utf8_goes_to_raw_b64() -> None:
    [record] = records([(C, b"\xff\xfe oops\n", 0.0)])
    assert "raw" not in record
    assert base64.b64decode(record["raw_b64"]) == b"\xff\xfe oops\n"


def test_header_masks_argv_and_names_format() -> None:
    header = header_record(wall=WALL, mono=3.0, argv=["acp-bridge", "run", "--system-prompt", "be nice", "--",
                                                      "agent", "--api-key=abc"],
                           config_digest="d1", pid=42, redact=["/params/x"])
    assert header == {
        "type": "header", "format": 1, "bridge": header["bridge"], "started": "2023-11-14T22:13:20Z",
        "time": WALL, "mono": 3.0, "pid": 42,
        "argv": ["acp-bridge", "run", "--system-prompt", REDACTED, "--", "agent", f"--api-key={REDACTED}"],
        "config": "d1", "redact": ["/params/x"], "include_system_prompt": False,
    }


# -- redaction ----------------------------------------------------------------------------------

def msg(method: str, params: Any, id_: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


MCP = [{"name": "fs", "command": "x", "args": [], "env": [{"name": "TOKEN", "value": "s3cret"}]},
       {"type": "http", "name": "web", "url": "u", "headers": [{"name": "Authorization", "value": "Bearer s3cret"}]}]


@pytest.mark.parametrize(("message", "pointers", "masked", "hits"), [
    pytest.param(msg("session/new", {"cwd": "/", "mcpServers": MCP}), (),
                 msg("session/new", {"cwd": "/", "mcpServers": [
                     {**MCP[0], "env": [{"name": "TOKEN", "value": REDACTED}]},
                     {**MCP[1], "headers": [{"name": "Authorization", "value": REDACTED}]}]}),
                 ["/params/mcpServers/0/env/0/value", "/params/mcpServers/1/headers/0/value"], id="mcp-servers"),
    pytest.param(msg("authenticate", {"methodId": "oauth", "token": "s3cret"}), (),
                 msg("authenticate", {"methodId": REDACTED, "token": REDACTED}),
                 ["/params/methodId", "/params/token"], id="authenticate"),
    pytest.param(msg("auth/login", ["s3cret"]), (), msg("auth/login", REDACTED), ["/params"], id="auth-login"),
    pytest.param(msg("terminal/create", {"command": "ls", "env": [{"name": "A", "value": "s3cret"}]}), (),
                 msg("terminal/create", {"command": "ls", "env": [{"name": "A", "value": REDACTED}]}),
                 ["/params/env/0/value"], id="terminal-create"),
    pytest.param(msg("x/y", {"_meta": {"token": "s3cret", "keep": 1}}), ("/params/_meta/token",),
                 msg("x/y", {"_meta": {"token": REDACTED, "keep": 1}}), ["/params/_meta/token"], id="pointer"),
    pytest.param(msg("x/y", {"a/b": {"~k": ["p", "s3cret"]}}), ("/params/a~1b/~0k/1",),
                 msg("x/y", {"a/b": {"~k": ["p", REDACTED]}}), ["/params/a~1b/~0k/1"], id="pointer-escapes"),
    pytest.param(msg("x/y", {"list": ["a"]}), ("/params/list/01", "/params/list/-", "/params/nope/0"),
                 msg("x/y", {"list": ["a"]}), [], id="pointer-misses"),
    # Digits beyond ASCII are names, not indexes (RFC 6901): "０" masked item 0, and "²"
    # raised (int() refuses it), which withheld every line holding such an array whole.
    pytest.param(msg("x/y", {"list": ["a", "b", "c"], "map": {"²": "s3cret"}}),
                 ("/params/list/０", "/params/list/²", "/params/map/²"),
                 msg("x/y", {"list": ["a", "b", "c"], "map": {"²": REDACTED}}), ["/params/map/²"],
                 id="pointer-digits-beyond-ascii"),
    pytest.param(msg("session/new", {"cwd": "/", "mcpServers": []}), (),
                 msg("session/new", {"cwd": "/", "mcpServers": []}), [], id="nothing-to-mask"),
    # A server's command line and address hold keys as often as its env: masked as the
    # bridge's own argv is (`--token X`, `KEY=X`, a URL's user, password and secret query).
    pytest.param(msg("session/load", {"sessionId": "s", "cwd": "/", "mcpServers": [
        {"name": "gh", "command": "npx", "args": ["server", "--token", "s3cret", "--api-key=s3cret", "--port", "1"],
         "env": []},
        {"type": "sse", "name": "w", "url": "https://me:s3cret@mcp.example/sse?api_key=s3cret&x=1", "headers": []},
        {"name": "odd", "command": "x", "args": "--token s3cret", "url": 7}]}), (),
        msg("session/load", {"sessionId": "s", "cwd": "/", "mcpServers": [
            {"name": "gh", "command": "npx", "args": ["server", "--token", REDACTED, f"--api-key={REDACTED}", "--port",
                                                       "1"], "env": []},
            {"type": "sse", "name": "w", "url": f"https://{REDACTED}@mcp.example/sse?api_key={REDACTED}&x=1",
             "headers": []},
            {"name": "odd", "command": "x", "args": "--token s3cret", "url": 7}]}),
        ["/params/mcpServers/0/args/2", "/params/mcpServers/0/args/3", "/params/mcpServers/1/url"],
        id="mcp-server-args-and-url"),
    pytest.param(msg("session/new", {"cwd": "/", "mcpServers": [
        {"name": "gh", "command": "/bin/gh-mcp --token s3cret", "args": [], "env": []}]}), (),
        msg("session/new", {"cwd": "/", "mcpServers": [
            {"name": "gh", "command": f"/bin/gh-mcp --token {REDACTED}", "args": [], "env": []}]}),
        ["/params/mcpServers/0/command"], id="mcp-server-command"),
    # A terminal's command line, as an MCP server's: the agent asks the client to run it.
    pytest.param(msg("terminal/create", {"sessionId": "s", "command": "git", "args": [
        "commit", "--author=bob", "--token", "s3cret", "-m", "fix"], "env": [{"name": "A", "value": "s3cret"}]}), (),
        msg("terminal/create", {"sessionId": "s", "command": "git", "args": [
            "commit", f"--author={REDACTED}", "--token", REDACTED, "-m", "fix"], "env": [{"name": "A", "value": REDACTED}]}),
        ["/params/env/0/value", "/params/args/1", "/params/args/3"], id="terminal-create-args"),
    pytest.param(msg("terminal/create", {"sessionId": "s", "command": (
        "curl -H 'Authorization: Bearer s3cret' --token s3cret https://me:s3cret@h/?sig=s3cret")}), (),
        msg("terminal/create", {"sessionId": "s", "command": (
            f"curl -H 'Authorization: Bearer {REDACTED}' --token {REDACTED} https://{REDACTED}@h/?sig={REDACTED}")}),
        ["/params/command"], id="terminal-create-command-line"),
    pytest.param(msg("terminal/create", {"sessionId": "s", "command": "ls", "args": ["--token", 7]}), (),
                 msg("terminal/create", {"sessionId": "s", "command": "ls", "args": ["--token", 7]}), [],
                 id="terminal-create-args-not-strings"),
    pytest.param(msg("terminal/create", ["--token", "s3cret"]), (), msg("terminal/create", ["--token", "s3cret"]), [],
                 id="terminal-create-params-not-an-object"),
])
def test_redaction(message: Any, pointers: tuple[str, ...], masked: Any, hits: list[str]) -> None:
    before = orjson.dumps(message)
    result, found = Redactor(pointers).mask(message)
    assert result == masked
    assert found == hits
    assert orjson.dumps(message) == before  # copy on write: the original is untouched


def test_parse_pointer_rfc6901() -> None:
    assert parse_pointer("") == ()
    assert parse_pointer("/a~1b/m~0n/0") == ("a/b", "m~n", "0")
    with pytest.raises(ValueError):
        parse_pointer("a/b")


SECRET = 'Be "terse".\nNo émoji.'


@pytest.mark.parametrize("line", [
    orjson.dumps(msg("session/new", {"cwd": "/", "mcpServers": [], "systemPrompt": {
        "mode": "append", "content": [{"type": "text", "text": SECRET}]}})) + b"\n",
    orjson.dumps(msg("session/new", {"_meta": {"systemPrompt": {"append": SECRET}}})) + b"\n",
    orjson.dumps(msg("session/prompt", {"prompt": [{"type": "text", "text": "before " + SECRET}]})) + b"\n",
    # The same text spelled with \u escapes: a JSON string has more than one spelling.
    b'{"jsonrpc":"2.0","method":"n","params":{"t":"' +
    SECRET.replace('"', '\\u0022').replace("\n", "\\u000a").encode() + b'"}}\n',
])
def test_system_prompt_never_in_clear(line: bytes) -> None:
    """The configured system prompt is masked in raw and out, whatever carries it."""
    fwd = Forward(A, line, line, Verdict.PASS, None)
    record = CaptureEncoder(Redactor((), SECRET)).record(fwd, WALL, 0.0)
    text = orjson.dumps(record).decode()
    assert "terse" not in text and "émoji" not in text
    assert PROMPT_REDACTED in record["raw"] and record["redacted"]
    # And with the secret allowed, the line is stored as it came.
    assert CaptureEncoder().record(fwd, WALL, 0.0)["raw"] == line.decode()


def test_system_prompt_masked_in_rewritten_output_and_in_non_json() -> None:
    out = orjson.dumps(msg("session/new", {"systemPrompt": SECRET})) + b"\n"
    raw = orjson.dumps(msg("session/new", {})) + b"\n"
    enc = CaptureEncoder(Redactor((), "terse"))
    record = enc.record(Forward(A, out, raw, Verdict.REWRITE, None, ("system-prompt",)), WALL, 0.0)
    assert record["raw"] == raw.decode() and "terse" not in record["out"]
    other = enc.record(Forward(A, b"say terse now\n", b"say terse now\n", Verdict.OTHER), WALL, 0.0)
    assert other["raw"] == f"say {PROMPT_REDACTED} now\n"


def test_redaction_never_changes_forwarded_bytes() -> None:
    """The relay sends the secret on; only the capture's copy is masked."""
    line = orjson.dumps(msg("authenticate", {"methodId": "m", "token": "s3cret"})) + b"\n"
    relay = Relay([Tagger()])
    forwards = relay.feed(A, line)
    record = CaptureEncoder(Redactor(("/params",), "s3cret")).record(forwards[0], WALL, 0.0)
    assert b"".join(f.data for f in forwards) == line
    assert "s3cret" not in orjson.dumps(record).decode() and "out" not in record


def test_a_terminal_command_line_is_masked_in_the_record_and_sent_as_it_came() -> None:
    """The agent's `terminal/create` goes to the client with its secrets (the client runs the
    command); the record holds the command line masked as the bridge's own argv is."""
    line = (b'{"jsonrpc":"2.0","id":4,"method":"terminal/create","params":{"sessionId":"s","command":"git",'
            b'"args":["log","--author=bob","--token","xyz"]}}\n')
    forwards = Relay([Tagger()]).feed(C, line)
    record = CaptureEncoder().record(forwards[0], WALL, 0.0)
    assert b"".join(f.data for f in forwards) == line
    assert record["raw"] == ('{"jsonrpc":"2.0","id":4,"method":"terminal/create","params":{"sessionId":"s",'
                             '"command":"git","args":["log","--author=<redacted>","--token","<redacted>"]}}\n')
    assert record["redacted"] == ["/params/args/1", "/params/args/3"]


def test_unchanged_line_is_stored_as_it_came_not_reencoded() -> None:
    """Spacing, escapes and number spellings survive: raw is the line, not a re-encoding."""
    line = b'{ "jsonrpc" : "2.0", "id":1e0, "method":"caf\\u00e9", "params": {"n": 1.50} }\n'
    [record] = records([(A, line, 0.0)])
    assert record["raw"].encode() == line


# -- properties ---------------------------------------------------------------------------------

@given(st.lists(st.tuples(st.sampled_from([A, C]), st.binary(max_size=300)), max_size=8),
       st.text(max_size=4))
def test_every_record_line_is_json_and_raw_round_trips(chunks: list[tuple[Direction, bytes]], secret: str) -> None:
    """Whatever arrives, each record is one valid JSON line, and the concatenated raw
    fields give back the input exactly (when nothing needed masking)."""
    relay = Relay([Tagger()])
    encoder = CaptureEncoder(Redactor((), secret or None))
    sent = {A: b"", C: b""}
    stored = {A: b"", C: b""}
    for direction, chunk in chunks:
        sent[direction] += chunk
        data = encoder.encode_batch(WALL, 0.0, relay.feed(direction, chunk))
        data += encoder.encode_batch(WALL, 0.0, relay.feed_eof(direction))
        assert data == b"" or data.endswith(b"\n")
        for line in data.splitlines():
            record = orjson.loads(line)
            assert isinstance(record, dict)
            if record["verdict"] != "emit":
                raw = record_bytes(record, "raw")
                assert raw is not None
                stored[Direction(record["direction"]) if record["verdict"] != "emit" else A] += raw
            if record.get("redacted"):
                return
    assert stored == sent


@given(st.recursive(st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                    max_leaves=12),
       st.text(min_size=1, max_size=3))
def test_secret_never_survives_masking(value: Any, secret: str) -> None:
    line = orjson.dumps({"jsonrpc": "2.0", "method": "m", "params": value}) + b"\n"
    masked, _ = Redactor((), secret).mask_line(line, orjson.loads(line))
    strings: list[str] = []

    def walk(obj: Any) -> None:
        if isinstance(obj, str):
            strings.append(obj)
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)
    walk(orjson.loads(masked))
    assert not any(secret in s for s in strings if s != PROMPT_REDACTED)



@given(st.text(max_size=12), st.text(min_size=1, max_size=4), st.text(max_size=12),
       st.sampled_from(["orjson", "ascii", "slash"]))
def test_may_contain_secret_text_finds_every_spelling(before: str, secret: str, after: str, spelling: str) -> None:
    """A line holding the secret in a JSON string, however the string is escaped, is never
    waved through by the cheap test (False must be certain)."""
    text = before + secret + after
    if spelling == "orjson":
        line = orjson.dumps({"t": text})
    else:
        line = json.dumps({"t": text}, ensure_ascii=spelling == "ascii").encode()
        if spelling == "slash":
            line = line.replace(b"/", b"\\/")
    assert Redactor((), secret).may_contain_secret_text(line)


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"t":"say terse now"}', True),
    (b'{"t":"say \\u0074erse now"}', True),
    (b'{"t":"say tense now"}', False),
    (b'{"t":"a \\n b"}', False),
])
def test_may_contain_secret_text_is_cheap_only_where_it_may(line: bytes, expected: bool) -> None:
    assert Redactor((), "terse").may_contain_secret_text(line) is expected
    assert Redactor((), None).may_contain_secret_text(line) is False


LINES = st.sampled_from([PING, REQ, RESP, NOTE, b'{"jsonrpc":"2.0","method":"x","params":{"p":"' + b"y" * 90 + b'"}}\n',
                         b"not json\n", b"\n", b"[1,2]\n"])


@given(lines=st.lists(LINES, max_size=30), cuts=st.lists(st.integers(1, 2000), max_size=8),
       tail=st.binary(max_size=40))
def test_lines_ended_counts_the_records_each_forward_makes(lines: list[bytes], cuts: list[int], tail: bytes) -> None:
    """`Forward.lines_ended` is what a finding's `about` counts by without encoding: for any
    chunking, runs of lines, pieces of lines over the parse limit and a torn last line, it
    adds up to the seqs the encoder gives."""
    relay = Relay([Tagger()], max_line=64, run_min=2)
    encoder = CaptureEncoder()
    data = b"".join(lines) + tail
    points = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    batches = [relay.feed(A, data[start:end]) for start, end in itertools.pairwise(points)]
    for forwards in [*batches, relay.feed_eof(A)]:
        before = encoder.seq
        encoder.encode_batch(WALL, 0.0, forwards)
        assert encoder.seq - before == sum(fwd.lines_ended for fwd in forwards)


# -- what the parser cannot take whole ----------------------------------------------------
EMPTY_UPDATE = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}\n'


def decode(out: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in out.splitlines()]


def feed(relay: Relay, encoder: CaptureEncoder, direction: Direction, chunk: bytes, mono: float) -> list[dict[str, Any]]:
    return decode(encoder.encode_batch(WALL + mono, mono, relay.feed(direction, chunk, mono)))


def long_line(size: int, head: bytes = b'{"jsonrpc":"2.0","method":"session/update","params":{"text":"') -> bytes:
    body = size - len(head) - len(b'"}}\n')
    return head + b"a" * body + b'"}}\n'


def opaque(seq: int, direction: str, mono: float, size: int, raw: str, **fields: Any) -> dict[str, Any]:
    return {"type": "message", "seq": seq, "time": WALL + mono, "mono": mono, "direction": direction,
            "kind": "other", "verdict": "opaque", "method": None, "id": None, "session": None, "rules": [],
            "size": size, "raw": raw, **fields}


# -- one record for a line over the parse limit -----------------------------------------------------

def test_a_long_line_in_many_pieces_is_one_record_written_when_it_ends() -> None:
    relay, encoder = Relay(max_line=1024), CaptureEncoder()
    line = long_line(20_000)
    pieces = [line[i:i + 3000] for i in range(0, len(line), 3000)]
    got: list[dict[str, Any]] = []
    for n, piece in enumerate(pieces):
        got += feed(relay, encoder, A, piece, float(n))
        if n == 1:  # the other direction goes on meanwhile, and its records come first
            got += feed(relay, encoder, C, EMPTY_UPDATE, 1.5)
    last = float(len(pieces) - 1)
    assert [r["seq"] for r in got] == [1, 2]
    assert got[0]["direction"] == "to-client" and got[0]["raw"] == EMPTY_UPDATE.decode()
    assert got[1] == opaque(2, "to-agent", last, 20_000, line[:HEAD_BYTES].decode(), truncated=True)


def test_a_diverted_long_line_is_one_diverted_record_that_check_reports() -> None:
    """stray_output = "stderr" and an agent line over the parse limit that is no JSON: one
    record, verdict diverted by `stray-output`, its head kept, so `check` still says so."""
    from acp_bridge.health.offline import analyse

    relay, encoder = Relay(max_line=1024, divert_stray=True), CaptureEncoder()
    line = b"Progress: " + b"#" * 5000 + b"\n"
    got = feed(relay, encoder, C, line[:3000], 0.0) + feed(relay, encoder, C, line[3000:], 1.0)
    assert got == [{**opaque(1, "to-client", 1.0, len(line), line[:HEAD_BYTES].decode(), truncated=True),
                    "verdict": "diverted", "rules": ["stray-output"]}]
    report = analyse("cap.jsonl", got)
    assert [(f.code, f.text) for f in report.findings] == [
        ("stray-output", "the agent wrote 'Progress: ##############################' to stdout, which is not "
                         "a JSON-RPC message; it went to the bridge's stderr instead of the client")]


def test_a_long_line_ended_by_the_end_of_the_stream() -> None:
    relay, encoder = Relay(max_line=1024), CaptureEncoder()
    line = long_line(5000)[:-1]  # no newline: the stream ends inside it
    assert feed(relay, encoder, C, line, 0.0) == []
    forwards = relay.feed_eof(C, 1.0)
    assert decode(encoder.encode_batch(WALL + 1.0, 1.0, forwards)) == [
        opaque(1, "to-client", 1.0, 4999, line[:HEAD_BYTES].decode(), truncated=True)]


def test_a_long_line_still_coming_when_the_capture_closes_is_recorded_unfinished() -> None:
    relay, encoder = Relay(max_line=1024), CaptureEncoder()
    line = long_line(10_000)
    assert feed(relay, encoder, A, line[:6000], 0.0) == []
    assert decode(encoder.trailer(WALL + 2.0, 2.0)) == [
        opaque(1, "to-agent", 2.0, 6000, line[:HEAD_BYTES].decode(), truncated=True, unfinished=True),
        {"type": "end", "time": WALL + 2.0, "mono": 2.0, "records": 1},
    ]


def test_a_long_line_that_fits_the_head_is_kept_whole() -> None:
    relay, encoder = Relay(max_line=64), CaptureEncoder()
    line = long_line(200)
    assert feed(relay, encoder, A, line, 0.0) == [opaque(1, "to-agent", 0.0, 200, line.decode())]


def test_the_head_drops_a_character_cut_in_two() -> None:
    relay, encoder = Relay(max_line=1024), CaptureEncoder()
    prefix = b'{"jsonrpc":"2.0","method":"n","params":{"text":"'
    line = prefix + b"x" * (HEAD_BYTES - 1 - len(prefix)) + "é€".encode() * 20 + b'"}}\n'
    [record] = feed(relay, encoder, A, line, 0.0)
    assert line[HEAD_BYTES - 1:HEAD_BYTES + 1] == "é".encode()  # the head ends inside it
    assert record["raw"] == line[:HEAD_BYTES - 1].decode() and record["truncated"] is True


def test_a_long_line_that_could_hold_a_secret_keeps_no_head() -> None:
    """The head is never parsed: a method or key that leads to a secret anywhere in the line,
    even after the head or cut in two between pieces, withholds it."""
    for where in (10, HEAD_BYTES + 5000, 2999):
        relay, encoder = Relay(max_line=1024), CaptureEncoder()
        spliced = bytearray(long_line(12_000))
        spliced[where:where + 12] = b"authenticate"
        line = bytes(spliced)
        got: list[dict[str, Any]] = []
        for i in range(0, len(line), 3000):  # `where` 2999: the needle straddles two pieces
            got += feed(relay, encoder, A, line[i:i + 3000], 0.0)
        assert got == [opaque(1, "to-agent", 0.0, 12_000, REDACTED, truncated=True, redacted="whole")]


def test_a_long_line_with_the_system_prompt_keeps_no_head() -> None:
    relay, encoder = Relay(max_line=1024), CaptureEncoder(Redactor((), "Follow the team style guide."))
    line = long_line(9000).replace(b"a" * 40, b"Follow the team style guid\\u0065.".ljust(40, b" "), 1)
    [record] = feed(relay, encoder, A, line, 0.0)
    assert (record["raw"], record["redacted"]) == (REDACTED, "whole")


# -- values that cannot be written back -----------------------------------------------------------

def test_an_id_beyond_64_bits_is_recorded_as_written() -> None:
    big = b"1" * 100
    request = b'{"jsonrpc":"2.0","id":' + big + b',"method":"session/prompt","params":{"sessionId":"s"}}\n'
    out = CaptureEncoder().encode_batch(WALL, 0.0, Relay().feed(A, request))
    assert b'"id":' + big + b"," in out
    record = load_record(out)
    assert record is not None and record["id"] == int(big) and record_bytes(record, "raw") == request


def test_an_id_too_deep_to_write_still_gets_a_record() -> None:
    request = b'{"jsonrpc":"2.0","id":' + b"[" * 300 + b"]" * 300 + b',"method":"x","params":{}}\n'
    [record] = decode(CaptureEncoder().encode_batch(WALL, 0.0, Relay().feed(A, request)))
    assert (record["kind"], record["method"], record["id"]) == ("request", "x", None)
    assert record["raw"] == request.decode()
    assert record["error"] == "capture: the id cannot be written (nested too deep, or not UTF-8)"


def test_a_method_read_with_a_lone_surrogate_still_gets_a_record() -> None:
    """The relay reads the method of a line orjson rejects with the stdlib, which keeps a lone
    surrogate; orjson cannot write one."""
    request = Pending(A, 1, "m\ud83d", None, b"", 0.0)
    answer = Forward(C, b'{"jsonrpc":"2.0","id":1,"result":{}}\n', b'{"jsonrpc":"2.0","id":1,"result":{}}\n',
                     Verdict.PASS, None, (), request)
    [record] = decode(CaptureEncoder().encode_batch(WALL, 1.0, [answer]))
    assert (record["method"], record["id"], record["latency"]) == ("m\\ud83d", 1, 1.0)


def test_a_deep_line_with_a_secret_is_withheld_not_crashed_on() -> None:
    line = (b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[{"name":"m",'
            b'"command":"c","args":[],"env":[{"name":"K","value":"S3CR3T"}]}],"_meta":'
            + b"[" * 1000 + b"]" * 1000 + b"}}\n")
    out = CaptureEncoder(Redactor((), "Follow the team style guide.")).encode_batch(WALL, 0.0, Relay().feed(A, line))
    [record] = decode(out)
    assert b"S3CR3T" not in out
    assert (record["kind"], record["method"], record["raw"], record["redacted"]) == (
        "request", "session/new", REDACTED, "whole")


# -- the property ---------------------------------------------------------------------------------

KEY = "S3CR3T"
_CARRIERS = [
    {"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": {"methodId": "k", "token": KEY}},
    {"jsonrpc": "2.0", "id": 2, "method": "auth/login", "params": {"password": KEY}},
    {"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": "/", "mcpServers": [
        {"name": "m", "command": "c", "args": [], "env": [{"name": "K", "value": KEY}]}]}},
    {"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "/", "mcpServers": [
        {"type": "http", "name": "m", "url": "u", "headers": [{"name": "Authorization", "value": KEY}]}]}},
    {"jsonrpc": "2.0", "id": 5, "method": "terminal/create", "params": {"command": "c", "env": [
        {"name": "K", "value": KEY}]}},
    {"jsonrpc": "2.0", "method": "x", "params": {"_meta": {"token": KEY}}},
    {"jsonrpc": "2.0", "method": "x", "params": {"text": "Follow the team style guide."}},
]
_BREAKERS = [
    lambda line: line[:-2] + b',"z":NaN}\n',  # not JSON
    lambda line: line[:-2] + b',"z":"\\ud83d"}\n',  # a lone surrogate
    lambda line: line[:-2] + b',"z":"\xff"}\n',  # not UTF-8
    lambda line: line[:-2] + b',"params":{}}\n',  # params twice
    lambda line: line[:-2] + b',"method":"other"}\n',  # method twice
    lambda line: line[: len(line) * 3 // 4] + b"\n",  # torn (in the params: see the report on members)
    lambda line: line[:-2] + b',"deep":' + b"[" * 300 + b"]" * 300 + b"}\n",  # too deep to write
    lambda line: line[:-2] + b',"n":' + b"9" * 40 + b"}\n",  # a number beyond 64 bits
    lambda line: line.replace(b'"method"', b'"\\u006dethod"'),  # a key spelled with escapes
    lambda line: b"[" + line[:-1] + b"]\n",  # in a batch
    lambda line: line,
]


@given(st.lists(st.tuples(st.sampled_from(_CARRIERS), st.sampled_from(_BREAKERS), st.integers(1, 4),
                          st.sampled_from([A, C])), min_size=1, max_size=6),
       st.integers(64, 400))
def test_no_secret_reaches_the_capture_however_the_line_is_broken(
        lines: list[tuple[dict[str, Any], Any, int, Direction]], max_line: int) -> None:
    """Each line carries a secret where the defaults, a pointer or the private text mask it,
    then is broken in one of the ways that defeat a parse; some are over the parse limit,
    and chunks cut them anywhere. The capture is valid JSONL with a record per line, and
    the secret is in no record: not in the file, not in a decoded raw or out."""
    relay = Relay(max_line=max_line)
    encoder = CaptureEncoder(Redactor(("/params/_meta/token",), "Follow the team style guide."))
    out = bytearray()
    for message, breaker, parts, direction in lines:
        line = breaker(orjson.dumps(message) + b"\n")
        step = max(1, len(line) // parts)
        for i in range(0, len(line), step):
            out += encoder.encode_batch(WALL, 0.0, relay.feed(direction, line[i:i + step]))
    for direction in (A, C):
        out += encoder.encode_batch(WALL, 0.0, relay.feed_eof(direction))
    out += encoder.trailer(WALL, 0.0)
    records = decode(bytes(out))
    assert records[-1]["type"] == "end" and records[-1]["records"] == len(records) - 1
    assert KEY.encode() not in out and b"Follow the team style" not in out
    for record in records[:-1]:
        for key in ("raw", "out"):
            data = record_bytes(record, key) or b""
            assert KEY.encode() not in data and b"Follow the team style" not in data, record
        if "raw_b64" in record:
            assert KEY.encode() not in base64.b64decode(record["raw_b64"])


def test_a_method_named_twice_in_a_run_of_untouched_lines_is_withheld() -> None:
    """The lean path for runs parses a notification only to learn its method: an earlier
    "method" that orjson dropped could make it an authenticate."""
    hidden = (b'{"jsonrpc":"2.0","method":"authenticate","params":{"token":"S3CR3T"},'
              b'"method":"session/update"}\n')
    chunk = EMPTY_UPDATE * 40 + hidden + EMPTY_UPDATE * 40
    forwards = Relay().feed(C, chunk)
    assert len(forwards) == 1 and forwards[0].untouched_lines  # one run, as the relay sends it
    out = CaptureEncoder().encode_batch(WALL, 0.0, forwards)
    got = decode(out)
    assert len(got) == 81 and b"S3CR3T" not in out
    assert (got[40]["method"], got[40]["raw"], got[40]["redacted"]) == ("session/update", REDACTED, "whole")
