"""What an agent did in a turn, as facts to compare: `drive --compare structure` and `text`.

Owns: `structure(messages)` and `text(messages)`, the projections `compare_tracks` applies
to each turn of the recording and of the live run, so that `drive`'s report is `diff`'s
engine over these facts. A turn's facts, in order, from what the agent sent:
- each `session/update` as its kind, a run of chunks of one kind counted as one (`text`:
  with their text joined); a `state_update` with its state;
- a tool call (where its id first appears) with its kind, title and final status;
- each request the agent made of the client, a permission request with its option kinds;
- the stop reason (v1: the prompt's response; v2: the idle `state_update`);
- each error the agent answered with, by method and code (`text`: and message).
Ids, session ids and times are not facts, nor what the bridge wrote itself (a recording made
through rules has such messages; `drive` runs none). Must never: do IO, or raise on any message.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.methods import SESSION_REQUEST_PERMISSION
from acp_bridge.replay.turns import TO_CLIENT, Recorded

FACT = "fact"
_NONE = object()  # a turn's end that names no stop reason


def structure(messages: list[Recorded]) -> list[Recorded]:
    return _facts(messages, with_text=False)


def text(messages: list[Recorded]) -> list[Recorded]:
    return _facts(messages, with_text=True)


def kept(message: Recorded, *, with_text: bool) -> Recorded:
    """`message` with only what `structure` (or, `with_text`, `text`) reads of it, so that a
    capture's messages can be held by the thousand whatever their size: the facts of a turn
    of such messages are those of the turn itself (tests/replay/test_compare.py)."""
    msg = message.msg
    if message.direction != TO_CLIENT or message.emitted or not isinstance(msg, dict):
        return dataclasses.replace(message, msg=None)  # no facts: not the agent's, or no message
    if message.kind == "notification" and message.method == p.SESSION_UPDATE:
        update = p.get_path(msg, "params", "update")
        if not isinstance(update, dict):
            return dataclasses.replace(message, msg={})
        small = {key: update[key] for key in _UPDATE_FIELDS if key in update}
        if with_text:
            small["content"] = {"type": "text", "text": _text_of(update)}
        return dataclasses.replace(message, msg={"params": {"update": small}})
    small_msg: dict[str, Any] = {}
    if message.kind == "request" and message.method == SESSION_REQUEST_PERMISSION:
        options = p.get_path(msg, "params", "options")
        small_msg["params"] = {"options": [{"kind": o.get("kind")} for o in options if isinstance(o, dict)]
                               if isinstance(options, list) else None}
    elif message.kind == "response":
        error = msg.get("error")
        if isinstance(error, dict):
            small_msg["error"] = {"code": error.get("code"), **({"message": error.get("message")} if with_text else {})}
        result = msg.get("result")
        if isinstance(result, dict) and "stopReason" in result:
            small_msg["result"] = {"stopReason": result["stopReason"]}
    return dataclasses.replace(message, msg=small_msg)


_UPDATE_FIELDS = ("sessionUpdate", "toolCallId", "kind", "title", "status", "state", "stopReason")


def _fact(source: Recorded, label: str, value: dict[str, Any]) -> Recorded:
    return Recorded(source.seq, TO_CLIENT, FACT, label, None, None, value)


def _facts(messages: list[Recorded], *, with_text: bool) -> list[Recorded]:
    out: list[Recorded] = []
    tools: dict[Any, dict[str, Any]] = {}  # toolCallId -> its fact's value, updated to the final state
    run: tuple[str, Recorded] | None = None  # the run of chunks going on: its kind, its fact
    texts: dict[int, list[str]] = {}  # id() of a run's fact -> its texts, joined once (not copied per chunk)
    for message in messages:
        if message.direction != TO_CLIENT or message.emitted or not isinstance(message.msg, dict):
            continue
        if message.kind == "notification" and message.method == p.SESSION_UPDATE:
            update = p.get_path(message.msg, "params", "update")
            kind = message.update
            if not isinstance(update, dict) or kind is None:
                continue
            if kind.endswith("_chunk"):
                run = _chunk_fact(message, update, kind, run, texts, out, with_text=with_text)
                continue
            _update_facts(message, update, kind, tools, out, with_text=with_text)
        else:
            _message_facts(message, message.msg, out, with_text=with_text)
        run = None
    _join_texts(out, texts)
    return out


def _chunk_fact(message: Recorded, update: dict[str, Any], kind: str, run: tuple[str, Recorded] | None,
                texts: dict[int, list[str]], out: list[Recorded], *, with_text: bool) -> tuple[str, Recorded]:
    """A chunk: one more of the run of its kind going on (its text joins the run's), or the
    first of a new run, whose one fact stands for all of them. Returns the run."""
    if run is not None and run[0] == kind:
        if with_text:
            texts[id(run[1])].append(_text_of(update))
        return run
    fact = _fact(message, f"update {kind}", {"update": kind})
    if with_text:
        fact.msg["text"] = ""
        texts[id(fact)] = [_text_of(update)]
    out.append(fact)
    return (kind, fact)


def _update_facts(message: Recorded, update: dict[str, Any], kind: str, tools: dict[Any, dict[str, Any]],
                  out: list[Recorded], *, with_text: bool) -> None:
    """An update that is not a chunk: its fact (a tool call's carries its state so far), and
    the stop reason of a turn it ends."""
    value: dict[str, Any] = {"update": kind}
    if kind in read.TOOL_CALL_UPDATES:
        tool_id = _hashable(read.tool_call_id(update))
        known = tools.get(tool_id)
        if known is None:
            known = tools[tool_id] = {}
            value["toolCall"] = known
        for field in ("kind", "title", "status"):
            if field in update:
                known[field] = update[field]
    elif kind == p.STATE_UPDATE:
        value["state"] = update.get("state")
    elif with_text and (said := _text_of(update)):
        value["text"] = said
    out.append(_fact(message, f"update {kind}", value))
    if read.ends_turn_v2(update) and (reason := read.stop_reason(update, _NONE)) is not _NONE:
        out.append(_fact(message, "stop reason", {"stopReason": reason}))


def _message_facts(message: Recorded, msg: dict[str, Any], out: list[Recorded], *, with_text: bool) -> None:
    """A request's fact (a permission request's with its options' kinds), an error's, and the
    stop reason a prompt's answer gives."""
    if message.kind == "request":
        request: dict[str, Any] = {"request": message.method}
        if message.method == SESSION_REQUEST_PERMISSION:
            options = p.get_path(msg, "params", "options")
            request["options"] = [o.get("kind") for o in options if isinstance(o, dict)] \
                if isinstance(options, list) else None
        out.append(_fact(message, f"request {message.method}", request))
    elif message.kind == "response":
        error = msg.get("error")
        if isinstance(error, dict):
            value = {"method": message.method, "code": error.get("code")}
            if with_text:
                value["message"] = error.get("message")
            out.append(_fact(message, "error", {"error": value}))
        elif message.method == p.SESSION_PROMPT and (reason := read.stop_reason(msg.get("result"), _NONE)) \
                is not _NONE:
            out.append(_fact(message, "stop reason", {"stopReason": reason}))


def _join_texts(facts: list[Recorded], texts: dict[int, list[str]]) -> None:
    """Each run's fact gets its chunks' texts, joined once at the end."""
    for fact in facts:
        if id(fact) in texts:
            fact.msg["text"] = "".join(texts[id(fact)])


def _text_of(update: dict[str, Any]) -> str:
    """The text of an update's content: a block, or (v2 whole messages) a list of blocks,
    joined as they come; a tool call's wrapped content is not looked into."""
    return read.content_text(update.get("content"), wrapped=False)


def _hashable(value: Any) -> Any:
    return (type(value), value) if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
