"""Fixtures of the capture tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from acp_bridge.shell import capture_file as writer


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


@pytest.fixture
def capture_log() -> Iterator[list[str]]:
    """Errors of the capture logger (attached directly: the CLI may turn propagation off)."""
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger = logging.getLogger("acp_bridge.capture")
    handler = Keep(logging.ERROR)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
