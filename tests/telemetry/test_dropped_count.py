"""Spans the SDK's batch processor drops (its queue full behind a collector that does not
answer) are each counted: the SDK says "Queue full" once per 20 s (its duplicate filter), and
the count must not be what is said."""

from __future__ import annotations

import logging
import socket

import pytest

from acp_bridge.telemetry.spans import SpanRecord

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is in the test extra")

QUEUE, BATCH, SPANS = 8, 4, 200


def test_every_span_dropped_behind_a_silent_collector_is_counted(monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    from acp_bridge.telemetry.sdk import ExportSettings, OtlpSink

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", str(QUEUE))
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", str(BATCH))
    with socket.socket() as silent:  # takes the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        sink = OtlpSink(ExportSettings(endpoint=f"http://127.0.0.1:{silent.getsockname()[1]}", metrics=False))
        sink.spans([SpanRecord("s", 1, n + 1, None, 1.0, end=2.0) for n in range(SPANS)])
        # The worker holds at most one batch in its export; the queue holds QUEUE: the rest
        # were dropped, each of them.
        with sink.lock:
            dropped = sink.failed
        assert SPANS - QUEUE - BATCH <= dropped <= SPANS
        with caplog.at_level(logging.INFO, "acp_bridge.telemetry"):
            assert sink.shutdown(0.2) is False
    # What was still queued, or in the export that never ended, is not sent either.
    assert caplog.messages[-1] == f"telemetry: 0 spans exported, {SPANS} dropped"
