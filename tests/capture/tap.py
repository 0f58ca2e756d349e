"""A capture writer's pipe inside the test process (acp_bridge/capture/worker.py)."""

from __future__ import annotations

from collections.abc import Iterator

from acp_bridge.capture.worker import FRAME_HEAD, Writer


class Tap:
    """What a capture hands its writer process, made into records by the writer's own code
    as it arrives: `records` is what the writer would have written so far, `kinds` the
    frames in their order. `room`: whether each `offer` finds room (always, by default)."""

    def __init__(self, room: Iterator[bool] | None = None) -> None:
        self.writer = Writer()
        self.records = b""
        self.kinds: list[bytes] = []
        self.room = room
        self.refused = 0  # offers refused: runs the bridge encoded itself

    def send(self, parts: list[bytes]) -> None:
        data = b"".join(parts)
        while data:
            kind, size = FRAME_HEAD.unpack_from(data)
            self.kinds.append(kind)
            self.records += self.writer.records(kind, data[FRAME_HEAD.size:FRAME_HEAD.size + size])
            data = data[FRAME_HEAD.size + size:]

    def offer(self, parts: list[bytes]) -> bool:
        if self.room is not None and not next(self.room):
            self.refused += 1
            return False
        self.send(parts)
        return True

    def finish(self) -> str | None:
        return None
