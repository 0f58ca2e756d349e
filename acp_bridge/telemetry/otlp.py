"""Where telemetry goes and over what: the OTLP exporters the SDK adapter (`sdk`) hands its
spans and metrics to.

Owns: what the configuration says of the export (`ExportSettings`), choosing the protocol
per signal (OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL, then `telemetry.protocol`:
http/protobuf or grpc), the endpoint (the configured one, unless an OTEL_* variable names
one: the exporters read the other OTEL_EXPORTER_OTLP_* variables themselves), building each
exporter (gRPC only when its extra is there), and noting a redirect the OTLP/HTTP exporter
would take for success. Must never: import the SDK at module level (each exporter is
imported when it is built), or replace the HTTP session a credential provider gives.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp_bridge.errors import ConfigError
from acp_bridge.extras import install

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

PROTOCOLS = ("http/protobuf", "grpc")
_CREDENTIAL_PROVIDERS = ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
                         "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER")


@dataclass(frozen=True)
class ExportSettings:
    """What the configuration says about where telemetry goes; OTEL_* variables win."""

    endpoint: str | None = None
    protocol: str | None = None
    metrics: bool = True


def protocol_of(settings: ExportSettings, signal: str) -> str:
    """OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else the
    configured one, else http/protobuf. Raises ConfigError for one the bridge cannot send."""
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name, "").strip()
        if value:
            where = name
            break
    else:
        value, where = settings.protocol or "http/protobuf", "telemetry.protocol"
    if value not in PROTOCOLS:
        raise ConfigError(f"{where}: {value!r} is not supported (use {' or '.join(PROTOCOLS)})")
    return value


def endpoint_of(settings: ExportSettings, signal: str, protocol: str) -> str | None:
    """The configured endpoint, unless an OTEL_* variable names one (then the exporter reads it)."""
    if settings.endpoint is None or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") \
            or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"):
        return None
    if protocol == "grpc":
        return settings.endpoint
    return settings.endpoint.rstrip("/") + ("/v1/traces" if signal == "TRACES" else "/v1/metrics")


def span_exporter(protocol: str, endpoint: str | None, redirected: Any = None) -> SpanExporter:
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
        except ImportError as exc:
            raise ConfigError(f"OTLP over gRPC needs the gRPC exporter ({exc}): " + install("otel")) from None
        exporter: SpanExporter = Grpc(endpoint=endpoint)
        return exporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    session = None
    if redirected is not None and not any(os.environ.get(name) for name in _CREDENTIAL_PROVIDERS):
        session = _noting_redirects(redirected)  # a credential provider's session is left as it is
    return OTLPSpanExporter(endpoint=endpoint, session=session)


def _noting_redirects(note: Any) -> Any:
    """A requests session that tells `note` the status of a redirect it is answered with."""
    requests: Any = importlib.import_module("requests")  # the OTLP/HTTP exporter's own dependency
    session = requests.Session()

    def hook(response: Any, *args: Any, **kwargs: Any) -> Any:
        if 300 <= response.status_code < 400:
            note(response.status_code)
        return response

    session.hooks["response"].append(hook)
    return session


def metric_exporter(protocol: str, endpoint: str | None) -> Any:
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as Grpc
        except ImportError as exc:
            raise ConfigError(f"OTLP over gRPC needs the gRPC exporter ({exc}): " + install("otel")) from None
        return Grpc(endpoint=endpoint)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(endpoint=endpoint)
