"""`acp-bridge export --html`: a capture as one self-contained page a person can read and share.

Owns: grouping records into turns (a `session/prompt` and what followed until its response),
the sequence view (client, bridge, agent), before/after of rewrites, and the page's inline
CSS and JS (a text filter; `#q=TEXT` in the URL presets it). Must never: reference anything
outside the page (no URLs, fonts or scripts from the network: a Content-Security-Policy
forbids it), or show a secret the capture's redaction settings mask (they are applied again).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.capture.files import local_clock
from acp_bridge.capture.reading import (
    display,
    record_bytes,
    record_message,
    summarize,
)
from acp_bridge.capture.redaction import REDACTED, WHOLE, Redactor
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
                return self._withhold(record)
            return record
        for key in ("raw", "out"):
            data = record_bytes(record, key)
            if data is None:
                continue
            masked, hits = self.redactor.mask_line(data, record_message(record, key))
            if hits is None:
                return self._withhold(record)
            if hits:
                record.pop(f"{key}_b64", None)
                record[key] = masked.decode("utf-8", "replace")
                record["redacted"] = sorted(set(record.get("redacted") or ()) | set(hits))
        return record

    @staticmethod
    def _withhold(record: Json) -> Json:
        for key in ("raw", "out"):
            if record.get(key) is not None or f"{key}_b64" in record:
                record.pop(f"{key}_b64", None)
                record[key] = REDACTED
        record["redacted"] = WHOLE
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
    return _PAGE.format(
        title=html.escape(title), meta=html.escape(meta), sections="\n".join(sections),
        total=len(messages), css=_CSS, js=_JS,
    )


_CSS = """
:root{--bg:#fbfbfd;--fg:#1d1f23;--dim:#6b7280;--line:#d6d9e0;--pass:#4b5563;--rw:#c2410c;
--drop:#b91c1c;--emit:#047857;--other:#7c3aed;--sess:#a16207}
*{box-sizing:border-box}body{margin:0;font:13px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;
background:var(--bg);color:var(--fg)}
header{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid var(--line);padding:10px 16px}
h1{font-size:17px;margin:0 0 2px}.meta{color:var(--dim);margin:0 0 8px}
#q{width:420px;max-width:60vw;padding:5px 8px;border:1px solid var(--line);border-radius:6px;font:inherit}
#count{margin-left:10px;color:var(--dim)}
.heads{display:grid;grid-template-columns:96px 300px 1fr;padding:6px 16px 0;color:var(--dim);
font-weight:600;position:sticky;top:86px;background:var(--bg);z-index:1}
.heads .who{position:relative;height:18px}.who span{position:absolute;transform:translateX(-50%)}
main{padding:0 16px 40px}
h2{font-size:13px;margin:14px 0 4px;padding:5px 8px;background:#eef1f6;border-radius:5px}
.turn h2{background:#e6effc}
.msg{border-bottom:1px solid #eceef2}
.msg>summary{display:grid;grid-template-columns:96px 300px 1fr;align-items:center;cursor:pointer;
list-style:none;padding:1px 0}
.msg>summary::-webkit-details-marker{display:none}
.msg>summary:hover{background:#f1f4f9}
.t{font-family:ui-monospace,Menlo,monospace;color:var(--dim);font-size:12px}
.lane{position:relative;height:20px;background:linear-gradient(90deg,transparent calc(12% - 1px),var(--line) calc(12% - 1px),
var(--line) 12%,transparent 12%,transparent calc(50% - 1px),#9aa3b2 calc(50% - 1px),#9aa3b2 50%,transparent 50%,
transparent calc(88% - 1px),var(--line) calc(88% - 1px),var(--line) 88%,transparent 88%)}
.seg{position:absolute;top:9px;height:2px;background:var(--pass)}
.seg.rewrite{background:var(--rw);height:3px;top:8px}.seg.emit{background:var(--emit);height:3px;top:8px}
.seg.other{background:repeating-linear-gradient(90deg,var(--other) 0 4px,transparent 4px 7px)}
.seg.error{background:var(--drop)}.seg.in{background:var(--pass)}
.seg.head.r::after,.seg.head.l::after{content:"";position:absolute;top:-4px;border:5px solid transparent}
.seg.head.r::after{right:-2px;border-left:7px solid currentColor;border-right:0}
.seg.head.l::after{left:-2px;border-right:7px solid currentColor;border-left:0}
.seg.pass,.seg.in{color:var(--pass)}.seg.rewrite{color:var(--rw)}.seg.emit{color:var(--emit)}
.seg.other{color:var(--other)}.seg.error{color:var(--drop)}
.seg.cross.r::after,.seg.cross.l::after{content:"✕";position:absolute;top:-9px;color:var(--drop);font-weight:700}
.seg.cross.r::after{right:-6px}.seg.cross.l::after{left:-6px}
.what{padding-left:10px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.what b{font-weight:600}.sess{color:var(--sess)}.size{color:var(--dim)}
.mark{font-size:11px;padding:0 5px;border-radius:8px;margin-left:4px;color:#fff;background:var(--pass)}
.mark.rewrite{background:var(--rw)}.mark.drop,.mark.error{background:var(--drop)}.mark.emit{background:var(--emit)}
.ba{display:grid;grid-template-columns:1fr 1fr;gap:10px;padding:4px 0 10px 96px}
.one{padding:4px 0 10px 96px}
h4{margin:2px 0;font-size:12px;color:var(--dim)}
pre{margin:0;padding:6px 8px;background:#fff;border:1px solid var(--line);border-radius:5px;max-height:420px;
overflow:auto;font:12px/1.4 ui-monospace,Menlo,monospace;white-space:pre-wrap;word-break:break-all}
pre.after{border-color:var(--rw)}.err{color:var(--drop)}
[hidden]{display:none!important}
"""

_JS = """
(function(){
  var box=document.getElementById('q'), count=document.getElementById('count');
  var items=[].slice.call(document.querySelectorAll('details.msg'));
  var texts=items.map(function(el){return el.textContent.toLowerCase();});
  var groups=[].slice.call(document.querySelectorAll('section.group'));
  function apply(){
    var terms=box.value.toLowerCase().split(/\\s+/).filter(Boolean), shown=0;
    items.forEach(function(el,i){
      var ok=terms.every(function(t){return texts[i].indexOf(t)>=0;});
      el.hidden=!ok; if(ok) shown++;
    });
    groups.forEach(function(g){g.hidden=!g.querySelector('details.msg:not([hidden])');});
    count.textContent=shown+' of '+items.length+' messages';
    document.body.setAttribute('data-visible',String(shown));
  }
  box.addEventListener('input',apply);
  var m=/[#&]q=([^&]*)/.exec(location.hash);
  if(m){box.value=decodeURIComponent(m[1].replace(/\\+/g,' '));}
  apply();
  document.body.setAttribute('data-ready','1');
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>acp-bridge: {title}</title>
<style>{css}</style></head>
<body data-total="{total}">
<header><h1>acp-bridge capture: {title}</h1><p class="meta">{meta}</p>
<input id="q" type="search" placeholder="Filter: method, session, any text in a message" autocomplete="off">
<span id="count">{total} messages</span></header>
<div class="heads"><span>time</span><span class="who"><span style="left:12%">client</span><span style="left:50%">bridge</span><span style="left:88%">agent</span></span>
<span>message</span></div>
<main>
{sections}
</main>
<script>{js}</script>
</body></html>
"""
