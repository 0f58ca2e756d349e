"""The pure parts stay pure: every module of acp_bridge.core, and every module of
acp_bridge.capture but its shell, imports neither trio nor click, and reads no clock, time
zone, file, process or socket (the shell passes times in and does the IO)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys

from tests.core.purity import CAPTURE_SHELL, LEAVES, problems_in, problems_of, pure_modules


def test_the_walk_finds_the_modules() -> None:
    names = pure_modules()
    assert len(names) >= 15  # core/, rewrites/, capture/
    assert {"acp_bridge.core.relay", "acp_bridge.core.rewrites.base", "acp_bridge.core.shapes",
            "acp_bridge.core.direction_state", "acp_bridge.core.runs", "acp_bridge.core.verdicts",
            "acp_bridge.capture.records", "acp_bridge.capture.redaction", "acp_bridge.capture.spellings",
            "acp_bridge.capture.reader", "acp_bridge.capture.stats", "acp_bridge.capture.previews",
            "acp_bridge.capture.masking"} <= set(names)
    assert CAPTURE_SHELL.isdisjoint(names)
    for name in CAPTURE_SHELL:  # the shell list names real modules
        assert importlib.util.find_spec(name) is not None


def test_pure_modules_import_neither_trio_nor_click() -> None:
    code = (
        "import sys, importlib\n"
        f"for name in {pure_modules()!r}: importlib.import_module(name)\n"
        "bad = [m for m in ('trio', 'click', 'subprocess', 'socket', 'acp_bridge.config') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_pure_modules_read_no_clock_time_zone_file_or_process() -> None:
    pure = frozenset(pure_modules())
    assert problems_in(pure, pure | LEAVES) == {}


def test_the_check_sees_what_it_forbids() -> None:
    for source in ("import os", "import time", "from os import path", "import subprocess as sp",
                   "from socket import socket", "x = datetime.now()", "time.localtime(1)",
                   "datetime.fromtimestamp(1)", "open('f')", "from acp_bridge.capture.files import local_clock"):
        assert problems_of(ast.parse(source), frozenset({"acp_bridge.capture.records"})), source
    for source in ("import json", "now = 1.5", "datetime.fromtimestamp(1, timezone.utc)",
                   "datetime.fromtimestamp(1, tz=timezone.utc)", "from acp_bridge.core import os_like",
                   "from acp_bridge import __version__", "from acp_bridge.capture.records import dumps"):
        assert not problems_of(ast.parse(source), frozenset({"acp_bridge.core", "acp_bridge.capture.records"})), source
