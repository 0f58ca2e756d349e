"""The official Python SDK's client side, as the interop tests run it: it keeps every session
update it is sent, and waits for those still on their way."""

from __future__ import annotations

import asyncio
from typing import Any


class RecordingClient:
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self._changed = asyncio.Condition()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        async with self._changed:
            self.updates.append((session_id, update))
            self._changed.notify_all()

    async def wait_for_updates(self, count: int) -> None:
        """The SDK dispatches each notification in a task of its own, so those that preceded
        a reply may still be on their way when the reply is returned: wait for them."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.updates) >= count)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def on_connect(self, conn: Any) -> None:
        pass
