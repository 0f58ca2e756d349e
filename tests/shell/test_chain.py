"""`acp-bridge run` with no agent, under a conductor played by the test: the first message
decides, the rules see the unwrapped messages, the capture records them as the client and
the agent sent them, a closed connection leaves nothing unanswered, long lines stream.
(tests/chain/ runs it under real conductors.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio

from acp_bridge.core.proxy_wire import NO_AGENT
from acp_bridge.core.uncarried import BATCH_ANSWER, NO_BATCH, NO_METHOD, NO_ORDER
from tests.cli_helpers import bridge_in_process
from tests.conftest import invoke, open_bridge, run_cli

PROXY_INIT = b'{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'
INIT_RESULT = b'{"protocolVersion":1,"agentCapabilities":{"sessionCapabilities":{"systemPrompt":{}}}}'


def records(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(raw) for raw in path.read_bytes().splitlines()]


async def test_a_conversation_under_the_official_dialect_with_a_system_prompt_and_a_capture(tmp_path: Path) -> None:
    capture = tmp_path / "chain.jsonl"
    async with bridge_in_process(["run", "--capture", str(capture), "--system-prompt", "Be brief."]) as bridge:
        await bridge.send(PROXY_INIT)
        got = await bridge.read_until(b"\n")
        assert got == (b'{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize",'
                       b'"params":{"protocolVersion":1,"clientCapabilities":{}}}}\n')
        await bridge.send(b'{"jsonrpc":"2.0","id":1,"result":' + INIT_RESULT + b"}\n")
        await bridge.read_until(b'"id":0,')
        await bridge.send(b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}\n')
        await bridge.read_until(b'"session/new"')
        # The successor streams a chunk (with a number orjson would respell) and answers.
        await bridge.send(b'{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":'
                          b'{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","n":1.50}}}}\n')
        await bridge.send(b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}\n')
        await bridge.read_until(b'"id":"n"')
    out = bytes(bridge.received).splitlines(keepends=True)
    assert out[1:] == [
        b'{"jsonrpc":"2.0","id":0,"result":' + INIT_RESULT + b"}\n",
        b'{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/new","params":'
        b'{"cwd":"/w","mcpServers":[],"systemPrompt":{"mode":"append","content":[{"type":"text","text":"Be brief."}]}}}}\n',
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
        b'{"sessionUpdate":"agent_message_chunk","n":1.50}}}\n',
        b'{"jsonrpc":"2.0","id":"n","result":{"sessionId":"s"}}\n',
    ]
    assert bridge.proc.returncode == 0
    kept = records(capture)
    assert kept[0]["chain"] == {"role": "proxy", "dialect": "official"}
    assert [(r["direction"], r["kind"], r["method"], r["id"]) for r in kept if r["type"] == "message"] == [
        ("to-agent", "request", "initialize", 0), ("to-client", "response", "initialize", 0),
        ("to-agent", "request", "session/new", "n"), ("to-client", "notification", "session/update", None),
        ("to-client", "response", "session/new", "n")]
    # As the agent sent it: the chunk's number keeps its spelling.
    assert b'\\"n\\":1.50' in capture.read_bytes()


async def test_the_sacp_dialects_answer_to_initialize_says_proxy_true() -> None:
    init = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}\n'
    async with bridge_in_process(["run"]) as bridge:
        await bridge.send(init)
        assert await bridge.read_until(b"\n") == (
            b'{"jsonrpc":"2.0","id":1,"method":"_proxy/successor/request","params":{"method":"initialize",'
            b'"params":{"protocolVersion":1,"_meta":{"proxy":true}}}}\n')
        await bridge.send(b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n')
        await bridge.read_until(b'"id":0')
    assert bytes(bridge.received).splitlines()[1] == (
        b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"_meta":{"proxy":true}}}')


async def test_a_closed_connection_answers_every_request_still_in_flight() -> None:
    async with bridge_in_process(["run"]) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
    answer = json.loads(bytes(bridge.received).splitlines()[1])
    assert answer["id"] == 0
    assert answer["error"]["message"] == "the conductor closed the connection before the successor answered"


async def test_an_editor_that_starts_it_without_an_agent_is_answered_and_told_how(tmp_path: Path) -> None:
    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    done = await run_cli(["run"], stdin=init)
    assert done.returncode == 2
    assert done.stdout == (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":'
                           + json.dumps(NO_AGENT).encode() + b"}}\n")
    assert done.stderr.decode().splitlines() == [f"acp-bridge: ERROR: {NO_AGENT}"]


def test_at_a_terminal_with_no_agent_it_says_so_at_once() -> None:
    leader, follower = os.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "acp_bridge", "run"], stdin=follower, capture_output=True,
                              timeout=30, check=False)
    finally:
        os.close(leader)
        os.close(follower)
    assert done.returncode == 2 and done.stdout == b""
    assert b"no agent command" in done.stderr and b"conductor" in done.stderr


async def test_a_wrapped_line_over_the_parse_limit_reaches_the_client_unwrapped_byte_for_byte(tmp_path: Path) -> None:
    """3 MiB over a 1 MiB parse limit (the path a 40 MiB line takes at the default 16 MiB;
    tests/chain/ sends 40 MiB through a conductor): streamed, and recorded as too long to parse."""
    config, capture = tmp_path / "limit.toml", tmp_path / "long.jsonl"
    config.write_text("[relay]\nparse_limit_mib = 1\n")
    text = b"x" * (3 << 20)
    params = b'{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"' \
             + text + b'"}}}'
    envelope = (b'{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":'
                + params + b"}}\n")
    async with bridge_in_process(["run", "-c", str(config), "--capture", str(capture)], timeout=60) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge.send, envelope)
            await bridge.read_until(b'"}}}}\n')
    expected = b'{"jsonrpc":"2.0","method":"session/update","params":' + params + b"}\n"
    received = bytes(bridge.received)
    start = received.index(b'{"jsonrpc":"2.0","method":"session/update"')
    assert received[start:start + len(expected)] == expected
    assert json.loads(invoke(["stats", "--json", str(capture)]).stdout)["opaque"] == 1  # the long path was taken


async def test_sigterm_answers_what_is_in_flight_keeps_the_capture_whole_and_exits_143(tmp_path: Path) -> None:
    capture = tmp_path / "term.jsonl"
    async with open_bridge(["run", "--capture", str(capture)]) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")  # the wrapped initialize: the bridge is relaying
        bridge.proc.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            status = await bridge.proc.wait()
            received = await bridge.read_all()
    assert status == 128 + signal.SIGTERM
    answer = json.loads(received.splitlines()[1])
    assert (answer["id"], answer["error"]["message"]) == (0, "acp-bridge received SIGTERM before the successor answered")
    assert [r["type"] for r in records(capture)] == ["header", "message", "message", "end"]


async def test_legacy_suggestions_from_the_successor_reach_a_new_client_as_the_new_update_and_are_withdrawn() -> None:
    init = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":'
            b'{"session":{"promptSuggestions":{}}},"_meta":{"proxy":true}}}\n')
    legacy = (b'{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"session/update","params":'
              b'{"sessionId":"s","update":{"sessionUpdate":"session_info_update","_meta":{"promptSuggestions":'
              b'{"suggestions":[{"text":"Run the tests"}]}}}}}}\n')
    async with bridge_in_process(["run"]) as bridge:
        await bridge.send(init)
        await bridge.read_until(b"\n")
        await bridge.send(b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n')
        await bridge.send(b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/","mcpServers":[]}}\n')
        await bridge.read_until(b'"session/new"')
        await bridge.send(b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}\n')
        await bridge.send(legacy)
        await bridge.read_until(b"prompt_suggestions_update")
        await bridge.send(b'{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n')
        await bridge.read_until(b'"session/prompt"')
    out = [json.loads(raw) for raw in bytes(bridge.received).splitlines()]
    suggestions = [m["params"]["update"] for m in out if m.get("method") == "session/update"]
    assert suggestions == [
        {"sessionUpdate": "prompt_suggestions_update", "suggestions": [{"prompt": [{"type": "text", "text": "Run the tests"}]}]},
        {"sessionUpdate": "prompt_suggestions_update", "suggestions": []},  # withdrawn by the new prompt, toward the client
    ]
    assert {"jsonrpc": "2.0", "id": 3, "method": "_proxy/successor/request",
            "params": {"method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}} in out


async def test_a_first_message_over_the_parse_limit_is_no_conductors(tmp_path: Path) -> None:
    config = tmp_path / "limit.toml"
    config.write_text("[relay]\nparse_limit_mib = 1\n")
    done = await run_cli(["run", "-c", str(config)], stdin=b'{"jsonrpc":"2.0","id":0,"method":"proxy/initialize",'
                         b'"params":{"x":"' + b"y" * (2 << 20) + b'"}}')
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode().splitlines() == [
        "acp-bridge: ERROR: the conductor's first message is over the parse limit: no proxy/initialize"]


ASKING_RULE = '''
from acp_bridge.rules import DROP, PASS, Direction, Emit, Replace, Rule


class Ask(Rule):
    def request(self, msg, session):
        if msg.method == "session/new":
            return Replace(msg.msg, then=(Emit(Direction.TO_CLIENT, {"jsonrpc": "2.0", "id": 2, "method": "_x/ask"}),))
        return PASS

    def response(self, msg, request, session):
        return DROP if request.method == "_x/ask" else PASS


rules = [Ask()]
'''


async def test_a_rules_request_to_the_client_does_not_take_the_answer_of_an_envelope_with_its_id(tmp_path: Path) -> None:
    rule, capture = tmp_path / "ask.py", tmp_path / "chain.jsonl"
    rule.write_text(ASKING_RULE)
    async with bridge_in_process(["run", "--rule", str(rule), "--capture", str(capture)]) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        await bridge.send(b'{"jsonrpc":"2.0","id":1,"result":' + INIT_RESULT + b"}\n")
        await bridge.send(b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}\n')
        await bridge.read_until(b'"_x/ask"')  # envelope 2 carries session/new; the rule asks under its own 2
        await bridge.send(b'{"jsonrpc":"2.0","id":3,"result":{"from":"client"}}\n')
        await bridge.send(b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}\n')
        await bridge.read_until(b'"id":"n"')
    out = bytes(bridge.received).splitlines(keepends=True)
    assert sorted(out[2:4]) == [  # one toward each side: in either order
        b'{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/new","params":'
        b'{"cwd":"/w","mcpServers":[]}}}\n',
        b'{"jsonrpc":"2.0","id":3,"method":"_x/ask"}\n',
    ]
    assert out[4:] == [b'{"jsonrpc":"2.0","id":"n","result":{"sessionId":"s"}}\n']  # was the client's {"from":"client"}
    kept = [(r["direction"], r["kind"], r["id"]) for r in records(capture) if r["type"] == "message"]
    assert kept[-3] == ("to-client", "request", 2)
    assert sorted(kept[-2:]) == [("to-agent", "response", 2), ("to-client", "response", "n")]  # one a side: either order


SACP_INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}\n'
BIG = b"1" * 100  # an id no float holds: answered as it was written


def invalid(id_: bytes, message: str) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + id_ + b',"error":{"code":-32600,"message":' + json.dumps(message).encode() + b"}}"


@pytest.mark.parametrize("init", [PROXY_INIT, SACP_INIT], ids=["official", "sacp"])
async def test_a_batch_and_a_request_whose_method_is_no_string_are_answered_at_once_toward_the_client(
        init: bytes, tmp_path: Path) -> None:
    """No envelope can carry them: the bridge answers them as they come, not at the
    conductor's EOF (the batch) or never (the method), and says so once per kind."""
    capture = tmp_path / "chain.jsonl"
    batch = (b'[{"jsonrpc":"2.0","id":' + BIG + b',"method":"session/new","params":{}},'
             b'{"jsonrpc":"2.0","method":"session/cancel","params":{}},[{"jsonrpc":"2.0","id":2,"method":"x"}]]\n')
    no_string = b'{"jsonrpc":"2.0","id":1.50,"method":7}\n'
    async with bridge_in_process(["run", "--capture", str(capture)], timeout=10) as bridge:
        await bridge.send(init)
        await bridge.read_until(b"\n")  # the wrapped initialize
        await bridge.send(batch + no_string + batch + no_string)
        await bridge.read_until(b'"id":1.50,"error"')
        await bridge.read_until(b'"id":1.50,"error"')  # both answered while the connection is open
    batch_answer = b"[" + invalid(BIG, NO_BATCH) + b"," + invalid(b"null", NO_BATCH) + b"]\n"
    method_answer = invalid(b"1.50", NO_METHOD) + b"\n"
    assert bytes(bridge.received).splitlines(keepends=True)[1:] == [
        batch_answer, method_answer, batch_answer, method_answer,
        b'{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"the conductor closed the connection before the '
        b'successor answered"}}\n']
    said = bridge.stderr.decode()
    assert said.count("batch") == 1 and said.count("method is not a string") == 1
    kept = [(r["direction"], r["verdict"], r["rules"], r["size"]) for r in records(capture)
            if r["type"] == "message" and r["rules"] == ["bridge"]]
    assert kept[:4] == [("to-agent", "drop", ["bridge"], len(batch)), ("to-client", "emit", ["bridge"], 0),
                        ("to-agent", "drop", ["bridge"], len(no_string)), ("to-client", "emit", ["bridge"], 0)]
    answers = [r["out"] for r in records(capture) if r["type"] == "message" and r["verdict"] == "emit"]
    assert answers[:2] == [batch_answer.decode(), method_answer.decode()]  # the array read, not withheld whole


