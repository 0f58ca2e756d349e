"""Telemetry: ACP traffic as OpenTelemetry traces and metrics (docs/telemetry.md).

Owns, in its modules: the pure span model built from timed messages (`spans`, `builder`),
what a live bridge feeds it (`live`), a capture fed to it (`offline`), and the adapter to
the OpenTelemetry SDK (`sdk`), the only module that imports the optional `otel` extra.
Must never: import the SDK at module level outside `sdk`, or let telemetry touch, delay or
fail the traffic.
"""

from __future__ import annotations

import importlib.util

INSTALL_HINT = "pip install 'acp-bridge-proxy[otel]'"
# What the `otel` extra brings and the adapter imports.
SDK_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")


def missing_sdk() -> str | None:
    """None when the OpenTelemetry SDK can be imported; else one line saying how to get it."""
    for name in SDK_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package missing, or a broken install
            found = False
        if not found:
            return (f"telemetry needs the OpenTelemetry SDK, which is not installed ({name} not found): "
                    f"{INSTALL_HINT}")
    return None


def require_sdk() -> None:
    """Raise ConfigError (exit 2) saying how to install the SDK when it is missing."""
    problem = missing_sdk()
    if problem is not None:
        from acp_bridge.errors import ConfigError

        raise ConfigError(problem)
