"""Transparency over the built-in rules: a line no rule changes leaves as the bytes that came
(bridge-rules 0), whatever its spelling. The lines are written as text, not by an encoder, so
that the spellings a peer may use (duplicate keys, `1.0`, `1e3`, `-0`, 100-digit integers,
`\\u00e9` beside `é`, `\\/`, lone surrogates, odd whitespace, a BOM, CRLF) reach the rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.config import CommandsConfig, Config, RepairConfig, SuggestionsConfig, SystemPromptConfig
from acp_bridge.core import Direction, Forward, Relay
from acp_bridge.core.rewrites import build_rewrites
from tests.core.helpers import split_at

A, C = Direction.TO_AGENT, Direction.TO_CLIENT

CONFIGS = {
    "every built-in off": Config(suggestions=SuggestionsConfig(enabled=False),
                                 commands=CommandsConfig(mirror_initial=False)),
    "defaults": Config(),
    "every built-in on": Config(suggestions=SuggestionsConfig(unlock_legacy_agent=True),
                                system_prompt=SystemPromptConfig(text="be brief"),
                                repair=RepairConfig(close_tool_calls=True)),
}
INITS = [
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":'
    b'{"session":{"promptSuggestions":{}}}}}\n',
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":'
    b'{"_meta":{"jetbrains":{"air":{}}}}}}\n',
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"capabilities":{}}}\n',
]
AGENT_INITS = [
    b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n',
    b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"capabilities":{}}}\n',
]

# Spellings of scalars: each is valid JSON that an encoder would write otherwise.
NUMBERS = [b"0", b"-0", b"1.0", b"1e3", b"1E+3", b"-0.0", b"1.50", b"9" * 100, b"-" + b"1" * 30,
           b"18446744073709551616", b"0.1e-5"]
STRINGS = [b'"caf\\u00e9"', '"café"'.encode(), b'"a\\/b"', b'"\\ud800"', b'"\\udc00x\\ud83d\\ude00"',
           b'"\\u0000"', b'"tab\\there"', b'""', b'"\\""', b'"uggestions"', b'"tool_call"']
SPACE = st.sampled_from([b"", b" ", b"\t", b"  \r", b" \t "])
KEYS = st.sampled_from([b'"a"', b'"a"', b'"x"', b'"_meta"', b'"\\u0061"', b'"sessionId"', b'"id"'])


def _obj(members: list[tuple[bytes, bytes]], space: bytes) -> bytes:
    return b"{" + b",".join(space + k + space + b":" + space + v for k, v in members) + space + b"}"


VALUES = st.recursive(
    st.sampled_from(NUMBERS + STRINGS + [b"true", b"false", b"null"]),
    lambda inner: st.builds(lambda items, s: b"[" + (b"," + s).join(items) + b"]", st.lists(inner, max_size=3), SPACE)
    | st.builds(_obj, st.lists(st.tuples(KEYS, inner), max_size=3), SPACE),
    max_leaves=10,
)
# Methods and update kinds no built-in acts on, and the ids a peer may send.
METHODS = st.sampled_from([b'"_x/y"', b'"fs/read_text_file"', b'"session/set_mode"', b'"unknown"', b'"\\u005fx"'])
UPDATES = st.sampled_from([b'"agent_message_chunk"', b'"plan"', b'"usage_update"', b'"current_mode_update"',
                           b'"session_info_update"', b'"something_new"'])
IDS = st.sampled_from([b"7", b"7.0", b"7e0", b'"7"', b"-0", b"9" * 40, b'"\\u0037"'])


def _request(id_: bytes, method: bytes, params: bytes, extra: bytes, space: bytes) -> bytes:
    return _obj([(b'"jsonrpc"', b'"2.0"'), (b'"id"', id_), (b'"method"', method), (b'"params"', params),
                 (b'"x"', extra)], space)


def _update(update: bytes, members: list[tuple[bytes, bytes]], extra: bytes, space: bytes) -> bytes:
    body = _obj([(b'"sessionUpdate"', update), *members], space)
    params = _obj([(b'"sessionId"', b'"s"'), (b'"update"', body), (b'"_meta"', extra)], space)
    return _obj([(b'"jsonrpc"', b'"2.0"'), (b'"method"', b'"session/update"'), (b'"params"', params)], space)


MESSAGES = st.one_of(
    st.builds(_request, IDS, METHODS, VALUES, VALUES, SPACE),
    st.builds(_update, UPDATES, st.lists(st.tuples(KEYS, VALUES), max_size=3), VALUES, SPACE),
    st.builds(lambda id_, result, s: _obj([(b'"jsonrpc"', b'"2.0"'), (b'"id"', id_), (b'"result"', result)], s),
              IDS, VALUES, SPACE),
)
LINES = st.one_of(
    st.builds(lambda m, bom, end: bom + m + end, MESSAGES, st.sampled_from([b"", b"\xef\xbb\xbf", b" "]),
              st.sampled_from([b"\n", b"\r\n", b" \n"])),
    st.builds(lambda items: b"[" + b",".join(items) + b"]\n", st.lists(MESSAGES, max_size=3)),
    st.sampled_from([b"\n", b"\r\n", b"   \n", b"not json\n", b"\xff\xfe{\n", b'{"a":1,}\n', b"null\n", b"1\n"]),
)


def feed_all(relay: Relay, direction: Direction, parts: list[bytes]) -> list[Forward]:
    out: list[Forward] = []
    for part in parts:
        out.extend(relay.feed(direction, part))
    return out


@pytest.mark.parametrize("name", CONFIGS)
@settings(max_examples=40)
@given(lines=st.lists(st.tuples(st.sampled_from([A, C]), LINES), max_size=12), init=st.sampled_from(INITS),
       cuts=st.lists(st.integers(0, 4000), max_size=6))
def test_lines_no_built_in_acts_on_pass_as_they_came(name: str, lines: list[tuple[Direction, bytes]],
                                                     init: bytes, cuts: list[int]) -> None:
    relay = Relay(build_rewrites(CONFIGS[name]), strict=True)
    relay.feed(A, init)
    relay.feed(C, AGENT_INITS[b'"protocolVersion":2' in init])
    for direction, line in lines:
        out = feed_all(relay, direction, split_at(line, cuts))
        assert [(f.direction, f.data) for f in out if f.data] == [(direction, line)]
