"""A real OTLP/HTTP receiver for the telemetry tests: POST /v1/traces and /v1/metrics on
127.0.0.1, decoded with opentelemetry-proto, kept as plain dicts a test can compare; and the
environment that points a bridge at it (`otel_env`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def value_of(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(value_of(v) for v in value.array_value.values)
    return getattr(value, which) if which else None


def attrs_of(pairs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass
class Collector:
    spans: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, list[Any]] = field(default_factory=dict)
    endpoint: str = ""
    answered: list[int] = field(default_factory=list)  # statuses of the answers that stored nothing
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            for resource_spans in request.resource_spans:
                self.resources.append(attrs_of(resource_spans.resource.attributes))
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        self.spans.append({
                            "name": span.name, "trace": span.trace_id.hex(), "id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(), "kind": span.kind,
                            "start": span.start_time_unix_nano, "end": span.end_time_unix_nano,
                            "attributes": attrs_of(span.attributes),
                            "events": [(e.name, attrs_of(e.attributes)) for e in span.events],
                            "status": span.status.code,
                        })

    def take_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        with self.lock:
            for resource_metrics in request.resource_metrics:
                for scope in resource_metrics.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        points = getattr(metric, kind).data_points
                        self.metrics.setdefault(metric.name, []).extend(
                            (attrs_of(pt.attributes), pt.count if kind == "histogram" else pt.as_int)
                            for pt in points)

    def wait_spans(self, count: int, timeout: float = 10) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.02)
        return list(self.spans)


@contextmanager
def running_collector(answer: int = 200) -> Iterator[Collector]:
    """A receiver on 127.0.0.1; `answer` other than 200: one that stores nothing and answers
    every export with that status (a 3xx with a Location: the same path)."""
    collector = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if answer != 200:
                with collector.lock:
                    collector.answered.append(answer)
                self.send_response(answer)
                if 300 <= answer < 400:
                    self.send_header("Location", f"{collector.endpoint}{self.path}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path == "/v1/traces":
                collector.take_traces(body)
            elif self.path == "/v1/metrics":
                collector.take_metrics(body)
            else:
                self.send_response(404)
                self.end_headers()
                return
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    collector.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def otel_env(collector: Collector) -> dict[str, str]:
    """This environment with no OTEL_* variable but those that send a bridge's spans to `collector`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_SERVICE_NAME="bridge-under-test",
               OTEL_BSP_SCHEDULE_DELAY="100")
    return env
