"""The rows of the exported page: capture records in, compact row objects out, one at a time.

Owns: grouping messages into turns as they stream by, folding runs of message chunks into
one row, and the links the page draws (a response to its request, a message the bridge
wrote to the one it came from); what a row shows of a message, its preview and body, is
`previews.py`'s. Everything here holds bounded state, so a capture of any length is turned
into rows in bounded memory.
Must never: keep every record (the page writer streams the rows out in batches), or show
a secret the capture's redaction masks (records are masked again before they become rows).

A row is a small dict with short keys (the page carries one per message, see page.js):

    h  group header: "turn" or "outside";   ti title, se session, q the turn's request row
    g  the row's group header (an index)    s/s2 first/last seq   m/m2 first/last mono
    d  "a" to the agent, "c" to the client  k kind  v verdict  l label  ss session (short)
    z  size  mk marks  p one-line preview   b the line as it came  o what went out (None:
    dropped; absent: unchanged)   e rule error   n messages folded into the row
    q  for a response, the row of its request   f for the bridge's own message, the row it
    came from   u update kind   tc/st tool call id and status   sr stop reason
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from acp_bridge.capture.masking import mask_record
from acp_bridge.capture.pairs import Pairs
from acp_bridge.capture.previews import BODY_LIMIT, CHUNK_KINDS, SEP, body_text, cut, one_line, preview, update_of
from acp_bridge.capture.reader import record_bytes, record_message
from acp_bridge.capture.redaction import WHOLE, Redactor
from acp_bridge.capture.summary import WITHHELD_NOTE, short_session, summarize
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.messages import id_key
from acp_bridge.core.protocol import Json

MAX_OPEN = 100_000  # turns, requests in flight: beyond this the oldest is forgotten (no link)


@dataclass
class _Pending:
    """A run of chunks being folded into one row."""

    row: Json
    key: tuple[Any, ...]
    texts: list[str] = field(default_factory=list)
    length: int = 0


class RowBuilder:
    """Records in (`add`), rows out, in page order; `finish` flushes the last fold.

    Rows are numbered as they are handed out: a row's index is its place in the page.
    """

    def __init__(self, redactor: Redactor, clock: Callable[[float], str]) -> None:
        self.redactor = redactor
        self.clock = clock
        self.count = 0  # rows handed out
        self.messages = 0
        self.turns = 0
        self._open_turns: collections.OrderedDict[Hashable, int] = collections.OrderedDict()
        self._outside: int | None = None  # the "between turns" group being filled
        self._last_group: int | None = None
        self._requests: Pairs[int] = Pairs(MAX_OPEN)  # a request's row, until answered
        # a turn's request row -> its header row and session key
        self._turn_requests: collections.OrderedDict[int, tuple[int, Hashable]] = collections.OrderedDict()
        self._fold: _Pending | None = None
        self._input: tuple[float, int] | None = None  # (mono, row) of the last message that came in

    # -- records -------------------------------------------------------------------------

    def add(self, record: Json) -> Iterator[Json]:
        """The rows this record completes (none while a run of chunks is being folded)."""
        if record.get("type") != "message":
            return
        self.messages += 1
        record = self.redact(record)
        sent = "out" in record or "out_b64" in record
        msg = record_message(record, "out" if sent and record.get("out") is not None else "raw") \
            if record.get("redacted") != WHOLE else None
        update = update_of(msg) if record.get("method") == p.SESSION_UPDATE else {}
        key = self._fold_key(record, update)
        if self._fold is not None and (key is None or key != self._fold.key):
            yield from self._flush_fold()
        if key is not None and self._fold is not None:
            self._fold_more(record, update)
            return
        group, header = self._place(record)
        if header is not None:
            yield self._numbered(header)
        row = self._row(record, msg, update, group)
        if key is not None:
            self._fold = _Pending(row, key)
            self._fold_more(record, update, first=True)
            return
        yield self._numbered(row)

    def finish(self) -> Iterator[Json]:
        yield from self._flush_fold()

    def redact(self, record: Json) -> Json:
        """The record masked again as everything that serves a capture masks it
        (`masking.mask_record`)."""
        return mask_record(self.redactor, record)

    # -- groups --------------------------------------------------------------------------

    def _place(self, record: Json) -> tuple[int, Json | None]:
        """The header row index of the record's group, and a header row to hand out first
        when the record starts a group. Mirrors `html.group_turns`."""
        session = record.get("session")
        key = id_key(session)
        if record.get("kind") == "request" and record.get("method") == p.SESSION_PROMPT \
                and record.get("direction") == "to-agent":
            self.turns += 1
            index = self.count
            self._open_turns[key] = index
            self._open_turns.move_to_end(key)
            if len(self._open_turns) > MAX_OPEN:
                self._open_turns.popitem(last=False)
            self._outside = None
            self._last_group = index
            self._turn_requests[index + 1] = (index, key)
            if len(self._turn_requests) > MAX_OPEN:
                self._turn_requests.popitem(last=False)
            return index, {"h": "turn", "ti": f"Turn {self.turns}", "se": session, "q": index + 1}
        target = self._open_turns.get(key) if session is not None else None
        if target is None and session is None and len(self._open_turns) == 1:
            target = next(iter(self._open_turns.values()))
        if target is None:
            if self._outside is None or self._last_group != self._outside:
                index = self.count
                title = "Setup" if self._last_group is None else "Between turns"
                self._outside = self._last_group = index
                return index, {"h": "outside", "ti": title}
            return self._outside, None
        return target, None

    def _close_turn(self, request_row: int) -> None:
        header, key = self._turn_requests.pop(request_row, (None, None))
        if header is not None and self._open_turns.get(key) == header:
            del self._open_turns[key]

    # -- rows ----------------------------------------------------------------------------

    def _numbered(self, row: Json) -> Json:
        self.count += 1
        return row

    def _row(self, record: Json, msg: Any, update: dict[str, Any], group: int) -> Json:
        # The message the row has read, unless summarize reads another: the one `out_b64`
        # holds (the row reads `raw`), or the line of a record withheld whole (the row none).
        if "out_b64" in record or record.get("redacted") == WHOLE:
            summary = summarize(record, self.clock)
        else:
            summary = summarize(record, self.clock, message=msg)
        index = self.count
        direction = "a" if record.get("direction") == "to-agent" else "c"
        mono = record.get("mono", 0.0)
        row: Json = {"g": group, "s": record.get("seq", 0), "m": mono, "t": summary.clock, "d": direction,
                     "k": record.get("kind"), "v": summary.verdict, "l": summary.label,
                     "z": summary.size}
        session = record.get("session")
        if session is not None:
            row["ss"] = short_session(str(session))
        if summary.marks:
            row["mk"] = list(summary.marks)
        text = preview(msg, record.get("method"), record.get("kind"))
        if text:
            row["p"] = text
        row["b"] = self._body(record, "raw")
        if "out" in record or "out_b64" in record:
            row["o"] = None if record.get("out") is None and "out_b64" not in record else self._body(record, "out")
        if record.get("error"):
            row["e"] = str(record["error"])
        if update:
            self._update_fields(row, update)
        self._link(record, msg, row, index)
        return row

    def _update_fields(self, row: Json, update: dict[str, Any]) -> None:
        what = read.update_kind(update)
        if what is not None:
            row["u"] = what
        tool_call = read.tool_call_id(update)
        if isinstance(tool_call, str):
            row["tc"] = tool_call
            if isinstance(update.get("status"), str):
                row["st"] = update["status"]

    def _link(self, record: Json, msg: Any, row: Json, index: int) -> None:
        kind, direction, verdict = record.get("kind"), record.get("direction"), row["v"]
        mono = record.get("mono", 0.0)
        if verdict == "emit":
            if self._input is not None and self._input[0] == mono:
                row["f"] = self._input[1]
        else:
            self._input = (mono, index)
        if kind == "request" and "id" in record:
            self._requests.request(direction, record.get("id"), index)
        elif kind == "response" and "id" in record:
            request = self._requests.response(direction, record.get("id"))
            if request is not None:
                row["q"] = request
                if isinstance(latency := record.get("latency"), (int, float)):
                    row["lat"] = latency
                reason = read.stop_reason(p.get_path(msg, "result"))  # v1's turn end
                if isinstance(reason, str):
                    row["sr"] = reason
                self._close_turn(request)

    def _body(self, record: Json, key: str) -> str:
        """The line as it came (or went), as text: the page indents JSON itself, keeping
        every number as written."""
        if record.get("redacted") == WHOLE:
            return WITHHELD_NOTE
        held = record.get(key)
        data = held if isinstance(held, str) else record_bytes(record, key)
        if data is None:
            return ""
        text, length, size = body_text(data)
        note = f"\n… (the first {size} of {record.get('size')} bytes)" if record.get("truncated") and key == "raw" \
            else ""
        # as `cut(whole + note)`: `text` is all of the text, or its first BODY_LIMIT characters
        shown = (text + note)[:BODY_LIMIT]
        more = length + len(note) - BODY_LIMIT
        return shown + f"\n… ({more} more characters not shown)" if more > 0 else shown

    # -- folding -------------------------------------------------------------------------

    def _fold_key(self, record: Json, update: dict[str, Any]) -> tuple[Any, ...] | None:
        """What a chunk must share with the previous one to join its row; None: not a chunk."""
        what = read.update_kind(update)
        if what is None or what not in CHUNK_KINDS or record.get("verdict") != "pass" \
                or record.get("kind") != "notification":
            return None
        content = update.get("content")
        if not isinstance(content, dict) or content.get("type") != "text":
            return None
        return (id_key(record.get("session")), what, record.get("direction"))

    def _fold_more(self, record: Json, update: dict[str, Any], *, first: bool = False) -> None:
        fold = self._fold
        assert fold is not None
        text = read.content_text(update.get("content"), SEP)
        if fold.length < BODY_LIMIT:  # what is shown, not the rest of a long chunk
            fold.texts.append(text if fold.length + len(text) <= BODY_LIMIT else text[:BODY_LIMIT - fold.length])
        fold.length += len(text)
        row = fold.row
        if not first:
            row["n"] = row.get("n", 1) + 1
            row["s2"] = record.get("seq", 0)
            row["m2"] = record.get("mono", 0.0)
            row["sz"] = row.get("sz", 0) + int(record.get("size", 0))
        else:
            row["sz"] = int(record.get("size", 0))

    def pending(self) -> Json | None:
        """The row of the run of chunks being folded, as it would be handed out now (the next
        row's index), without ending the run: a live page shows it growing."""
        return self._folded(self._fold) if self._fold is not None else None

    def _flush_fold(self) -> Iterator[Json]:
        fold, self._fold = self._fold, None
        if fold is None:
            return
        yield self._numbered(self._folded(fold))

    @staticmethod
    def _folded(fold: _Pending) -> Json:
        row = dict(fold.row)
        size = row.pop("sz", 0)
        if "n" in row:
            joined = "".join(fold.texts)
            row["l"] = f"{row['l']} ×{row['n']}"
            row["z"] = f"{size}B"
            row["p"] = one_line(joined)
            row["b"] = cut(joined) + ("" if fold.length <= len(joined) else
                                       f"\n… ({fold.length - len(joined)} more characters not shown)")
        return row
