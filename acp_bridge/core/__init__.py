"""The pure core of acp-bridge: no trio, no click, no files, no clocks.

Import surface for the shell and the tests. Names are loaded on first use (PEP 562), so
that importing one core module (a rule's settings, for the configuration) does not load
the relay and everything it needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_bridge.core.forward import Forward as Forward
    from acp_bridge.core.forward import Verdict as Verdict
    from acp_bridge.core.lines import MIB as MIB
    from acp_bridge.core.lines import LineSplitter as LineSplitter
    from acp_bridge.core.lines import Opaque as Opaque
    from acp_bridge.core.messages import Direction as Direction
    from acp_bridge.core.messages import Frame as Frame
    from acp_bridge.core.messages import Kind as Kind
    from acp_bridge.core.messages import classify as classify
    from acp_bridge.core.messages import encode as encode
    from acp_bridge.core.relay import Relay as Relay
    from acp_bridge.core.rewrites.base import DROP as DROP
    from acp_bridge.core.rewrites.base import PASS as PASS
    from acp_bridge.core.rewrites.base import Emit as Emit
    from acp_bridge.core.rewrites.base import Outcome as Outcome
    from acp_bridge.core.rewrites.base import Replace as Replace
    from acp_bridge.core.rewrites.base import Rewrite as Rewrite
    from acp_bridge.core.rewrites.base import Rule as Rule
    from acp_bridge.core.session import Connection as Connection
    from acp_bridge.core.session import Pending as Pending
    from acp_bridge.core.statistics import RelayStatistics as RelayStatistics

_WHERE = {
    "acp_bridge.core.messages": ("Direction", "Frame", "Kind", "classify", "encode"),
    "acp_bridge.core.lines": ("MIB", "LineSplitter", "Opaque"),
    "acp_bridge.core.forward": ("Forward", "Verdict"),
    "acp_bridge.core.relay": ("Relay",),
    "acp_bridge.core.rewrites.base": ("DROP", "PASS", "Emit", "Outcome", "Replace", "Rewrite", "Rule"),
    "acp_bridge.core.session": ("Pending", "Connection"),
    "acp_bridge.core.statistics": ("RelayStatistics",),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [  # what _WHERE lists, loaded on first use (spelt out for tools that read it)
    "DROP", "MIB", "PASS", "Connection", "Direction", "Emit", "Forward", "Frame", "Kind", "LineSplitter",
    "Opaque", "Outcome", "Pending", "Relay", "RelayStatistics", "Replace", "Rewrite", "Rule",
    "Verdict", "classify", "encode",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'acp_bridge.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
