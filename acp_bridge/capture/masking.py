"""A capture's records masked again, as everything that serves a capture shows them.

Owns: withholding a record's line whole, and applying the capture's redaction again to a
record's `raw` and `out` (the export's page, the inspector, the MCP server read records
through `mask_record`, the encoder withholds through `withhold`).
Must never: change the record it is handed (a masked one is a copy), show a line it cannot
mask precisely (it is withheld whole), do IO, or read a clock.
"""

from __future__ import annotations

from acp_bridge.capture.reader import record_bytes, record_message
from acp_bridge.capture.redaction import REDACTED, WHOLE, Redactor
from acp_bridge.core.protocol import Json


def withhold(record: Json) -> Json:
    """Withhold a record's line whole: `raw`, and `out` if something else went out."""
    for key in ("raw", "out"):
        if record.get(key) is not None or f"{key}_b64" in record:
            record.pop(f"{key}_b64", None)
            record[key] = REDACTED
    record["redacted"] = WHOLE
    return record


def mask_record(redactor: Redactor, record: Json) -> Json:
    """The record with the capture's redaction applied again to raw and out, as everything
    that serves a capture shows it (the export's page, the inspector, the MCP server): a
    line that could hold a secret and cannot be masked precisely is withheld whole. The
    record itself when nothing is masked (it is never changed: a masked one is a copy)."""
    if record.get("redacted") == WHOLE:
        return record
    keys: tuple[str, ...] = ("raw", "out")
    if record.get("truncated"):  # raw is the head of a long line: never parsed, so never masked
        if redactor.may_hold_any_secret(record_bytes(record, "raw") or b""):
            return withhold(dict(record))
        keys = ("out",)  # whole, if a record has one (the bridge writes none: an edited capture)
    masked: Json | None = None
    for key in keys:
        data = record_bytes(record, key)
        if data is None or redactor.passes_unmasked(data):  # most lines: not parsed here
            continue
        line, hits = redactor.mask_line(data, record_message(record, key))
        if hits is None:
            return withhold(masked if masked is not None else dict(record))
        if hits:
            masked = masked if masked is not None else dict(record)
            masked.pop(f"{key}_b64", None)
            masked[key] = line.decode("utf-8", "replace")
            masked["redacted"] = sorted(set(masked.get("redacted") or ()) | set(hits))
    return record if masked is None else masked
