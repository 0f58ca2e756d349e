"""The lean path for runs (acp_bridge/capture/runs.py): its records byte for byte, the
template's edges, its cost in parses, and a property comparing it with the general path
(`CaptureEncoder(lean=False)`) on runs built to find where the two could differ."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.capture.records import CaptureEncoder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.core import Direction, Forward, Verdict

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


def encoded(lines: list[bytes], *, per_line: bool = False) -> bytes:
    """The records of a run of `lines`: on the lean path, or line by line on the full path."""
    data = b"".join(lines)
    run = Forward(C, data, data, Verdict.PASS, untouched_lines=True)
    return CaptureEncoder(lean=not per_line).encode_batch(1.5, 2.25, [run])


@pytest.mark.parametrize(("lines", "expected"), [
    pytest.param([
        b'{"method":"m","params":{"sessionId":"s%","t":"a"}}\n',
        b'{"method":"m","params":{"sessionId":"s%","t":"bc"}}\n',
        b'{"method":"m","params":{"sessionId":"s%","t":"%d"}}\n',
        b'{"method":"m","params":{"sessionId":"s%","t":"x"y"}}\n',
    ], [
        (b'{"type":"message","seq":1,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"m","id":null,"session":"s%","rules":[],"size":51,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"sessionId\\":\\"s%\\",\\"t\\":\\"a\\"}}\\n"}\n'),
        (b'{"type":"message","seq":2,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"m","id":null,"session":"s%","rules":[],"size":52,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"sessionId\\":\\"s%\\",\\"t\\":\\"bc\\"}}\\n"}\n'),
        (b'{"type":"message","seq":3,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"m","id":null,"session":"s%","rules":[],"size":52,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"sessionId\\":\\"s%\\",\\"t\\":\\"%d\\"}}\\n"}\n'),
        (b'{"type":"message","seq":4,"time":1.5,"mono":2.25,"direction":"to-client","kind":"other",'
         b'"verdict":"pass","method":null,"id":null,"session":null,"rules":[],"size":53,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"sessionId\\":\\"s%\\",\\"t\\":\\"x\\"y\\"}}\\n"}\n'),
    ], id="stream-ascii"),
    pytest.param([
        b'{"method":"m","params":{"t":"a"}}\r\n',
        b'{"method":"m","params":{"t":"b"}}\r\n',
        b'{"method":"m","params":{"t":"\\"q\\" \xc3\xa9\\n"}}\r\n',
        b'{"method":"m","params":{"t":"tab\there"}}\r\n',
        b'{"method":"m","params":{"t":"\xff"}}\r\n',
    ], [
        (b'{"type":"message","seq":1,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"m","id":null,"session":null,"rules":[],"size":35,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"t\\":\\"a\\"}}\\r\\n"}\n'),
        (b'{"type":"message","seq":2,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"m","id":null,"session":null,"rules":[],"size":35,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"t\\":\\"b\\"}}\\r\\n"}\n'),
        (b'{"type":"message","seq":3,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"m","id":null,"session":null,"rules":[],"size":44,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"t\\":\\"\\\\\\"q\\\\\\" \xc3\xa9\\\\n\\"}}\\r\\n"}\n'),
        (b'{"type":"message","seq":4,"time":1.5,"mono":2.25,"direction":"to-client","kind":"other",'
         b'"verdict":"pass","method":null,"id":null,"session":null,"rules":[],"size":42,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"t\\":\\"tab\\there\\"}}\\r\\n"}\n'),
        (b'{"type":"message","seq":5,"time":1.5,"mono":2.25,"direction":"to-client","kind":"other",'
         b'"verdict":"pass","method":null,"id":null,"session":null,"rules":[],"size":35,'
         b'"raw_b64":"eyJtZXRob2QiOiJtIiwicGFyYW1zIjp7InQiOiL/In19DQo="}\n'),
    ], id="stream-escapes-utf8-crlf"),
    pytest.param([
        b'{oops\n',
        b'{"method":2}\n',
        b'{"id":1,"method":"m"}\n',
        b'{"method":"authenticate","params":{"k":"v"}}\n',
        b'{"method":"m","params":{"sessionId":true}}\n',
        b'{"method":"m","params":{"sessionId":5}}\n',
    ], [
        (b'{"type":"message","seq":1,"time":1.5,"mono":2.25,"direction":"to-client","kind":"other",'
         b'"verdict":"pass","method":null,"id":null,"session":null,"rules":[],"size":6,'
         b'"raw":"{oops\\n"}\n'),
        (b'{"type":"message","seq":2,"time":1.5,"mono":2.25,"direction":"to-client","kind":"other",'
         b'"verdict":"pass","method":null,"id":null,"session":null,"rules":[],"size":13,'
         b'"raw":"{\\"method\\":2}\\n"}\n'),
        (b'{"type":"message","seq":3,"time":1.5,"mono":2.25,"direction":"to-client","kind":"request",'
         b'"verdict":"pass","method":"m","id":1,"session":null,"rules":[],"size":22,'
         b'"raw":"{\\"id\\":1,\\"method\\":\\"m\\"}\\n"}\n'),
        (b'{"type":"message","seq":4,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"authenticate","id":null,"session":null,"rules":[],"size":45,'
         b'"raw":"{\\"method\\":\\"authenticate\\",\\"params\\":{\\"k\\":\\"<redacted>\\"}}\\n",'
         b'"redacted":["/params/k"]}\n'),
        (b'{"type":"message","seq":5,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"m","id":null,"session":null,"rules":[],"size":43,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"sessionId\\":true}}\\n"}\n'),
        (b'{"type":"message","seq":6,"time":1.5,"mono":2.25,"direction":"to-client","kind":"notification",'
         b'"verdict":"pass","method":"m","id":null,"session":5,"rules":[],"size":40,'
         b'"raw":"{\\"method\\":\\"m\\",\\"params\\":{\\"sessionId\\":5}}\\n"}\n'),
    ], id="not-plain-notifications"),
])
def test_run_record_bytes(lines: list[bytes], expected: list[bytes]) -> None:
    """The lean path's records, byte for byte: streamed lines (alike but for their text, so
    the third on are recorded unparsed), and lines it leaves to the full path."""
    assert encoded(lines).splitlines(keepends=True) == expected


def alike(prefix: bytes, suffix: bytes, *bodies: bytes) -> list[bytes]:
    return [prefix + body + suffix + b"\n" for body in bodies]


@pytest.mark.parametrize("lines", [
    pytest.param(alike(b'{"method":"n","params":{"t":"', b'"}}', b"a", b"b", b'x"y'), id="quote-in-body"),
    pytest.param(alike(b'{"method":"n","params":{"t":"', b'"}}', b"a", b"b", b"x\ty"), id="tab-in-body"),
    pytest.param(alike(b'{"method":"n","params":{"t":"', b'"}}', b"a", b"b", b"\xff"), id="not-utf8-body"),
    pytest.param(alike(b'{"method":"n","params":{"t":"', b'"}}', b"a", b"b", b"\\q"), id="bad-escape"),
    pytest.param(alike(b'{"method":"n","params":{"t":"', b'"}}', b"a", b"b")
                 + [b'{"method":"n","params":{"t":"}}\n'], id="cut-quotes-overlap"),
    pytest.param(alike(b'{"method":"n","', b'":1}', b"a", b"b", b"id"), id="string-is-a-key"),
    pytest.param(alike(b'{"method":"n","params":{"sessionId":"', b'"}}', b"a", b"b", b"c"),
                 id="string-is-session"),
    pytest.param(alike(b'{"params":[],"method":"', b'"}', b"a", b"b", b"auth/login"), id="string-is-method"),
    pytest.param(alike(b'{"method":"n","params":{"t":"', b'"}}', b"a", b"b")
                 + [b'{"method":"n","params":{"mcp\\u0053ervers":[{"env":[{"name":"K","value":"v"}]}]}}\n'],
                 id="escaped-mcp-servers"),
])
def test_run_records_equal_per_line_records_at_the_edges(lines: list[bytes]) -> None:
    """What the template must not take for a line that fits it (the property below finds
    these too, given enough examples)."""
    assert encoded(lines) == encoded(lines, per_line=True)


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every text given to orjson.loads from now on."""
    texts: list[bytes] = []
    real_loads = orjson.loads

    def loads(data: bytes) -> Any:
        texts.append(data)
        return real_loads(data)

    monkeypatch.setattr(orjson, "loads", loads)
    return texts


