"""The core stays pure: importing it pulls in neither trio nor click."""

from __future__ import annotations

import subprocess
import sys


def test_core_imports_neither_trio_nor_click() -> None:
    code = (
        "import sys, acp_bridge.core, acp_bridge.core.rewrites.suggestions, "
        "acp_bridge.core.rewrites.system_prompt, acp_bridge.core.rewrites.unavailable\n"
        "bad = [m for m in ('trio', 'click') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
