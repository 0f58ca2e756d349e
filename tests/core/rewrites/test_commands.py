"""The commands mirror (bridge-rules 6.1), table-driven on the pure core with exact bytes.

Each case starts a Relay with only this rule, lets `initialize` pass (v1 or v2), sends the
setup request, then the agent's response as written here, and compares every byte that
goes out toward the client. Every case runs twice: each line fed whole, and one byte at a
time.
"""

from __future__ import annotations

import pytest

from acp_bridge.config import CommandsConfig, Config
from acp_bridge.core.messages import Direction
from acp_bridge.core.relay import Relay, Verdict
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.core.rewrites.commands import MirrorCommands
from tests.conftest import example, line

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


def update(sid: str, commands: str) -> bytes:
    """The notification the bridge writes, byte for byte (`commands`: the array as written)."""
    return (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + sid.encode()
            + b'","update":{"sessionUpdate":"available_commands_update","availableCommands":'
            + commands.encode() + b"}}}\n")


WEB = '[{"type":"command","name":"web","description":"Search the web","input":{"type":"text","hint":"q"}}]'
# As an agent may write them: spacing, escapes, number spellings, an unknown input type, a
# v1 entry without `type`. The bridge writes the notification itself, so spacing goes and
# `\u00e9` is written as the character (the same JSON string), but every number stays as
# written (`1e3`, `1.50`, an integer beyond 64 bits) and the unknown input type is kept.
ODD = ('[ {"name": "caf\\u00e9", "description": "x\\ny", "input": {"type": "_voice", "rate": 1e3},'
       ' "order": 1.50, "big": 123456789012345678901234567890} ]')
ODD_OUT = ('[{"name":"caf\u00e9","description":"x\\ny","input":{"type":"_voice","rate":1e3},'
           '"order":1.50,"big":123456789012345678901234567890}]')


def request(method: str, rid: int, **params: object) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "method": method, "params": {"cwd": "/w", **params}})


def response(rid: int, result: str) -> bytes:
    return f'{{"jsonrpc":"2.0","id":{rid},"result":{result}}}\n'.encode()


CASES = [
    # (version, request line, response line, the notification expected after it, or None)
    pytest.param(2, request("session/new", 1, mcpServers=[]),
                 response(1, f'{{"sessionId":"s_new","availableCommands":{WEB}}}'),
                 update("s_new", WEB), id="v2-new"),
    pytest.param(2, request("session/resume", 2, sessionId="s_old"),
                 response(2, f'{{"configOptions":[],"availableCommands":{WEB}}}'),
                 update("s_old", WEB), id="v2-resume-names-the-requests-session"),
    pytest.param(1, request("session/load", 3, sessionId="s_old", mcpServers=[]),
                 response(3, f'{{"availableCommands":{WEB}}}'),
                 update("s_old", WEB), id="v1-load-names-the-requests-session"),
    pytest.param(2, request("session/fork", 4, sessionId="s_src"),
                 response(4, f'{{"sessionId":"s_fork","availableCommands":{WEB}}}'),
                 update("s_fork", WEB), id="fork-names-the-new-session"),
    pytest.param(2, request("session/fork", 4, sessionId="s_src"),
                 response(4, f'{{"availableCommands":{WEB}}}'),
                 None, id="fork-without-its-session-is-not-mirrored-to-the-source"),
    pytest.param(1, request("session/new", 5, mcpServers=[]),
                 response(5, f'{{"sessionId":"s1","availableCommands":{ODD}}}'),
                 update("s1", ODD_OUT), id="entries-as-written"),
    pytest.param(2, request("session/new", 6, mcpServers=[]),
                 response(6, '{"sessionId":"s1","availableCommands":[]}'), None, id="empty-list"),
    pytest.param(2, request("session/new", 7, mcpServers=[]),
                 response(7, '{"sessionId":"s1","availableCommands":null}'), None, id="null"),
    pytest.param(2, request("session/new", 8, mcpServers=[]),
                 response(8, '{"sessionId":"s1","availableCommands":{"name":"web"}}'), None, id="not-an-array"),
    pytest.param(2, request("session/new", 9, mcpServers=[]),
                 response(9, '{"sessionId":"s1"}'), None, id="none"),
    pytest.param(2, request("session/new", 10, mcpServers=[]),
                 b'{"jsonrpc":"2.0","id":10,"error":{"code":-32603,"message":"no","data":{"availableCommands":[1]}}}\n',
                 None, id="error-response"),
    pytest.param(2, request("session/new", 11, mcpServers=[]),
                 response(11, f'{{"sessionId":7,"availableCommands":{WEB}}}'), None, id="session-id-not-a-string"),
    pytest.param(2, line({"jsonrpc": "2.0", "id": 12, "method": "session/prompt",
                          "params": {"sessionId": "s1", "prompt": []}}),
                 response(12, f'{{"stopReason":"end_turn","availableCommands":{WEB}}}'), None,
                 id="not-a-setup-response"),
]


