"""bench.feed_ab runs its probe in each tree given and prints one row per workload."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_feed_ab_prints_every_workload_for_every_tree() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.feed_ab", "--lines", "3000", "--rounds", "2", ".", "."],
                          capture_output=True, cwd=ROOT, timeout=120, check=False, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "us per line, best of 2 rounds (all rounds in brackets), 3000 lines"
    rows = {line.split("  ")[0]: line for line in lines[2:]}
    assert list(rows) == ["to-client", "to-agent", "to-agent unanswered", "capture", "capture written"]
    for row in rows.values():
        assert row.count("[") == 2  # both trees, each with its two rounds


def test_feed_ab_reports_a_tree_it_cannot_run(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "bench.feed_ab", "--lines", "10", "--rounds", "1", str(tmp_path)],
                          capture_output=True, cwd=ROOT, timeout=60, check=False, text=True)
    assert (done.returncode, done.stderr) == (
        2, f"bench.feed_ab: {tmp_path}: ModuleNotFoundError: No module named 'bench'\n")
