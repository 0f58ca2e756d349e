"""The span builder and the methods of the SDK 2.4.0 schemas (`core/methods.py`): a request that
names a session without joining it starts no session span, `session/archive` ends one as
`session/close` does, and a new method's request is a span named after it like any other.
Table-driven, pure: messages with their times in, spans out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.telemetry.helpers import T0, A, C, build, ok, req, shape

OPEN = [(0.0, A, req(1, "session/new", cwd="/w")), (0.5, C, ok(1, sessionId="s"))]

CASES: dict[str, tuple[list[tuple[float, str, Any]], list[tuple[str, str, float, float]]]] = {
    "session/set_title in an open session is a span under it": ([
        *OPEN,
        (1.0, A, req(2, "session/set_title", sessionId="s", title="CI")),
        (1.5, C, ok(2)),
    ], [("session/new", "session", 0.0, 0.5), ("session/set_title", "session", 1.0, 1.5), ("session", "", 0.0, 100.0)]),
    "session/status of a session not open here starts no session span": ([
        (1.0, A, req(2, "session/status", sessionId="elsewhere")),
        (1.5, C, ok(2, status="open")),
    ], [("session/status", "", 1.0, 1.5)]),
    "session/set_title, archive, unarchive and delete of a session not open here neither": ([
        (1.0, A, req(2, "session/set_title", sessionId="old", title="t")),
        (1.1, C, ok(2)),
        (2.0, A, req(3, "session/archive", sessionId="old")),
        (2.1, C, ok(3)),
        (3.0, A, req(4, "session/unarchive", sessionId="old")),
        (3.1, C, ok(4)),
        (4.0, A, req(5, "session/delete", sessionId="old")),
        (4.1, C, ok(5)),
    ], [("session/set_title", "", 1.0, 1.1), ("session/archive", "", 2.0, 2.1), ("session/unarchive", "", 3.0, 3.1),
        ("session/delete", "", 4.0, 4.1)]),
    "session/archive of the open session ends its span as session/close does": ([
        *OPEN,
        (2.0, A, req(2, "session/archive", sessionId="s")),
        (2.5, C, ok(2)),
    ], [("session/new", "session", 0.0, 0.5), ("session/archive", "session", 2.0, 2.5), ("session", "", 0.0, 2.5)]),
    "auth/status_update from the agent is a notification: no span": ([
        (1.0, C, {"jsonrpc": "2.0", "method": "auth/status_update", "params": {"state": "authenticated"}}),
    ], []),
}


@pytest.mark.parametrize("case", list(CASES))
def test_spans_of_the_methods_of_the_schemas(case: str) -> None:
    script, expected = CASES[case]
    spans = build(script)
    assert shape(spans) == expected
    for span in spans:  # a session span still open at the end is unfinished; a closed one is not
        if span.name == "session":
            assert ("acp.unfinished" in span.attributes) == (span.end == T0 + 100.0)
