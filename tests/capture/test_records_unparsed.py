"""Capture records for what the parser cannot take whole: lines over the parse limit (one
record each), lines that do not parse (withheld when they could hold a secret), values that
cannot be written back (numbers beyond 64 bits, ids nested too deep). The encoder never
raises and never lets a secret through: a property drives it with broken lines."""

from __future__ import annotations

import base64
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.reader import load_record, record_bytes
from acp_bridge.capture.records import HEAD_BYTES, CaptureEncoder
from acp_bridge.capture.redaction import REDACTED, Redactor
from acp_bridge.core import Direction, Forward, Relay, Verdict
from acp_bridge.core.session import Pending

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
WALL = 1_700_000_000.0
NOTE = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}\n'


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
            got += feed(relay, encoder, C, NOTE, 1.5)
    last = float(len(pieces) - 1)
    assert [r["seq"] for r in got] == [1, 2]
    assert got[0]["direction"] == "to-client" and got[0]["raw"] == NOTE.decode()
    assert got[1] == opaque(2, "to-agent", last, 20_000, line[:HEAD_BYTES].decode(), truncated=True)


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

SECRET = "S3CR3T"
_CARRIERS = [
    {"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": {"methodId": "k", "token": SECRET}},
    {"jsonrpc": "2.0", "id": 2, "method": "auth/login", "params": {"password": SECRET}},
    {"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": "/", "mcpServers": [
        {"name": "m", "command": "c", "args": [], "env": [{"name": "K", "value": SECRET}]}]}},
    {"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "/", "mcpServers": [
        {"type": "http", "name": "m", "url": "u", "headers": [{"name": "Authorization", "value": SECRET}]}]}},
    {"jsonrpc": "2.0", "id": 5, "method": "terminal/create", "params": {"command": "c", "env": [
        {"name": "K", "value": SECRET}]}},
    {"jsonrpc": "2.0", "method": "x", "params": {"_meta": {"token": SECRET}}},
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
    assert SECRET.encode() not in out and b"Follow the team style" not in out
    for record in records[:-1]:
        for key in ("raw", "out"):
            data = record_bytes(record, key) or b""
            assert SECRET.encode() not in data and b"Follow the team style" not in data, record
        if "raw_b64" in record:
            assert SECRET.encode() not in base64.b64decode(record["raw_b64"])


def test_a_method_named_twice_in_a_run_of_untouched_lines_is_withheld() -> None:
    """The lean path for runs parses a notification only to learn its method: an earlier
    "method" that orjson dropped could make it an authenticate."""
    hidden = (b'{"jsonrpc":"2.0","method":"authenticate","params":{"token":"S3CR3T"},'
              b'"method":"session/update"}\n')
    chunk = NOTE * 40 + hidden + NOTE * 40
    forwards = Relay().feed(C, chunk)
    assert len(forwards) == 1 and forwards[0].untouched_lines  # one run, as the relay sends it
    out = CaptureEncoder().encode_batch(WALL, 0.0, forwards)
    got = decode(out)
    assert len(got) == 81 and b"S3CR3T" not in out
    assert (got[40]["method"], got[40]["raw"], got[40]["redacted"]) == ("session/update", REDACTED, "whole")
