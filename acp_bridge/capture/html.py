"""`acp-bridge export --html`: a capture as one self-contained page a person can read and share.

Owns: writing the page as the capture is read, in bounded memory: the skeleton, CSS and JS
(package data in assets/, inlined), then the rows (`html_rows`) in JSON batches, then a
summary. The page renders only the rows on screen (page.js), so it stays responsive with
hundreds of thousands of messages. Must never: reference anything outside the page (no URLs,
fonts or scripts from the network: a Content-Security-Policy forbids it), or show a secret
the capture's redaction settings mask (they are applied again, in `html_rows`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import IO, Any

import orjson

from acp_bridge.capture.files import local_clock
from acp_bridge.capture.html_rows import RowBuilder
from acp_bridge.capture.redaction import Redactor, valid_pointers
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.core.protocol import Json

BATCH = 2000  # rows per JSON block of the page


@functools.cache
def export_script() -> tuple[str, str]:
    """The exported page's one script element, and its policy: the page holds everything it
    shows, so nothing may be loaded, and the only script that may run is page.js, named by
    its hash. Should a message's text ever slip past the escaping into markup, a script or
    handler it brings does not run (`'unsafe-inline'` would let it)."""
    code = "\n" + asset("page.js")
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode()
    policy = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; base-uri 'none'"
    return f"<script>{code}</script>", policy


@dataclass(frozen=True)
class Written:
    """What `write_page` put on the page."""

    records: int
    messages: int
    rows: int
    turns: int


def _block(rows: list[Any], cls: str = "rows") -> bytes:
    """Rows as a JSON block inside the page. Every "<" is written as its JSON escape, so no
    text in a message can end the script element or open a comment inside it."""
    try:
        data = orjson.dumps(rows)
    except TypeError:  # a value orjson will not write (an integer past 64 bits in a record
        data = orjson.dumps(_scrub(rows))  # edited by hand, a lone surrogate): write it as text
    return (f'<script type="application/json" class="{cls}">'.encode()
            + data.replace(b"<", b"\\u003c") + b"</script>\n")


def _scrub(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    return value


MAX_FINDINGS = 100_000  # marked on the page; `acp-bridge check` lists them all


def write_page(records: Iterable[Json], out: IO[bytes], *, title: str = "capture",
               clock: Callable[[float], str] = local_clock,
               progress: Callable[[int], None] | None = None,
               findings: Iterable[tuple[int, str, str, str]] = (), report: Json | None = None) -> Written:
    """Write the page for a capture's records to `out`, one batch of rows at a time (the
    header record comes first in a capture; its redaction pointers apply to what follows).
    `findings`: (seq, level, code, text) of the protocol findings to mark on their messages;
    `report`: the capture's `check --json` entry, shown with the `stats` the page counts."""
    stats = CaptureStats()
    head, tail = asset("page.html").split("{rows}")
    script, policy = export_script()
    out.write(head.format(title=html.escape(title), csp=policy,
                          style=f"<style>\n{asset('page.css')}</style>").encode())
    header: Json = {}
    builder: RowBuilder | None = None
    batch: list[Json] = []
    seen = 0
    for record in records:
        seen += 1
        stats.add(record)
        kind = record.get("type")
        if kind == "header" and builder is None:
            header = record
            continue
        if kind != "message":
            continue
        if builder is None:
            builder = RowBuilder(Redactor(valid_pointers(header.get("redact"))), clock)
        batch.extend(builder.add(record))
        if len(batch) >= BATCH:
            out.write(_block(batch))
            batch.clear()
            if progress is not None:
                progress(builder.messages)
    if builder is None:
        builder = RowBuilder(Redactor(()), clock)
    batch.extend(builder.finish())
    if batch:
        out.write(_block(batch))
    summary = {"title": title, "messages": builder.messages, "turns": builder.turns, "rows": builder.count,
               "bridge": str(header.get("bridge", "?")), "started": str(header.get("started", "?"))}
    marks = [list(finding) for finding, _ in zip(findings, range(MAX_FINDINGS), strict=False)]
    summary["findings"] = len(marks)
    out.write(_block(marks, "findings"))
    out.write(_block([summary], "summary"))
    out.write(_block([stats.as_json(), report], "reports"))
    out.write(tail.format(script=script).encode())
    return Written(seen, builder.messages, builder.count, builder.turns)


def live_page(csp: str) -> str:
    """The same page for the inspector (`acp-bridge ui`): no rows in it, its CSS and scripts
    served beside it (/assets/...), live.js fetching the rows from the inspector's API."""
    head, tail = asset("page.html").split("{rows}")
    return (head.format(title="live", csp=html.escape(csp),
                        style='<link rel="stylesheet" href="/assets/page.css">')
            + '<script type="application/json" class="live">{}</script>\n'
            + tail.format(script='<script src="/assets/page.js"></script>\n<script src="/assets/live.js"></script>'))


def render(records: Iterable[Json], *, title: str = "capture",
           clock: Callable[[float], str] = local_clock) -> str:
    """The whole page as text (for tests and small captures; `export` streams to a file)."""
    buffer = io.BytesIO()
    write_page(records, buffer, title=title, clock=clock)
    return buffer.getvalue().decode("utf-8")


@functools.cache
def asset(name: str) -> str:
    """A file of the page (assets/: the skeleton, its CSS and its JS), package data that a
    wheel carries (pyproject's package-data); read once."""
    return (resources.files("acp_bridge.capture") / "assets" / name).read_text(encoding="utf-8")
