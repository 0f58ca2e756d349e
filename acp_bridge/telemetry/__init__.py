"""Telemetry: ACP traffic as OpenTelemetry traces and metrics (docs/telemetry.md).

Owns, in its modules: the pure span model built from timed messages (`spans`, `builder`),
what a live bridge feeds it (`live`), a capture fed to it (`offline`), and the adapter to
the OpenTelemetry SDK (`sdk`, with the OTLP exporters it builds: `otlp`), the only modules
that import the optional `otel` extra.
Must never: import the SDK at module level outside `sdk`, or let telemetry touch, delay or
fail the traffic.
"""

from __future__ import annotations

from acp_bridge.extras import missing

# What the `otel` extra brings and the adapter imports.
SDK_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")


def missing_sdk() -> str | None:
    """None when the OpenTelemetry SDK can be imported; else one line saying how to get it."""
    return missing(SDK_MODULES, "telemetry needs the OpenTelemetry SDK", "otel")


def require_sdk() -> None:
    """Raise ConfigError (exit 2) saying how to install the SDK when it is missing."""
    problem = missing_sdk()
    if problem is not None:
        from acp_bridge.errors import ConfigError

        raise ConfigError(problem)
