"""Capture: everything about the record of a session, in one place (docs/capture-format.md).

Pure (no IO, no clock or time zone, no trio or click; tests/core/test_layering.py checks), but
for `files` (paths, following a file, local time) and `html` (writing the exported page). What
each module owns: docs/how-it-works.md, "Where the code lives".

Import surface: names load on first use (PEP 562), so that `run` pays only for the
modules it uses, and the readers never load the writer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_bridge.capture.reader import FORMAT_VERSION as FORMAT_VERSION
    from acp_bridge.capture.reader import CaptureReader as CaptureReader
    from acp_bridge.capture.reader import UnreadableCapture as UnreadableCapture
    from acp_bridge.capture.reader import load_record as load_record
    from acp_bridge.capture.reader import record_bytes as record_bytes
    from acp_bridge.capture.records import CaptureEncoder as CaptureEncoder
    from acp_bridge.capture.records import dumps as dumps
    from acp_bridge.capture.records import header_record as header_record
    from acp_bridge.capture.redaction import PROMPT_REDACTED as PROMPT_REDACTED
    from acp_bridge.capture.redaction import REDACTED as REDACTED
    from acp_bridge.capture.redaction import WHOLE as WHOLE
    from acp_bridge.capture.redaction import Redactor as Redactor
    from acp_bridge.capture.stats import CaptureStats as CaptureStats
    from acp_bridge.capture.summary import RecordFilter as RecordFilter
    from acp_bridge.capture.summary import summarize as summarize
    from acp_bridge.capture.text_redaction import mask_argv as mask_argv

_WHERE = {
    "acp_bridge.capture.reader": ("FORMAT_VERSION", "CaptureReader", "UnreadableCapture", "load_record",
                                  "record_bytes"),
    "acp_bridge.capture.records": ("CaptureEncoder", "dumps", "header_record"),
    "acp_bridge.capture.redaction": ("PROMPT_REDACTED", "REDACTED", "WHOLE", "Redactor"),
    "acp_bridge.capture.stats": ("CaptureStats",),
    "acp_bridge.capture.summary": ("RecordFilter", "summarize"),
    "acp_bridge.capture.text_redaction": ("mask_argv",),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [
    "FORMAT_VERSION",
    "PROMPT_REDACTED",
    "REDACTED",
    "WHOLE",
    "CaptureEncoder",
    "CaptureReader",
    "CaptureStats",
    "RecordFilter",
    "Redactor",
    "UnreadableCapture",
    "dumps",
    "header_record",
    "load_record",
    "mask_argv",
    "record_bytes",
    "summarize",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'acp_bridge.capture' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
