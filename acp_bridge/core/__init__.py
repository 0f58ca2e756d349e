"""The pure core of acp-bridge: no trio, no click, no files, no clocks.

Import surface for the shell and the tests.
"""

from acp_bridge.core.frames import Direction, Frame, Kind, classify, encode
from acp_bridge.core.framing import MIB, LineSplitter, Opaque
from acp_bridge.core.relay import Forward, Relay, RelayStatistics, Verdict
from acp_bridge.core.rewrites.base import DROP, PASS, Emit, Outcome, Replace, Rewrite
from acp_bridge.core.session import Pending, Session

__all__ = [
    "DROP", "MIB", "PASS", "Direction", "Emit", "Forward", "Frame", "Kind", "LineSplitter",
    "Opaque", "Outcome", "Pending", "Relay", "RelayStatistics", "Replace", "Rewrite",
    "Session", "Verdict", "classify", "encode",
]
