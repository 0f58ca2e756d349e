"""The pure parts of replay stay pure, as the core does (tests/core/test_layering.py): reading
a capture into a script, the diffs, the rules' re-run, the client side `drive` plays and its
report import neither trio nor click and do no IO; only the server, the driver and the
commands do."""

from __future__ import annotations

import subprocess
import sys

from tests.core.purity import LEAVES, problems_in, pure_modules

PURE = ("acp_bridge.replay", "acp_bridge.replay.script", "acp_bridge.replay.diff", "acp_bridge.replay.rerun",
        "acp_bridge.replay.turns", "acp_bridge.replay.compare", "acp_bridge.replay.facts",
        "acp_bridge.replay.client_side", "acp_bridge.replay.drive_report")


def test_replay_pure_modules_import_neither_trio_nor_click() -> None:
    code = (
        "import sys, importlib\n"
        f"for name in {PURE!r}: importlib.import_module(name)\n"
        "print(','.join(m for m in ('trio', 'click', 'subprocess', 'socket', 'acp_bridge.config') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_replay_pure_modules_read_no_clock_file_or_process() -> None:
    assert problems_in(PURE, frozenset((*pure_modules(), *PURE, *LEAVES))) == {}
