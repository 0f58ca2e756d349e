"""Reliability through the real CLI: whole lines, an answer for every request, no crash on
input, no wait on an orphan (issue "Reliability", docs/faults.md).

Each test runs `run` in front of a small agent process written for it: as the real CLI
process where the process is the subject (signals, exit timing, stalled pipes, a hangup on
its stdin), otherwise in this process (tests/cli_helpers.py, on real pipes).
"""

from __future__ import annotations

import fcntl
import signal
import sys
import time
from pathlib import Path

import orjson
import pytest
import trio

from tests.cli_helpers import bridge_in_process, run_cli_in_process, sigterm_once_stuck, wait_until_still
from tests.conftest import BridgeProcess, agent_cmd, line, open_bridge

INIT_NEW_CLIENT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": 1,
                              "clientCapabilities": {"session": {"promptSuggestions": {}}}}}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


def agent(code: str) -> list[str]:
    """An agent written for one test: Python code with `out(bytes)` and `lines` (stdin)."""
    prelude = (
        "import os, sys, time, subprocess\n"
        "def out(b):\n    sys.stdout.buffer.write(b); sys.stdout.buffer.flush()\n"
        "lines = iter(sys.stdin.buffer.readline, b'')\n"
    )
    return [sys.executable, "-u", "-c", prelude + code]


# Answers initialize with the spec's systemPrompt capability, then echoes every line.
SYSTEM_PROMPT_ECHO = agent(
    "next(lines); out(b'{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1,"
    "\"agentCapabilities\":{\"sessionCapabilities\":{\"systemPrompt\":{}}}}}\\n')\n"
    "for l in lines: out(l)\n"
)


async def after_initialize(options: list[str], then: bytes) -> bytes:
    """Initialize through the bridge (so the agent's capabilities are known), send `then`,
    close, and return what the client received."""
    async with bridge_in_process(["run", *options, "--", *SYSTEM_PROMPT_ECHO], timeout=30) as bridge:
        await bridge.send(line(INIT_NEW_CLIENT))
        await bridge.read_until(b"\n")
        await bridge.send(then)
    assert bridge.proc.returncode == 0
    return bytes(bridge.received)


def quick_grace(tmp_path: Path) -> Path:
    """A config whose grace period is 0.3 s, for agents the ladder has to stop (and whose
    last output is waited for as long, not 1 s)."""
    config = tmp_path / "quick-grace.toml"
    config.write_text("[relay]\ngrace_seconds = 0.3\n")
    return config


def answer(id_text: bytes, message: bytes, data: bytes) -> bytes:
    return (b'{"jsonrpc":"2.0","id":' + id_text + b',"error":{"code":-32603,"message":"' + message
            + b'","data":' + data + b"}}\n")


def exited(status: int) -> tuple[bytes, bytes]:
    return b"agent exited with status %d before answering" % status, b'{"exitStatus":%d}' % status


# -- framing: what the bridge writes is always whole lines ---------------------------------------


async def test_agent_dying_mid_line_leaves_the_fragment_and_a_whole_answer_line() -> None:
    """The torn fragment goes on as it came; the answer to the request in flight follows on
    a line of its own (before: `..."met{"jsonrpc":"2.0","id":0,"error":...`)."""
    result = await run_cli_in_process(["run", "--", *agent_cmd("crash-after", "1")], line(INIT))
    assert result.returncode == 3
    assert result.stdout == line(INIT) + b'{"jsonrpc":"2.0","met' + b"\n" + answer(b"0", *exited(3))


