"""Random agent and client behaviour through the real bridge process.

Whatever the agent does (answers, chatter, long lines, stalls, silence, a torn line and
death, death, closing its stdout) and whatever the client sends (requests, batches, long
requests, ids the parser rejects), in any chunking:
- every line the client receives is a whole line: an agent line byte for byte, or an answer
  from the bridge (only the agent's torn last fragment may stand unterminated at the end);
- the agent's lines arrive complete and in order;
- every request gets exactly one answer (the agent starts acting only once the client has
  written all its lines: a request written after the bridge has closed its side for a
  dead agent cannot be answered, and a client cannot expect it to be);
- the bridge exits within grace + 2 s of the client closing.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import TESTS, open_bridge

CHAOS = TESTS / "agents" / "chaos_agent.py"
GRACE = 0.5  # short: a stalling agent costs each example this twice

agent_steps = st.lists(st.sampled_from(["answer", "chatter", "long", "stall", "ignore", "torn", "die", "close"]),
                       max_size=8)
client_lines = st.lists(st.sampled_from(["request", "notification", "batch", "long", "surrogate"]),
                        min_size=1, max_size=8)


def client_line(kind: str, n: int) -> tuple[bytes, list[str]]:
    """One line from the client and the ids (as JSON text) of the requests in it."""
    if kind == "notification":
        return b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}\n', []
    if kind == "batch":
        return (b'[{"jsonrpc":"2.0","id":%d,"method":"a"},{"jsonrpc":"2.0","id":"b%d","method":"b"}]\n' % (n, n),
                [str(n), f'"b{n}"'])
    if kind == "long":
        return (b'{"jsonrpc":"2.0","method":"session/prompt","params":{"t":"' + b"p" * (3 << 19)
                + b'"},"id":%d}\n' % n, [str(n)])
    if kind == "surrogate":
        return b'{"jsonrpc":"2.0","id":"s%d\\ud83d","method":"c"}\n' % n, [f'"s{n}\\ud83d"']
    return b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n' % n, [str(n)]


# Each example is a real bridge and agent (0.4 s of CPU): three random ones in the README's
# run besides the explicit ones below (the cases that once failed), a hundred with
# HYPOTHESIS_PROFILE=deep.
@settings(max_examples=max(3, settings().max_examples // 20), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(steps=["ignore", "torn"], kinds=["request", "request"], cuts=[])
@example(steps=["long", "ignore", "close"], kinds=["batch", "surrogate", "long", "request"], cuts=[7])
@example(steps=["stall", "die"], kinds=["long", "batch", "surrogate"], cuts=[3, 100])
@given(steps=agent_steps, kinds=client_lines, cuts=st.lists(st.integers(1, 4096), max_size=4))
def test_random_agents_and_clients_through_the_real_bridge(tmp_path_factory: pytest.TempPathFactory, steps: list[str],
                                                           kinds: list[str], cuts: list[int]) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    trio.run(_one_session, tmp, steps, kinds, cuts)


async def _one_session(tmp: Path, steps: list[str], kinds: list[str], cuts: list[int]) -> None:
    log = tmp / "agent-out"
    plan = tmp / "plan.json"
    go = tmp / "go"
    plan.write_text(json.dumps({"log": str(log), "go": str(go), "steps": steps}))
    config = tmp / "bridge.toml"
    config.write_text(f"[relay]\nparse_limit_mib = 1\ngrace_seconds = {GRACE}\n")
    sent = [client_line(kind, n) for n, kind in enumerate(kinds)]
    stream = b"".join(data for data, _ in sent)
    with trio.fail_after(60):
        async with (open_bridge(["run", "-c", str(config), "--", sys.executable, "-u", str(CHAOS), str(plan)])
                    as bridge, trio.open_nursery() as nursery):
            nursery.start_soon(bridge.read_all)
            pos = 0
            for cut in [*cuts, len(stream)]:
                try:
                    await bridge.send(stream[pos:pos + cut])
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break  # the bridge already closed: the agent is gone
                pos += cut
                if pos >= len(stream):
                    break
            if pos < len(stream):
                try:
                    await bridge.send(stream[pos:])
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
            # Everything is written (in the pipe, or read): only now may the agent act,
            # so every request below was sent before anything went wrong.
            go.touch()
            await bridge.close_stdin()
            closed = time.monotonic()
            await bridge.proc.wait()
            took = time.monotonic() - closed
    out = bytes(bridge.received)
    assert took <= GRACE * 2 + 2 + 1.5, took  # grace, SIGTERM's grace, and the exit linger

    agent_out = log.read_bytes() if log.exists() else b""
    agent_lines = agent_out.split(b"\n")
    torn = agent_lines.pop()  # b"" unless the agent died mid-line
    received = out.split(b"\n")
    last = received.pop()
    assert last in (b"", torn), last  # whole lines, but for the agent's own torn fragment

    from_agent, answers = [], []
    for line in received:
        if line in agent_lines or line == torn:
            from_agent.append(line)
        else:
            msg = json.loads(line)  # anything else is a whole message the bridge wrote
            assert msg["error"]["code"] == -32603, line
            answers.append(line)
    assert [x for x in from_agent if x != torn] == agent_lines  # all of them, in order

    expected = sorted(i for _, ids in sent for i in ids)
    got = []
    for line in [*received, last]:
        if not line or line == torn:
            continue
        msg = json.loads(line)
        for item in msg if isinstance(msg, list) else [msg]:
            if "result" in item or "error" in item:
                got.append(json.dumps(item["id"]))
    assert sorted(got) == expected
