"""What a row of the exported page shows of a message: its one-line preview and its body.

Owns: the one-line preview of a message (the agent's text, the tool's title, the prompt, the
stop reason, the error), a whitespace run made one space and cut to a limit, and a line's
body as text cut to BODY_LIMIT characters, read a piece at a time so a long line is never
held twice.
Must never: hold state between messages (the row builder, `html_rows.py`, does), or read
more of a long text than it shows.
"""

from __future__ import annotations

import codecs
import functools
import itertools
import re
from typing import Any

from acp_bridge.core import methods as m
from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read

BODY_LIMIT = 20_000  # characters of one message kept; the rest is cut with a note
PREVIEW_LIMIT = 160  # characters of a one-line preview
SEP = " "  # between the texts of a message's content blocks, in a preview
CHUNK_KINDS = frozenset({"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"})


def one_line(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """`text` with its whitespace runs made one space, cut to `limit` characters ("…" last):
    as `" ".join(text.split())` would give it, from only as many words as are shown (a
    megabyte of words split whole took hundreds of megabytes), none longer than the limit."""
    words: list[str] = []
    length = -1
    for word in _words(limit).finditer(text):
        words.append(word.group())
        length += 1 + word.end() - word.start()
        if length > limit:
            break
    text = " ".join(words)
    return text if len(text) <= limit else text[:limit - 1] + "…"


@functools.cache
def _words(limit: int) -> re.Pattern[str]:
    """Words as `str.split` finds them (`\\s` is its whitespace), a piece of at most `limit` + 1
    characters at a time: a piece past the limit ends the preview, so no shown word is cut."""
    return re.compile(rf"\S{{1,{limit + 1}}}")


def cut(text: str) -> str:
    if len(text) <= BODY_LIMIT:
        return text
    return text[:BODY_LIMIT] + f"\n… ({len(text) - BODY_LIMIT} more characters not shown)"


PIECE = 1 << 20  # characters (or bytes) of a long line turned into text at a time


def body_text(data: str | bytes, limit: int = BODY_LIMIT, piece: int = PIECE) -> tuple[str, int, int]:
    """What `html_rows.RowBuilder._body` shows of a line (as text, a lone surrogate or a byte that is no UTF-8
    written as its escape): its first `limit` characters without the line end, the
    number of characters the whole text has without it, and the line's length in bytes.
    A `piece` at a time, so a long line is never held again as bytes or as text."""
    if len(data) <= piece:  # most lines: at once
        line = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        whole = line.decode("utf-8", "backslashreplace").rstrip("\r\n")
        return whole[:limit], len(whole), len(line)
    decode = codecs.getincrementaldecoder("utf-8")("backslashreplace").decode
    head: list[str] = []  # the first `limit` characters, line ends and all
    held = size = length = ends = 0
    parts = (data[start:start + piece] for start in range(0, len(data), piece))
    for part in itertools.chain(parts, [b""]):  # b"" last, to end the decoding
        line = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        size += len(line)
        text = decode(line, not line)
        body = len(text.rstrip("\r\n"))  # line ends so far: these, or these and the last ones
        length, ends = length + len(text), ends + len(text) if not body else len(text) - body
        if held < limit:
            head.append(text[:limit - held])
            held += len(head[-1])
    return "".join(head)[:length - ends], length - ends, size


def _suggestions(items: Any) -> str:
    """The texts of suggestions, in either form (`core/shapes.suggestion_text`), apart by a bar."""
    texts = [read.suggestion_text(item) for item in (items if isinstance(items, list) else ())]
    return " | ".join(text for text in texts if isinstance(text, str) and text)


# Methods whose preview is one string of their params: the new title, the authentication
# state, the MCP method carried, the question asked.
PARAM_SHOWN = {m.SESSION_SET_TITLE: "title", m.AUTH_STATUS_UPDATE: "state", m.MCP_MESSAGE: "method",
               m.ELICITATION_CREATE: "message"}


def preview(msg: Any, method: Any, kind: Any) -> str:
    """What a person wants to see of a message without opening it: the agent's text, the
    tool's title, the prompt, the stop reason, the error."""
    if not isinstance(msg, dict):
        return ""
    params: dict[str, Any] = msg["params"] if isinstance(msg.get("params"), dict) else {}
    if kind == "response":
        if isinstance(msg.get("error"), dict):
            return one_line(str(msg["error"].get("message", "")))
        result = msg.get("result")
        if isinstance(result, dict):
            for key in ("stopReason", "sessionId"):
                if isinstance(result.get(key), str):
                    return f"{key}: {result[key]}"
            outcome = result.get("outcome")
            if isinstance(outcome, dict):
                return one_line(" ".join(str(v) for v in outcome.values() if isinstance(v, str)))
        return ""
    if method == p.SESSION_PROMPT:
        return one_line(read.content_text(params.get("prompt"), SEP))
    if method == p.SESSION_UPDATE:
        update = update_of(msg)
        what = read.update_kind(update)
        if what is None:  # a peer's value: a list or an object is no kind
            return ""
        if what in CHUNK_KINDS:
            return one_line(read.content_text(update.get("content"), SEP))
        if what in read.TOOL_CALL_UPDATES:
            parts = [str(update[k]) for k in ("title", "kind", "status") if isinstance(update.get(k), str)]
            return one_line(" · ".join(parts))
        if what in (p.PROMPT_SUGGESTIONS_UPDATE, p.SESSION_INFO_UPDATE):
            items = read.suggestion_items(update)  # a legacy list, or else the session's title
            if what == p.PROMPT_SUGGESTIONS_UPDATE or isinstance(items, list):
                return one_line(_suggestions(items))
            return one_line(str(update.get("title") or ""))
        if what == "plan" and isinstance(update.get("entries"), list):
            return f"{len(update['entries'])} entries"
        if what == "available_commands_update" and isinstance(update.get("availableCommands"), list):
            names = [str(c.get("name")) for c in update["availableCommands"] if isinstance(c, dict)]
            return one_line(" ".join("/" + n for n in names))
        return ""
    if method == m.SESSION_REQUEST_PERMISSION:
        return one_line(str(p.get_path(params, "toolCall", "title") or ""))
    shown = PARAM_SHOWN.get(method) if isinstance(method, str) else None
    if shown is not None:
        return one_line(str(params[shown])) if isinstance(params.get(shown), str) else ""
    for key in ("path", "command", "cwd"):
        if isinstance(params.get(key), str):
            return one_line(str(params[key]))
    return ""


def update_of(msg: Any) -> dict[str, Any]:
    return read.update_of(msg) or {}
