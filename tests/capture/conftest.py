"""Fixtures of the capture tests."""

from __future__ import annotations

import pytest

from acp_bridge.capture import writer


@pytest.fixture
def inline_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Captures written by the bridge itself, as a required one is (no writer process):
    for what only that path does (on disk when `record` returns, `os.write` failing)."""
    monkeypatch.setattr(writer, "OFFLOAD", False)


@pytest.fixture(params=["writer process", "inline"])
def either_writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once with a writer process and once without one."""
    monkeypatch.setattr(writer, "OFFLOAD", request.param == "writer process")
    return str(request.param)
