"""The agent's stderr: passed through to ours as it comes, its tail kept for the client.

Owns: copying the agent's stderr to the bridge's through the one bounded writer of our
stderr (`shell/logs.py`), and the last few KiB of it, masked, for the errors the bridge
answers with. Must never: let a slow, unread or closed stderr of ours stop the relay, or
send an unmasked secret to the client.
"""

from __future__ import annotations

import trio

from acp_bridge.shell.logs import FdWriter

STDERR_TAIL_BYTES = 4096


class StderrTail:
    """The last few KiB the agent wrote to stderr, for the errors the bridge answers with."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self.limit = limit
        self._data = bytearray()
        self._dropped = False  # some of the stderr is gone: the tail starts mid-line

    def add(self, chunk: bytes | bytearray) -> None:
        self._data += chunk
        if len(self._data) > 2 * self.limit:
            del self._data[: len(self._data) - self.limit]
            self._dropped = True

    def text(self, private: str | None = None) -> str:
        """The tail, whole lines where possible, with secrets masked: it goes to the client."""
        if not self._data:  # nothing to mask: most agents end without a word on stderr, and
            return ""  # then a run does not load the masking (capture.text_redaction) at all
        data = bytes(self._data[-self.limit :])
        if self._dropped or len(self._data) > self.limit:
            cut = data.find(b"\n")
            data = data[cut + 1 :] if 0 <= cut < len(data) - 1 else data
        return mask_secrets(data.decode("utf-8", "replace"), private)


def mask_secrets(text: str, private: str | None = None) -> str:
    """Text that leaves the bridge (bridge-rules 5) masked as the capture masks it: secret-
    looking values and the configured system prompt (`capture.text_redaction.mask_text_secrets`)."""
    from acp_bridge.capture.text_redaction import mask_text_secrets  # as the agent ends, not at start-up

    return mask_text_secrets(text, private)


async def pass_stderr(source: trio.abc.ReceiveStream, tail: StderrTail, writer: FdWriter, done: trio.Event) -> None:
    """Copy the agent's stderr to ours as it comes, keeping its tail.

    Through `writer` (shell/logs.py), which never waits: our stderr may be a terminal or a
    pipe that is slow to drain, or never read, and neither the relay nor the agent (whose
    stderr pipe this keeps drained) may wait for it.
    """
    try:
        while chunk := await source.receive_some(65536):
            tail.add(chunk)
            writer.write(bytes(chunk))
    finally:
        done.set()
