"""`acp-bridge mcp`: the captures in given folders, read by an agent through MCP tools
(docs/mcp.md).

Owns, in its modules: the tools themselves over a `capture.Catalog`, with no SDK in sight
(`tools`, bounded by `pages`), and their MCP server on stdio (`server`, with `stdio` in front
of the SDK's transport), the only modules that import the optional `mcp` extra (the official
MCP Python SDK). Must never: import the SDK outside `server` and `stdio`, write anything, or
read a file outside the folders it was given.
"""

from __future__ import annotations

from acp_bridge.extras import missing

SDK_MODULES = ("mcp.server", "anyio")  # what `server` imports of the extra


def missing_sdk() -> str | None:
    """None when the MCP SDK can be imported; else one line saying how to get it."""
    return missing(SDK_MODULES, "mcp needs the MCP Python SDK", "mcp")
