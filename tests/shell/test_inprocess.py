"""`with_agent` (shell/inprocess.py): an agent behind the relay, its client in this process."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from acp_bridge.config import Config
from acp_bridge.config.model import AgentConfig, CaptureConfig, HealthConfig
from acp_bridge.shell.inprocess import with_agent

# Reads its input to the end, then writes what a client that is done will never read: more
# than a pipe holds, so the relay's pump toward the client would have to wait for a reader.
LATE_WRITER = ("import sys\n"
               "sys.stdin.buffer.read()\n"
               "line = b'{\"jsonrpc\":\"2.0\",\"method\":\"late\",\"params\":{\"pad\":\"' + b'x' * 1000 + b'\"}}\\n'\n"
               "sys.stdout.buffer.write(line * 200)\n"
               "sys.stdout.flush()\n")


async def test_what_the_agent_writes_after_its_client_is_done_holds_nothing_up(tmp_path: Path) -> None:
    """The client returns (its input to the agent ends); the agent then writes 200 KB the
    client will never read. The in-memory connection does not buffer (the agent's output is
    not held in memory for a slow client), so the run waited for ever on a reader that was
    gone; what comes after the client is done is now read and dropped, and the run ends."""
    capture = tmp_path / "live.jsonl"
    config = Config(agent=AgentConfig(command=(sys.executable, "-c", LATE_WRITER)),
                    capture=CaptureConfig(path=str(capture), required=True), health=HealthConfig(enabled=False))

    async def client(stream: trio.abc.HalfCloseableStream) -> bool:
        return False  # done at once: the agent's input ends

    with trio.fail_after(20):
        run = await with_agent(config, client, argv=["test"])
    assert (run.status, run.cannot_start, run.capture) == (0, None, str(capture))
    late = [line for line in capture.read_bytes().splitlines() if b'"method":"late"' in line]
    assert len(late) == 200  # recorded, though nobody read them
