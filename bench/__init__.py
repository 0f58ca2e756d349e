"""The acp-bridge benchmark: `python -m bench` (see docs/performance.md)."""