async def test_a_rewritten_last_line_without_newline_is_not_glued_to_what_follows() -> None:
    """A legacy suggestion on the agent's unterminated last line, converted for a new client:
    the stripped update and the added one are two lines."""
    update = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "session_info_update", "title": "T",
        "_meta": {"promptSuggestions": {"suggestions": [{"text": "next"}]}}}}}
    init_result = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n'
    code = f"next(lines); out({init_result!r}); out({orjson.dumps(update)!r})"
    result = await run_cli_in_process(["run", "--", *agent(code)], line(INIT_NEW_CLIENT))
    assert result.returncode == 0, result.stderr
    out = result.stdout.split(b"\n")
    assert out[-1] == b""  # every line whole
    assert [orjson.loads(x)["params"]["update"] for x in out[1:-1]] == [
        {"sessionUpdate": "session_info_update", "title": "T"},
        {"sessionUpdate": "prompt_suggestions_update",
         "suggestions": [{"prompt": [{"type": "text", "text": "next"}]}]},
    ]


async def test_withdrawal_waits_for_a_long_line_streaming_to_the_client(tmp_path: Path) -> None:
    """The client prompts while an over-limit agent line is half sent: the withdrawal goes
    after that line, not into it."""
    config = tmp_path / "c.toml"
    config.write_text("[relay]\nparse_limit_mib = 1\n")
    offer = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "prompt_suggestions_update",
        "suggestions": [{"prompt": [{"type": "text", "text": "go on"}]}]}}}
    head = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"'
    long_head = head + b"a" * (2 << 20)
    code = (
        "next(lines); out(b'{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1}}\\n')\n"
        f"out({line(offer)!r})\n"
        f"out({head!r} + b'a' * (2 << 20))\n"
        "next(lines)\n"  # the prompt: the bridge has decided the withdrawal by now
        "out(b'b' * 100 + b'\"}}\\n')\n"
        "next(lines, None)\n"
    )
    prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}
    async with bridge_in_process(["run", "-c", str(config), "--", *agent(code)], timeout=30) as bridge:
        await bridge.send(line(INIT_NEW_CLIENT))
        await bridge.read_until(b"a" * 1000)  # the long line is streaming
        await bridge.send(line(prompt))
    lines = bytes(bridge.received).split(b"\n")
    assert lines[2] == long_head + b"b" * 100 + b'"}}'
    assert orjson.loads(lines[3])["params"]["update"] == {
        "sessionUpdate": "prompt_suggestions_update", "suggestions": []}


async def test_a_client_that_stops_reading_does_not_stall_its_own_requests(tmp_path: Path) -> None:
    """The agent floods a client that is not reading; the client prompts (a withdrawal is
    due toward it) and sends 200 more lines: all of them still reach the agent."""
    seen = tmp_path / "seen"
    offer = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "prompt_suggestions_update",
        "suggestions": [{"prompt": [{"type": "text", "text": "go on"}]}]}}}
    chunk = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"f" * 1000 + b'"}}\n'
    code = (
        "import threading\n"
        "next(lines); out(b'{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1}}\\n')\n"
        f"out({line(offer)!r})\n"
        f"threading.Thread(target=lambda: [out({chunk!r}) for _ in range(20000)], daemon=True).start()\n"
        f"n = 0\n"
        f"for l in lines:\n"
        f"    n += 1\n"
        f"    open({str(seen)!r}, 'w').write(str(n))\n"
    )
    prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}
    probe = b'{"jsonrpc":"2.0","method":"_probe","params":{}}\n'
    with trio.fail_after(30):
        async with open_bridge(["run", "--", *agent(code)]) as bridge:
            await bridge.send(line(INIT_NEW_CLIENT))
            await bridge.read_until(b'"go on"')  # offered; from now on the client reads nothing
            # Only once the bridge is stuck writing to us does the prompt go: sent earlier,
            # its withdrawal would still fit in the pipe and the test would prove nothing.
            await wait_until_full(bridge)
            await bridge.send(line(prompt))
            while not (seen.exists() and seen.read_text() == "1"):
                await trio.sleep(0.05)  # polling a condition, with the deadline above
            # The withdrawal is decided (the prompt went through): now lines read after it.
            await bridge.send(probe * 200)
            while not (seen.exists() and seen.read_text() == "201"):
                await trio.sleep(0.05)