async def test_the_clients_answer_in_a_batch_is_answered_toward_the_successor_with_an_error() -> None:
    """The successor's request would wait for ever: its envelope gets an error instead."""
    async with bridge_in_process(["run"], timeout=10) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        await bridge.send(b'{"jsonrpc":"2.0","id":"e","method":"proxy/successor","params":'
                          b'{"method":"fs/read_text_file","params":{"sessionId":"s","path":"/a"}}}\n')
        await bridge.read_until(b'"fs/read_text_file"')  # toward the client under our id 2
        await bridge.send(b'[{"jsonrpc":"2.0","id":2,"result":{"content":""}}]\n')
        await bridge.read_until(b'"id":"e"')
    assert bytes(bridge.received).splitlines(keepends=True)[1:3] == [
        b'{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/a"}}\n',
        b'{"jsonrpc":"2.0","id":"e","error":{"code":-32603,"message":' + json.dumps(BATCH_ANSWER).encode() + b"}}\n"]


async def test_a_batch_over_the_parse_limit_is_answered_as_it_ends_and_said_once(tmp_path: Path) -> None:
    (tmp_path / "limit.toml").write_text("[relay]\nparse_limit_mib = 1\n")
    batch = (b'[{"jsonrpc":"2.0","id":"b","method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text",'
             b'"text":"' + b"x" * (1 << 20) + b'"}]}}]\n')
    async with bridge_in_process(["run", "-c", str(tmp_path / "limit.toml")], timeout=10) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        await bridge.send(batch)
        await bridge.read_until(b'"id":"b"')  # while the connection is open
    assert bytes(bridge.received).splitlines(keepends=True)[1] == b"[" + invalid(b'"b"', NO_BATCH) + b"]\n"
    assert bridge.stderr.decode().count("cannot be carried") == 1  # and not as a line that cannot be wrapped


