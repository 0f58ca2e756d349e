"""acp-bridge: a transparent, rule-driven proxy for the Agent Client Protocol."""

__version__ = "0.1.0"