def initialized(version: int) -> Relay:
    relay = Relay([MirrorCommands()], strict=True)
    relay.feed(A, line(example(f"v{version}-initialize-request-client-plain")))
    relay.feed(C, line(example(f"v{version}-initialize-response-agent-no-system-prompt")))
    return relay


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize(("version", "setup", "answer", "expected"), CASES)
def test_setup_response_is_followed_by_its_commands(version: int, setup: bytes, answer: bytes,
                                                    expected: bytes | None, bytewise: bool) -> None:
    relay = initialized(version)
    assert b"".join(f.data for f in relay.feed(A, setup)) == setup
    pieces = [answer[i:i + 1] for i in range(len(answer))] if bytewise else [answer]
    out = [f for piece in pieces for f in relay.feed(C, piece)]
    assert [f.data for f in out] == [answer] + ([expected] if expected else [])
    assert out[0].verdict is Verdict.PASS and out[0].data is out[0].raw  # the response as it came
    if expected:
        assert [(f.verdict, f.rules, f.direction) for f in out[1:]] == [(Verdict.EMIT, ("commands-mirror",), C)]


def test_the_examples_setup_response_is_mirrored_with_the_same_list() -> None:
    """The spec's own v2 `session/new` response: the notification carries its entries."""
    relay = initialized(2)
    relay.feed(A, line(example("v2-session-new-request-plain")))
    answer = example("v2-session-new-response")
    out = relay.feed(C, line(answer))
    assert [f.data for f in out] == [line(answer), line({
        "jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": "sess_abc123", "update": {
            "sessionUpdate": "available_commands_update",
            "availableCommands": answer["result"]["availableCommands"]}}})]


def test_nothing_is_mirrored_before_the_clients_initialize() -> None:
    """bridge-rules 1: until the client's initialize has passed, no rule acts."""
    relay = Relay([MirrorCommands()], strict=True)
    relay.feed(A, request("session/new", 1, mcpServers=[]))
    answer = response(1, f'{{"sessionId":"s1","availableCommands":{WEB}}}')
    assert [f.data for f in relay.feed(C, answer)] == [answer]


def test_a_terminator_is_kept_and_an_unterminated_last_line_gets_its_own_line() -> None:
    relay = initialized(2)
    relay.feed(A, request("session/new", 1, mcpServers=[]))
    answer = response(1, f'{{"sessionId":"s1","availableCommands":{WEB}}}')[:-1]
    assert [f.data for f in relay.feed(C, answer + b"\r\n")] == [answer + b"\r\n", update("s1", WEB)[:-1] + b"\r\n"]
    relay.feed(A, request("session/new", 2, mcpServers=[]))
    torn = response(2, f'{{"sessionId":"s2","availableCommands":{WEB}}}')[:-1]
    relay.feed(C, torn)
    assert [f.data for f in relay.feed_eof(C)] == [torn, b"\n" + update("s2", WEB)]


@pytest.mark.parametrize(("mirror", "names"), [(True, ["suggestions", "commands-mirror"]), (False, ["suggestions"])])
def test_on_by_default_and_off_by_config(mirror: bool, names: list[str]) -> None:
    config = Config(commands=CommandsConfig(mirror_initial=mirror))
    assert [rule.name for rule in build_rewrites(config)] == names
