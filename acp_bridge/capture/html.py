"""`acp-bridge export --html`: a capture as one self-contained page a person can read and share.

Owns: grouping records into turns (a `session/prompt` and what followed until its response),
the sequence view (client, bridge, agent), before/after of rewrites, and the page itself:
its skeleton, CSS and JS (a text filter; `#q=TEXT` in the URL presets it) are package data
in assets/, inlined into the one file. Must never: reference anything outside the page (no
URLs, fonts or scripts from the network: a Content-Security-Policy forbids it), or show a
secret the capture's redaction settings mask (they are applied again).
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import orjson

from acp_bridge.capture.files import local_clock
from acp_bridge.capture.reading import (
    display,
    record_bytes,
    record_message,
    summarize,
)
from acp_bridge.capture.records import withhold
from acp_bridge.capture.redaction import WHOLE, Redactor
from acp_bridge.core import protocol as p
from acp_bridge.core.pointer import parse_pointer
from acp_bridge.core.protocol import Json

BODY_LIMIT = 20_000  # characters of one message shown; the rest is cut with a note

# Where each party's lifeline sits across the sequence column, in percent.
_X = {"client": 12.0, "bridge": 50.0, "agent": 88.0}


@dataclass
class Group:
    title: str
    kind: str  # "turn" or "outside"
    records: list[Json] = field(default_factory=list)
    session: Any = None
    request: Json | None = None
    response: Json | None = None


def _prompt_text(record: Json) -> str:
    msg = record_message(record, "raw")
    for block in p.get_path(msg, "params", "prompt") or ():
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text = " ".join(block["text"].split())
            return text if len(text) <= 80 else text[:79] + "…"
    return ""


def _session_key(session: Any) -> bytes:
    try:
        return orjson.dumps(session)
    except TypeError:  # not a session id anyone wrote (nested too deep): a group of its own
        return repr(session).encode()


def group_turns(records: Iterable[Json]) -> list[Group]:
    """Messages in groups, in order of each group's first message.

    A turn is a `session/prompt` request and every later message of its session until the
    prompt's response. Messages of no session join the only open turn, if there is exactly
    one; everything else falls between turns.
    """
    groups: list[Group] = []
    open_turns: dict[Any, Group] = {}
    outside: Group | None = None
    turns = 0
    for record in records:
        session = record.get("session")
        key = _session_key(session)
        if record.get("kind") == "request" and record.get("method") == p.SESSION_PROMPT \
                and record.get("direction") == "to-agent":
            turns += 1
            turn = Group(f"Turn {turns}", "turn", [record], session, request=record)
            open_turns[key] = turn
            groups.append(turn)
            outside = None
            continue
        target = open_turns.get(key) if session is not None else None
        if target is None and session is None and len(open_turns) == 1:
            target = next(iter(open_turns.values()))
        if target is None:
            if outside is None or groups[-1] is not outside:
                outside = Group("Setup" if not groups else "Between turns", "outside")
                groups.append(outside)
            outside.records.append(record)
            continue
        target.records.append(record)
        request = target.request or {}
        if record.get("kind") == "response" and record.get("id") == request.get("id") \
                and record.get("direction") == "to-client":
            target.response = record
            open_turns.pop(key, None)
    return groups


def _turn_heading(group: Group) -> str:
    if group.kind != "turn" or group.request is None:
        return f"{group.title} · {len(group.records)} messages"
    parts = [group.title]
    if group.session is not None:
        parts.append(f"session {group.session}")
    text = _prompt_text(group.request)
    if text:
        parts.append(f"“{text}”")
    if group.response is not None:
        seconds = float(group.response.get("mono", 0)) - float(group.request.get("mono", 0))
        parts.append(f"{seconds:.2f} s")
        reason = p.get_path(record_message(group.response, "raw") or record_message(group.response, "out"),
                            "result", "stopReason")
        if isinstance(reason, str):
            parts.append(reason)
    else:
        parts.append("no response")
    parts.append(f"{len(group.records)} messages")
    return " · ".join(parts)


def _segments(record: Json) -> list[tuple[str, float, float, str]]:
    """(class, from x, to x, end mark) of the arrows in the sequence column."""
    to_agent = record.get("direction") == "to-agent"
    src, dst = ("client", "agent") if to_agent else ("agent", "client")
    verdict = record.get("verdict")
    if verdict == "emit":
        return [("emit", _X["bridge"], _X[dst], "head")]
    if verdict == "drop":
        return [("in", _X[src], _X["bridge"], "cross")]
    if verdict == "rewrite":
        return [("in", _X[src], _X["bridge"], ""), ("rewrite", _X["bridge"], _X[dst], "head")]
    style = "other" if record.get("kind") == "other" else ("error" if verdict == "error" else "pass")
    return [(style, _X[src], _X[dst], "head")]


def _lane(record: Json) -> str:
    parts = ['<span class="lane">']
    for style, start, end, mark in _segments(record):
        left, width = min(start, end), abs(end - start)
        direction = "r" if end > start else "l"
        parts.append(f'<i class="seg {style} {direction} {mark}" style="left:{left:.1f}%;width:{width:.1f}%"></i>')
    parts.append("</span>")
    return "".join(parts)


def _cut(text: str) -> str:
    if len(text) <= BODY_LIMIT:
        return text
    return text[:BODY_LIMIT] + f"\n… ({len(text) - BODY_LIMIT} more characters not shown)"


class _Renderer:
    def __init__(self, redactor: Redactor, clock: Callable[[float], str]) -> None:
        self.redactor = redactor
        self.clock = clock

    def redact(self, record: Json) -> Json:
        """The record with the capture's redaction applied again to raw and out (a line
        that could hold a secret and cannot be masked precisely is withheld whole)."""
        record = dict(record)
        if record.get("redacted") == WHOLE:
            return record
        if record.get("truncated"):  # the head of a long line: never parsed, so never masked
            if self.redactor.could_hold_secret(record_bytes(record, "raw") or b""):
                return withhold(record)
            return record
        for key in ("raw", "out"):
            data = record_bytes(record, key)
            if data is None:
                continue
            masked, hits = self.redactor.mask_line(data, record_message(record, key))
            if hits is None:
                return withhold(record)
            if hits:
                record.pop(f"{key}_b64", None)
                record[key] = masked.decode("utf-8", "replace")
                record["redacted"] = sorted(set(record.get("redacted") or ()) | set(hits))
        return record

    def body(self, record: Json, key: str) -> str:
        if record_message(record, key) is not None or record.get("redacted") == WHOLE:
            return _cut(display(record, key))
        data = record_bytes(record, key)
        if data is None:
            return "(nothing)"
        text = data.decode("utf-8", "backslashreplace")
        if record.get("truncated") and key == "raw":
            text += f"\n… (the first {len(data)} of {record.get('size')} bytes)"
        return _cut(text)

    def message(self, record: Json) -> str:
        summary = summarize(record, self.clock)
        verdict = summary.verdict
        label = html.escape(summary.label)
        session = f' <span class="sess">{html.escape(summary.session)}</span>' if summary.session else ""
        marks = "".join(f' <span class="mark {html.escape(verdict)}">{html.escape(m)}</span>'
                        for m in summary.marks)
        changed = "out" in record or "out_b64" in record
        if verdict == "emit":
            body = (f'<div class="one"><h4>sent by the bridge</h4><pre>{html.escape(self.body(record, "out"))}'
                    "</pre></div>")
        elif changed:
            to = "client" if record.get("direction") == "to-client" else "agent"
            frm = "agent" if to == "client" else "client"
            after = ("(dropped: not forwarded)" if record.get("out") is None and "out_b64" not in record
                     else self.body(record, "out"))
            body = (f'<div class="ba"><div><h4>before (from the {frm})</h4><pre>'
                    f'{html.escape(self.body(record, "raw"))}</pre></div>'
                    f'<div><h4>after (to the {to})</h4><pre class="after">{html.escape(after)}</pre></div></div>')
        else:
            body = f'<div class="one"><pre>{html.escape(self.body(record, "raw"))}</pre></div>'
        if record.get("error"):
            body += f'<p class="err">{html.escape(str(record["error"]))}</p>'
        opened = " open" if verdict in ("rewrite", "drop", "error") and changed else ""
        return (
            f'<details class="msg {html.escape(verdict)} {html.escape(str(record.get("direction")))}"'
            f' id="m{int(record.get("seq", 0))}"{opened}><summary>'
            f'<span class="t">{html.escape(summary.clock)}</span>{_lane(record)}'
            f'<span class="what"><b>{label}</b>{session} <span class="size">{html.escape(summary.size)}</span>'
            f"{marks}</span></summary>{body}</details>"
        )


def _pointers(redact: Any) -> tuple[str, ...]:
    """The header's `redact` pointers, but any that is not one (a capture edited by hand):
    each of the others still masks."""
    found: list[str] = []
    for pointer in redact if isinstance(redact, list) else ():
        if isinstance(pointer, str):
            try:
                parse_pointer(pointer)
            except ValueError:
                continue
            found.append(pointer)
    return tuple(found)


def render(records: Iterable[Json], *, title: str = "capture",
           clock: Callable[[float], str] = local_clock) -> str:
    """The whole page for a capture's records (header, messages, trailer; others ignored)."""
    header: Json = {}
    messages: list[Json] = []
    for record in records:
        if record.get("type") == "header":
            header = record
        elif record.get("type") == "message":
            messages.append(record)
    renderer = _Renderer(Redactor(_pointers(header.get("redact"))), clock)
    messages = [renderer.redact(r) for r in messages]
    groups = group_turns(messages)
    sections = []
    for group in groups:
        items = "".join(renderer.message(r) for r in group.records)
        sections.append(f'<section class="group {group.kind}"><h2>{html.escape(_turn_heading(group))}</h2>'
                        f"{items}</section>")
    turns = sum(1 for g in groups if g.kind == "turn")
    meta = (f"{len(messages)} messages · {turns} turns · bridge {header.get('bridge', '?')} · "
            f"started {header.get('started', '?')}")
    return asset("page.html").format(
        title=html.escape(title), meta=html.escape(meta), sections="\n".join(sections),
        total=len(messages), css=asset("page.css"), js=asset("page.js"),
    )


@functools.cache
def asset(name: str) -> str:
    """A file of the page (assets/: the skeleton, its CSS and its JS), package data that a
    wheel carries (pyproject's package-data); read once."""
    return (resources.files("acp_bridge.capture") / "assets" / name).read_text(encoding="utf-8")
