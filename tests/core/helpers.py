"""Shared by the core's tests: a read cut into pieces, a rule that fails on one answer."""

from __future__ import annotations

from acp_bridge.core import PASS, Connection, Frame, Rule
from acp_bridge.core.rewrites.base import Outcome
from acp_bridge.core.session import Pending


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    parts, start = [], 0
    for point in points:
        parts.append(data[start:point])
        start = point
    parts.append(data[start:])
    return parts


class FailOnSecondAnswer(Rule):
    name = "fail-on-2"

    def response(self, frame: Frame, request: Pending | None, session: Connection) -> Outcome:
        if frame.id == 2:
            raise RuntimeError("bug")
        return PASS