# -- never crash on input -------------------------------------------------------------------


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def test_json_nested_1000_deep_passes_with_every_feature_off_and_on() -> None:
    deep_id = b'{"jsonrpc":"2.0","id":' + nested(1000) + b',"method":"x"}\n'
    deep_meta = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"_meta":' + nested(1000) + b"}}\n"
    stream = deep_meta + deep_id
    for options in (["--no-suggestions"], ["--system-prompt", "Be brief."], ["-vv"]):
        result = await run_cli_in_process(["run", *options, "--", *agent_cmd("echo")], stream)
        assert result.returncode == 0, result.stderr
        # Both requests come back (echoed) as they went, then the bridge answers both; the
        # id nested past what can be written back gets JSON-RPC's null id.
        assert result.stdout == stream + answer(b"1", *exited(0)) + answer(b"null", *exited(0))
        assert b"Traceback" not in result.stderr and b"Logging error" not in result.stderr


async def test_a_rule_that_cannot_write_back_a_deep_message_forwards_it_unchanged() -> None:
    """A legacy suggestion with a deep `_meta`, converted for a new client, and a
    session/new with a deep `_meta` that gets a system prompt: forwarded as they came."""
    deep_new = b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[],"_meta":{"d":' + nested(600) + b"}}}\n"
    out = await after_initialize(["--system-prompt", "Be brief."], deep_new)
    assert out.split(b"\n", 1)[1].startswith(deep_new)


async def test_integers_beyond_64_bits_survive_rewrites_and_answers() -> None:
    big = b"1" + b"0" * 99
    new = (b'{"jsonrpc":"2.0","id":' + big + b',"method":"session/new","params":{"cwd":"/",'
           b'"mcpServers":[],"_meta":{"n":-' + big + b',"f":1.50e3}}}\n')
    out = await after_initialize(["--system-prompt", "Be brief."], new)
    lines = out.split(b"\n")
    # The echoed (rewritten) session/new keeps every number as written...
    assert b'"id":' + big + b"," in lines[1] and b'"n":-' + big + b"," in lines[1]
    assert b'"f":1.50e3' in lines[1] and b"systemPrompt" in lines[1]
    # ...and so does the bridge's own answer when the agent exits without answering.
    assert answer(big, *exited(0)) in out


# -- an answer for every request ----------------------------------------------------------------


async def test_agent_exit_answers_in_flight_even_when_a_child_holds_stdout_open(tmp_path: Path) -> None:
    """The agent starts a child that inherits its stdout, then dies with a prompt in flight:
    the prompt is answered and the bridge exits, without waiting for the child."""
    code = "subprocess.Popen(['sleep', '20'], start_new_session=True); next(lines); sys.exit(3)"
    # The client stays until it has its answer: had it closed at once, an agent slower to
    # start than the 0.3 s grace (a busy machine) would get SIGTERM before its exit.
    with trio.fail_after(20):
        async with open_bridge(["run", "-c", str(quick_grace(tmp_path)), "--", *agent(code)]) as bridge:
            start = time.monotonic()
            await bridge.send(line(INIT))
            out = await bridge.read_all()  # the bridge closes our stdin's peer when done
            await bridge.close_stdin()
            status = await bridge.proc.wait()
    assert (status, out) == (3, answer(b"0", *exited(3)))
    assert time.monotonic() - start < 10  # the child's 20 s are not waited for


async def test_agent_closing_stdout_but_running_on_gets_requests_answered(tmp_path: Path) -> None:
    code = "next(lines); os.close(1); time.sleep(60)"
    with trio.fail_after(30):
        async with open_bridge(["run", "-c", str(quick_grace(tmp_path)), "--", *agent(code)]) as bridge:
            await bridge.send(line(INIT))
            out = await bridge.read_all()  # the bridge closes our stdin's peer when done
            await bridge.close_stdin()
            status = await bridge.proc.wait()
    assert out == answer(b"0", b"agent closed its stdout before answering",
                         b'{"reason":"the agent closed its stdout and kept running"}')
    assert status == 128 + signal.SIGTERM


async def test_requests_in_a_batch_long_or_with_a_lone_surrogate_are_answered_when_the_agent_dies(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[relay]\nparse_limit_mib = 1\n")
    batch = b'[{"jsonrpc":"2.0","id":11,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"12","method":"b"}]\n'
    surrogate = b'{"jsonrpc":"2.0","id":"\\ud83d","method":"c","params":{"t":"\\ud83d"}}\n'
    long = b'{"jsonrpc":"2.0","method":"session/prompt","params":{"t":"' + b"p" * (2 << 20) + b'"},"id":13}\n'
    code = "n = 0\nfor l in lines:\n    n += 1\n    if n == 3: sys.exit(5)"
    result = await run_cli_in_process(["run", "-c", str(config), "--", *agent(code)], batch + surrogate + long)
    assert result.returncode == 5
    message, data = b"agent exited with status 5 before answering", b'{"exitStatus":5}'
    assert sorted(result.stdout.splitlines(keepends=True)) == sorted(
        [answer(i, message, data) for i in (b"11", b'"12"', b'"\\ud83d"', b"13")])


async def test_requests_the_parser_rejects_are_answered_when_the_agent_cannot_start(tmp_path: Path) -> None:
    batch = b'[{"jsonrpc":"2.0","id":1,"method":"a"}]\n'
    surrogate = b'{"jsonrpc":"2.0","id":2,"method":"c","params":{"t":"\\udc00"}}\n'
    result = await run_cli_in_process(["run", "--", str(tmp_path / "no-such-agent")], batch + surrogate)
    assert result.returncode == 127
    ids = [orjson.loads(x)["id"] for x in result.stdout.splitlines()]
    assert ids == [1, 2]


async def test_two_requests_with_the_same_id_each_get_an_answer() -> None:
    prompt = b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n'
    code = "next(lines); next(lines); sys.exit(4)"
    result = await run_cli_in_process(["run", "--", *agent(code)], prompt + prompt)
    assert result.returncode == 4
    assert result.stdout == answer(b"7", *exited(4)) * 2


async def test_sigterm_ends_a_bridge_whose_agent_left_an_orphan_on_stdout(tmp_path: Path) -> None:
    """SIGTERM is passed to the agent, which dies of it; a process it started in a session of
    its own still holds stdout: the prompt in flight is answered and the bridge exits."""
    code = ("subprocess.Popen(['sleep', '20'], start_new_session=True)\n"
            "next(lines); out(b'{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\\n')\n"
            "time.sleep(60)")
    prompt = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n'
    with trio.fail_after(30):
        async with open_bridge(["run", "-c", str(quick_grace(tmp_path)), "--", *agent(code)]) as bridge:
            await bridge.send(line(INIT))
            await bridge.read_until(b'"result":{}}\n')  # running, signal handlers in place
            await bridge.send(prompt)
            bridge.proc.send_signal(signal.SIGTERM)
            out = await bridge.read_all()
            status = await bridge.proc.wait()
    assert status == 128 + signal.SIGTERM
    assert out.splitlines()[1:] == [answer(
        b"1", b"agent died of SIGTERM (status 143) before answering",
        b'{"exitStatus":143,"signal":"SIGTERM"}').rstrip(b"\n")]


async def test_requests_stuck_behind_an_agent_that_stopped_reading_are_answered(tmp_path: Path) -> None:
    """The agent stops reading, so the bridge's write to it blocks with client requests
    still unread behind it; then it closes its stdout. Every request is answered: the
    bridge abandons the agent's stdin and reads what the client had written.

    Everything the client sends fits in the two pipes (the agent's, its own), so its write
    has ended before the agent closes its stdout: no answer depends on when this process
    runs again. (It sent 4 MiB, more than the pipes hold: under load it could be slower to
    write the rest than the bridge was to answer and close, and the last requests went
    unanswered.)"""
    go = tmp_path / "go"
    code = ("next(lines); out(b'{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\\n')\n"
            f"import pathlib\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.01)\n"
            "os.close(1); time.sleep(60)")
    fill = b'{"jsonrpc":"2.0","method":"_fill","params":{"t":"' + b"f" * (64 << 10) + b'"}}\n'
    prompts = b"".join(b'{"jsonrpc":"2.0","method":"session/prompt","params":{},"id":%d}\n' % n for n in range(1, 9))
    with trio.fail_after(30):
        async with open_bridge(["run", "-c", str(quick_grace(tmp_path)), "--", *agent(code)]) as bridge:
            await bridge.send(line(INIT))
            await bridge.read_until(b"\n")  # running, pipes widened; the agent reads no more
            pipe = pipe_size(bridge)  # the agent's stdin is as wide as the bridge's
            # More than the agent's pipe holds, so the bridge's write to it blocks; less
            # than both pipes hold, so the client's write ends.
            await bridge.send(fill * (pipe * 3 // 2 // len(fill) + 1) + prompts)
            await wait_until_stalled(bridge, at_least=0)  # the bridge stopped reading
            go.touch()
            out = await bridge.read_all()
    message = b"agent closed its stdout before answering"
    data = b'{"reason":"the agent closed its stdout and kept running"}'
    assert out.split(b"\n", 1)[1] == b"".join(answer(b"%d" % n, message, data) for n in range(1, 9))


def pipe_size(bridge: BridgeProcess) -> int:
    assert isinstance(bridge.proc.stdin, trio.lowlevel.FdStream)
    return fcntl.fcntl(bridge.proc.stdin.fileno(), getattr(fcntl, "F_GETPIPE_SZ", 1032))


async def test_a_stderr_nobody_reads_holds_up_no_answer_and_no_exit() -> None:
    """The editor never reads the bridge's stderr. The agent prints 800 KB of banners on
    stdout (diverted to stderr) and 200 KB on stderr, then dies with a prompt in flight:
    the prompt is answered with its death and the bridge exits, though its stderr is full
    and its log says why it answered (before, that log line blocked the bridge for good)."""
    import subprocess

    from acp_bridge.shell.stderr import StderrTail

    banner = b"banner " + b"b" * 92 + b"\n"
    noise = b"noise " + b"n" * 93 + b"\n"
    code = (f"next(lines); out({banner!r} * 8000)\n"
            f"sys.stderr.buffer.write({noise!r} * 2000); sys.stderr.flush(); sys.exit(3)")
    prompt = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n'
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "acp_bridge", "run", "--stray-output", "stderr", "--", *agent(code)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with trio.fail_after(30):
            bridge = BridgeProcess(proc)
            await bridge.send(prompt)
            out = await bridge.read_all()
            status = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
        assert proc.stderr is not None
        err = await proc.stderr.receive_some(1 << 20)  # read only now, after the end
        await proc.stderr.aclose()
    tail = StderrTail()
    tail.add(noise * 2000)
    data = orjson.dumps({"exitStatus": 3, "stderr": tail.text()})
    assert (status, out) == (3, answer(b"1", b"agent exited with status 3 before answering", data))
    # What the pipe holds: whole lines of both, as the bridge took them (the rest dropped).
    # How full the bridge gets the pipe (64 KiB) depends on how its writes of at most 4 KiB
    # fell: more than half of it, so the bridge did write until the pipe was full.
    diverted = b"acp-bridge: agent stdout (not forwarded): " + banner
    assert len(err) > 32768 and set(err.splitlines(keepends=True)[:-1]) <= {diverted, noise}


async def wait_until_stalled(bridge: BridgeProcess, *, at_least: int = 1) -> None:
    """Wait until the bytes queued in the bridge's stdin pipe are `at_least` and no longer move."""
    assert isinstance(bridge.proc.stdin, trio.lowlevel.FdStream)
    await wait_until_still(bridge.proc.stdin.fileno(), at_least)


async def wait_until_full(bridge: BridgeProcess) -> None:
    """Wait until the bytes the bridge wrote to its stdout, unread, are many and no longer
    move: the bridge is blocked writing to us."""
    assert isinstance(bridge.proc.stdout, trio.lowlevel.FdStream)
    await wait_until_still(bridge.proc.stdout.fileno())


async def test_a_slow_client_gets_all_the_output_of_an_agent_that_exited(tmp_path: Path) -> None:
    """The agent writes more than the pipes hold, answers, and exits while the client is not
    reading: everything still arrives, whole and in order (the bridge stops reading an
    exited agent only once its output is silent, not while it is writing to the client)."""
    done = tmp_path / "done"
    chunk = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"c" * 1000 + b'"}}\n'
    reply = b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n'
    code = (f"next(lines)\nsys.stdout.buffer.write({chunk!r} * 1500 + {reply!r})\n"
            f"sys.stdout.buffer.flush()\nopen({str(done)!r}, 'w').close()")
    prompt = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n'
    with trio.fail_after(30):
        async with open_bridge(["run", "-c", str(quick_grace(tmp_path)), "--", *agent(code)]) as bridge:
            await bridge.send(prompt)
            while not done.exists():  # the agent has written everything and is exiting
                await trio.sleep(0.05)
            # Not an ordering: the client stays away longer than the bridge's wait for the
            # output of an agent that has exited (0.3 s here), which is what used to cut it off.
            await trio.sleep(0.9)
            await bridge.close_stdin()
            out = await bridge.read_all()
    assert out == chunk * 1500 + reply


async def test_the_client_closing_ends_a_bridge_whose_agent_reads_nothing(tmp_path: Path) -> None:
    """The agent never reads its stdin; the client fills the pipes and closes. The bridge
    cannot read the client's EOF behind the unread bytes, yet it sees the hangup and stops
    the agent within the grace period."""
    config = quick_grace(tmp_path)
    code = "out(b'{\"jsonrpc\":\"2.0\",\"method\":\"ready\"}\\n'); time.sleep(60)"
    note = b'{"jsonrpc":"2.0","method":"_n","params":{"x":"' + b"n" * 1000 + b'"}}\n'
    with trio.fail_after(30):
        async with open_bridge(["run", "-c", str(config), "--", *agent(code)]) as bridge:
            await bridge.read_until(b"ready")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(bridge.send, note * 6000)  # 6 MB: more than every pipe holds
                await wait_until_stalled(bridge)
                nursery.cancel_scope.cancel()
            await bridge.close_stdin()
            closed = time.monotonic()
            status = await bridge.proc.wait()
    assert status == 128 + signal.SIGTERM  # the agent, stopped by the ladder
    # Far sooner than the agent's 60 s sleep: the hangup was seen. Not a measure of the
    # grace (0.3 s) and the 0.5 s poll, which a busy machine stretches (it was `< 3`).
    assert time.monotonic() - closed < 20


FLOOD = ("import sys\nline = b'{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\","
         "\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"t\":\"' + b'x' * 1000 + b'\"}}}\\n'\n"
         "while True:\n    sys.stdout.buffer.write(line * 100)\n")


async def test_a_signal_with_the_stdout_unread_stops_the_bridge_once_its_writes_stand_still(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In front of an agent, as in a chain: SIGTERM passed on, the agent gone, the bridge
    still wrote its last output and the answer in flight to a client that read nothing, and
    waited for ever. Once a write has stood still for the stop timeout, it stops without it."""
    from acp_bridge.shell.agent import AgentProcess

    monkeypatch.setattr(AgentProcess, "stop_timeout", 0.3)
    async with bridge_in_process(["run", "--", sys.executable, "-c", FLOOD], timeout=20) as bridge:
        await bridge.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
        await sigterm_once_stuck(bridge)
        with trio.fail_after(10):  # it waited for ever
            await bridge.proc.ended.wait()
    assert bridge.proc.returncode == 128 + signal.SIGTERM
    assert ("acp-bridge: WARNING: the client has not read the bridge's stdout for 0.3s while stopping; "
            "not waiting for it") in bridge.stderr.decode().splitlines()