async def test_a_long_request_whose_id_or_method_comes_after_its_params_is_answered_as_it_ends(tmp_path: Path) -> None:
    """Its envelope is written as it streams, so the link cannot wrap it as a request: the
    bridge answers it once the line has ended, not at the conductor's EOF, says so once, and
    records its answer as its own. A request the link wraps is still the successor's."""
    config, capture = tmp_path / "limit.toml", tmp_path / "long.jsonl"
    config.write_text("[relay]\nparse_limit_mib = 1\n")
    params = b'{"sessionId":"s","prompt":[{"type":"text","text":"' + b"x" * (3 << 19) + b'"}]}'
    late_id = b'{"jsonrpc":"2.0","method":"session/prompt","params":' + params + b',"id":' + BIG + b"}\n"
    late_method = b'{"jsonrpc":"2.0","id":"m","params":' + params + b',"method":"session/prompt"}\n'
    wrapped = b'{"jsonrpc":"2.0","id":"w","method":"session/prompt","params":' + params + b"}\n"
    async with bridge_in_process(["run", "-c", str(config), "--capture", str(capture)], timeout=60) as bridge:
        await bridge.send(PROXY_INIT)
        await bridge.read_until(b"\n")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge.send, late_id + late_method + wrapped)
            await bridge.read_until(b'"id":"m","error"')  # while the connection is open
            await bridge.read_until(b'"}]}}}\n')  # the wrapped one, as our request 2
    answers = [line for line in bytes(bridge.received).splitlines(keepends=True) if b'"error"' in line]
    assert answers[:2] == [invalid(BIG, NO_ORDER) + b"\n", invalid(b'"m"', NO_ORDER) + b"\n"]
    assert answers[2:] == [
        b'{"jsonrpc":"2.0","id":' + id_ + b',"error":{"code":-32603,"message":"the conductor closed the connection '
        b'before the successor answered"}}\n' for id_ in (b"0", b'"w"')]  # only these were in flight
    assert bridge.stderr.decode().count("cannot be carried") == 1
    kept = [(r["direction"], r["verdict"], r["rules"], r.get("out")) for r in records(capture)
            if r["type"] == "message" and r["verdict"] == "emit"]
    assert kept[:2] == [("to-client", "emit", ["bridge"], line.decode()) for line in answers[:2]]
