"""The capture writer (trio): Forward batches in, JSONL records out. Placeholder for issue 5."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from acp_bridge.bridge import CaptureBatch
from acp_bridge.config import Config


@asynccontextmanager
async def open_capture(config: Config) -> AsyncIterator[trio.MemorySendChannel[CaptureBatch] | None]:
    """Yield a channel to send capture batches to, or None when capture is off."""
    yield None
