"""Bench row 8 (replay serving a capture) runs and measures what it says, on a small capture."""

from __future__ import annotations

from pathlib import Path

from bench.__main__ import Row
from bench.replay import replay_rows, write_capture
from tests.replay.drive import records


def test_the_bench_capture_is_a_capture_of_the_size_asked_for(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    assert write_capture(capture, 1000) == 995  # the chunks and the prompt's answer
    assert len(records(capture)) == 1000


def test_the_replay_row_reports_a_rate_against_the_goal(tmp_path: Path) -> None:
    [row] = replay_rows(tmp_path, Row, messages=2000, repeat=1)
    assert (row.name, row.baseline, row.unit, row.goal) == (
        "8. replay serves a 2k-message capture", 100_000.0, "msg/s", ">= 1.0 (100k msg/s)")
    assert row.bridge > 0 and row.ratio == round(row.bridge / 100_000, 2) and row.met == (row.bridge >= 100_000)
