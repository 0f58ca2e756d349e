"""The core stays pure: importing every module of it pulls in neither trio nor click."""

from __future__ import annotations

import subprocess
import sys


def test_core_imports_neither_trio_nor_click() -> None:
    code = (
        "import sys, pkgutil, importlib, acp_bridge.core\n"
        "names = [m.name for m in pkgutil.walk_packages(acp_bridge.core.__path__, 'acp_bridge.core.')]\n"
        "for name in names: importlib.import_module(name)\n"
        "bad = [m for m in ('trio', 'click', 'subprocess', 'socket') if m in sys.modules]\n"
        "print(len(names), ','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, _, bad = out.stdout.strip().partition(" ")
    assert int(count) >= 10  # the walk found the modules (core/, rewrites/)
    assert bad == ""


def test_the_core_surface_lists_what_it_loads() -> None:
    from acp_bridge import core

    assert sorted(core.__all__) == sorted(core._MODULE_OF)
    for name in core.__all__:
        assert getattr(core, name) is not None
