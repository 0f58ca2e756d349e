"""Fixtures of the shell tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture
def capture_log() -> Iterator[list[str]]:
    """Errors of the capture file's logger (attached directly: the CLI may turn propagation off)."""
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
