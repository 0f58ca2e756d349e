"""The bridge's own errors. Keep this short: a hierarchy nobody catches does not pay off."""

from __future__ import annotations


class BridgeError(Exception):
    """A failure of the bridge itself (exit status 1)."""


class ConfigError(BridgeError):
    """A usage or configuration error, reported before the agent starts (exit status 2)."""


class CaptureError(BridgeError):
    """The capture could not be written and `capture.required` is set."""
