"""A capture writer process inside the test process (acp_bridge/capture/worker.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

from acp_bridge.capture.worker import FRAME_HEAD, Writer


class Tap:
    """A writer process in the test's own process: each frame handed over is made into
    records by the writer's own code and written to `out` at once (the capture's file, as
    the writer shares it). `kinds`: the frames in their order. `idle_answers`: what each
    `idle()` answers (then always yes); a no makes the capture treat it as busy."""

    def __init__(self, out: int, idle_answers: Iterator[bool] | None = None) -> None:
        self.writer = Writer()
        self.out = out
        self.kinds: list[bytes] = []
        self.idle_answers = idle_answers
        self.busy = 0  # times it answered that it was busy

    def send(self, head: bytes, payload: bytes) -> None:
        kind, size = FRAME_HEAD.unpack_from(head)
        assert size == len(head) - FRAME_HEAD.size + len(payload)
        self.kinds.append(kind)
        data = self.writer.records(kind, head[FRAME_HEAD.size:] + payload)
        while data:
            data = data[os.write(self.out, data):]

    def idle(self) -> bool:
        if self.idle_answers is not None and not next(self.idle_answers):
            self.busy += 1
            return False
        return True

    def finish(self) -> str | None:
        return None
