"""The demo waits for the new suggestion update as `core/shapes` reads it, and takes any
other message the agent sends (params that are no object included) as something else."""

from __future__ import annotations

from typing import Any

import pytest

from acp_bridge.commands.demo import is_suggestions

NEW = {"sessionUpdate": "prompt_suggestions_update", "suggestions": []}


@pytest.mark.parametrize(("msg", "expected"), [
    ({"method": "session/update", "params": {"sessionId": "s", "update": NEW}}, True),
    ({"method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": {"suggestions": []}}}}}, False),
    ({"method": "session/prompt", "params": {"update": NEW}}, False),
    ({"method": "session/update", "params": [NEW]}, False),
    ({"method": "session/update", "params": {"update": [NEW]}}, False),
    ({"id": 1, "result": {}}, False),
])
def test_is_suggestions(msg: dict[str, Any], expected: bool) -> None:
    assert is_suggestions(msg) is expected