@pytest.mark.detail
def test_streamed_lines_are_recorded_without_a_parse_each(parsed: list[bytes]) -> None:
    """Two lines alike but for their text make a template: the lines that fit it, in this
    run and the next, are not parsed."""
    lines = [orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                      "content": {"type": "text", "text": f"chunk {i}\n"}}}}) + b"\n"
             for i in range(50)]
    data = b"".join(lines)
    run = Forward(C, data, data, Verdict.PASS, untouched_lines=True)
    per_line = CaptureEncoder(lean=False)
    expected = [per_line.encode_batch(1.5, 2.25, [run]) for _ in range(2)]
    parsed.clear()
    encoder = CaptureEncoder()
    assert [encoder.encode_batch(1.5, 2.25, [run]) for _ in range(2)] == expected
    assert len(parsed) == 4  # the first two lines, and two probes of the template


@pytest.mark.detail
def test_looking_for_a_template_is_bounded_per_run(parsed: list[bytes]) -> None:
    """Lines alike only in pairs make a template each pair that the next line misses: a run
    stops looking soon, rather than parse each line twice more."""
    lines = [b'{"method":"n","params":{"k%d":1,"t":"%s"}}\n' % (i // 2, (b"a", b"b")[i % 2])
             for i in range(100)]
    expected = encoded(lines, per_line=True)
    parsed.clear()
    assert encoded(lines) == expected
    assert len(parsed) <= len(lines) + 16


@pytest.mark.detail
def test_lean_false_turns_the_lean_path_off(parsed: list[bytes]) -> None:
    """With `lean=False` each line of a run takes the general path: parsed, one by one."""
    lines = [b'{"method":"n","params":{"t":"%d"}}\n' % i for i in range(20)]
    data = b"".join(lines)
    run = Forward(C, data, data, Verdict.PASS, untouched_lines=True)
    encoder = CaptureEncoder(lean=False)
    parsed.clear()
    encoder.encode_batch(1.5, 2.25, [run])
    assert parsed == lines
    assert "lean=False" in repr(encoder)


# Lines alike but for the body of their last string, as streamed chunks are: each cut is the
# line up to that body and from its closing quote on. Some make no template: the string is
# a key, the method or the session id, or the lines have an id or something to mask.
CUTS = [
    (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"text":"',
     b'"}}}'),
    (b'{"method":"_x/y","params":{"sessionId":7,"t":"', b'"},"n":[1,2.50,-0e1,null]}'),
    (b'{ "method" : "n%", "params" : { "t" : "', b'" } }\r'),  # spaces, %, a CR
    (b'{"method":"n","params":{"t":"a\\"', b'"}}'),  # the cut is after an escaped quote
    (b'{"method":"n","params":{"sessionId":true,"t":"', b'"}}'),
    (b'{"method":"n","params":{"sessionId":"', b'"}}'),
    (b'{"params":{},"method":"', b'"}'),
    (b'{"method":"n","', b'" :1}'),  # a key
    (b'{"method":"n","params":{"', b'":1}}'),
    (b'{"id":1,"method":"n","params":{"t":"', b'"}}'),
    (b'{"method":"authenticate","params":{"t":"', b'"}}'),
    (b'{"method":"n","params":{"mcpServers":[{"env":[{"name":"K","value":"', b'"}]}]}}'),
    (b'{"method":"n","t":"', b'"'),
    (b'["', b'"]'),
]
# String bodies: text as JSON spells it, and bytes that may not be a string body at all. None:
# the line that is the cut with its two quotes in one. Two plain bodies first make a template
# of the cut (when it allows one) for the bodies after them.
BODIES = (st.text(max_size=8).map(lambda text: orjson.dumps(text)[1:-1])
          | st.text('ab"\\\t%é/nu', max_size=5).map(str.encode)
          | st.sampled_from([b'a"b', b"\xff", b"\xc3\xa9", b"%d", b"\\u0041", b"\\/\\b\\f\\n\\r\\t", b"id",
                             b"sessionId", b"mcpServers", None])
          | st.binary(max_size=6).map(lambda data: data.replace(b"\n", b"")))
PLAIN = st.text("ab", max_size=3).map(str.encode)
streamed = st.builds(
    lambda cut, bodies, end: [cut[0] + (body + cut[1] if body is not None else cut[1][1:]) + end
                              for body in bodies],
    st.sampled_from(CUTS),
    st.lists(BODIES, min_size=1, max_size=6)
    | st.builds(lambda a, b, rest: [a, b, *rest], PLAIN, PLAIN, st.lists(BODIES, max_size=4)),
    st.sampled_from([b"\n", b"\n", b"\r\n"]))
single = st.one_of(
    st.builds(lambda m, sid, text: orjson.dumps({"jsonrpc": "2.0", "method": m,
                                                 "params": {"sessionId": sid, "t": text}}) + b"\n",
              st.sampled_from(["session/update", "_x/y", "authenticate", "auth/login", "terminal/create"]),
              st.one_of(st.text(max_size=5), st.integers(-3, 3), st.none(), st.booleans(),
                        st.just(1.5), st.just(["s"])),
              st.text(max_size=12)),
    st.builds(lambda params: b'{"jsonrpc":"2.0","method":"session/update"' + params + b"}\n",
              st.sampled_from([b"", b',"params":[]', b',"params":null', b',"params":{"sessionId":true}',
                               b',"params":{"mcpServers":[{"env":[{"name":"K","value":"v"}]}]}',
                               b',"params":{"mcp\\u0053ervers":[{"env":[{"name":"K","value":"v"}]}]}',
                               b',"params":{"terminal/create":1},"method":"terminal\\/create"'])),
    st.sampled_from([b'{"method":1}\n', b'{"method":null,"params":{}}\n', b'{"method":["m"]}\n',
                     b'{"id":null,"method":"m"}\n', b'{"\\u0069d":1,"method":"m"}\n', b"{}\n"]),
    st.binary(max_size=30).map(lambda data: b"{" + data.replace(b"\n", b"") + b"\n"),
).map(lambda line: [line])
runs = streamed | st.lists(streamed | single, min_size=1, max_size=5).map(
    lambda parts: [line for part in parts for line in part])


@given(runs=st.lists(st.tuples(st.sampled_from([A, C]), runs), min_size=1, max_size=3),
       redactor=st.sampled_from([Redactor(), Redactor(secret="t"), Redactor(secret="é"),
                                 Redactor(("/params/t",)), Redactor(("/n/3",))]),
       wall=st.sampled_from([1.0, 1_700_000_000.123456, 0.1, 1e16, -0.0]))
def test_run_records_equal_per_line_records(runs: list[tuple[Direction, list[bytes]]], redactor: Redactor,
                                            wall: float) -> None:
    """The lean path for runs writes exactly the records the general path writes (the same
    encoder with `lean=False`), byte for byte, run after run (a template made in one serves
    the next, in either direction); and both are what the run's lines give one by one."""
    fast, slow, apart = CaptureEncoder(redactor), CaptureEncoder(redactor, lean=False), CaptureEncoder(redactor)
    for direction, lines in runs:
        data = b"".join(lines)
        run = Forward(direction, data, data, Verdict.PASS, untouched_lines=True)
        expected = slow.encode_batch(wall, 2.0, [run])
        assert fast.encode_batch(wall, 2.0, [run]) == expected
        assert apart.encode_batch(wall, 2.0, run.lines()) == expected
