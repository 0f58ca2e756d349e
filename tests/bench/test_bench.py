"""The benchmark harness runs, and its floor relay is a faithful byte pump (real processes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

TRIO_RELAY = [sys.executable, "-m", "bench.trio_relay"]


@pytest.mark.parametrize("data", [b"", bytes(range(256)) * 4096])  # nothing; every byte value, lines, 1 MiB
def test_trio_relay_copies_bytes_exactly(data: bytes) -> None:
    done = subprocess.run(TRIO_RELAY + ["cat"], input=data, capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, data, b"")


def test_trio_relay_passes_the_agent_exit_status_on() -> None:
    done = subprocess.run(TRIO_RELAY + [sys.executable, "-c", "raise SystemExit(3)"],
                          stdin=subprocess.DEVNULL, capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 3


def test_trio_relay_ends_normally_when_the_agent_exits_without_reading() -> None:
    """More input than a pipe holds, to an agent that reads none of it: the relay's write
    fails with EPIPE once the agent is gone, every time (the benchmark's `cat FILE` agents
    met it only when the machine was busy), and the relay ends with the agent's status."""
    done = subprocess.run(TRIO_RELAY + [sys.executable, "-c", "print('bye')"], input=b"x" * (1 << 22),
                          capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"bye\n", b"")


def test_bench_prints_and_writes_its_table(tmp_path: Path) -> None:
    """The bench's smoke pass (one run of each set-up) over every step but start-up, memory
    and replay: every row, as a ratio of a baseline measured in the same run."""
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--lines", "3000", "--pairs", "30", "--repeat", "1", "--rounds", "1",
         "--export-messages", "2000", "--skip", "startup", "memory", "replay", "--json", str(out)],
        capture_output=True, cwd=ROOT, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    rows = json.loads(out.read_text())["rows"]
    names = [row["name"] for row in rows]
    assert names == [
        "0. C relay (cat | cat | cat) vs direct pipe, to client",
        "1. to client, all rules (baseline: C relay)", "1b. to client, all rules vs no rules",
        "1d. to client, health watchdog vs --no-health",
        "1e. to client, a user rule loaded (triggers absent) vs none",
        "1f. to client, as a chain's proxy vs in front of the agent", "1c. floor: bare trio relay, to client",
        "2. to client, capture on (baseline: C relay)",
        "3. to agent, prompts answered (baseline: C relay)",
        "3c. to agent, prompts never answered (baseline: C relay)",
        "3d. to agent, health watchdog vs --no-health", "3b. floor: bare trio relay, to agent",
        "7. to client, SDK relay vs acp-bridge",
        "4. added round trip p50", "4. added round trip p99", "4b. floor: bare trio relay, added p50",
        "9. export --html, time (baseline: stats)", "9b. export --html, peak RSS (baseline: stats)",
        "10. to client, telemetry on vs off", "10b. to agent (a request or response per line), telemetry on vs off",
        "11. round trip p50, telemetry on vs off", "11. round trip p99, telemetry on vs off",
    ]
    assert all(row["bridge"] > 0 and row["baseline"] > 0 for row in rows)
    printed = done.stdout.decode()
    assert all(name in printed for name in names)


def test_bench_refuses_fewer_than_one_round(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.__main__ import main

    monkeypatch.setattr(sys, "argv", ["python -m bench", "--rounds", "0"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2 and capsys.readouterr().err.endswith("error: --rounds must be at least 1\n")
