"""Fixtures shared by the replay tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replay.drive import demo_capture


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The capture `acp-bridge demo` records, made once for the Python and TypeScript SDK tests."""
    return demo_capture(tmp_path_factory.mktemp("demo"))
