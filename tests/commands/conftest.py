"""Fixtures of the command tests: a small fixed capture, and local time pinned to UTC."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_bridge.capture.records import dumps, header_record
from tests.commands.sample_capture import RECORDS, WALL


@pytest.fixture
def utc() -> Iterator[None]:
    """The commands print local time; pin the zone so the lines are exact."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    header = header_record(wall=WALL, mono=0.0, argv=["acp-bridge", "run"], config_digest="abc", pid=7)
    path.write_bytes(dumps(header) + b"".join(dumps(r) for r in RECORDS) + dumps({"type": "end", "records": 5}))
    return path
