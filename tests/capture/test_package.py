"""The package's import surface: every name it offers loads, and importing it loads nothing else."""

from __future__ import annotations

import subprocess
import sys

import pytest

from acp_bridge import capture


def test_every_name_of_the_surface_loads() -> None:
    assert sorted(capture.__all__) == sorted(capture._MODULE_OF)
    for name in capture.__all__:
        assert getattr(capture, name) is not None


@pytest.mark.detail
def test_importing_the_package_loads_none_of_its_modules() -> None:
    code = ("import sys, acp_bridge.capture\n"
            "print(sorted(m for m in sys.modules if m.startswith('acp_bridge.capture.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.detail
def test_a_run_without_capture_loads_no_capture_module() -> None:
    """`run` is started often: the shell it loads leaves the capture to a --capture run."""
    code = ("import sys, acp_bridge.commands.run, acp_bridge.shell.agent\n"
            "print(sorted(m for m in sys.modules if m.startswith('acp_bridge.capture')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
