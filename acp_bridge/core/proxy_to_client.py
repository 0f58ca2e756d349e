"""What a proxy link changes in the relay's output toward the client, as the conductor must
see it.

Owns: the writes toward the client read line by line (a line torn across two writes goes
on as it is): a request a rule sends the client goes under an id of ours (core/proxy_ids.py
keeps it, and gives the rule's id back with the answer), a rule's `$/cancel_request` of
that request names our id, and in the sacp dialect the answer to `initialize` says
`_meta.proxy: true`. The successor's requests, already under ids of ours, go as they are.
Must never: change any other byte, or re-encode a line (an id or `_meta.proxy` is spliced
in).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from acp_bridge.core.json_spans import head_members
from acp_bridge.core.methods import CANCEL_REQUEST
from acp_bridge.core.proxy_ids import LinkIds
from acp_bridge.core.proxy_long_lines import HEAD
from acp_bridge.core.proxy_wire import id_key, members_of, our_id_in, small_string, with_proxy_meta

_UNWRAPPED_REQUEST = re.compile(rb'\{"jsonrpc":"2\.0","id":([0-9]+),"method":')


def _request_id(line: bytes) -> tuple[int, int] | None:
    """The span of the id of the request `line` is; None for any other line. Read from the
    line's head when that says (an answer's `result` or `error` comes before its long value)."""
    seen: dict[str, tuple[int, int | None]] = {}
    for key, start, end in head_members(line[:HEAD]):
        if key in ("result", "error"):
            return None
        seen[key] = (start, end)
        if "id" in seen and "method" in seen:
            break
    else:
        if len(line) > HEAD:  # a value ran past the head before both were seen: the whole line
            seen = dict(members_of(line) or {})
    span = seen.get("id")
    if "method" not in seen or span is None or span[1] is None:
        return None
    return span[0], span[1]


@dataclass
class TowardClient:
    """The link's rewriting of what goes toward the client (sans-IO): feed it each write."""

    ids: LinkIds
    initialize_id: bytes | None = None  # sacp: the initialize whose answer says `_meta.proxy`
    _mid_line: bool = False  # what went toward the client ended inside a line

    def rewrite(self, data: bytes) -> bytes:
        """One write toward the client, as the conductor must see it; all but the lines
        named in the module docstring unchanged."""
        if not data:
            return data
        mid_line, self._mid_line = self._mid_line, not data.endswith(b"\n")
        if self.ids.any_emitted and b'"$/cancel_request"' in data:
            data = self._rule_cancels(data, mid_line)
        if self.initialize_id is None and b'"method"' not in data:
            return data
        out: list[bytes] = []
        done = 0  # data[:done] is in `out`
        at = data.find(b'"id"')
        while at != -1:  # only the lines with an `"id"` in them, each once
            start, end = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at)
            if end == -1:
                break  # the line goes on in the next write (or it is a torn last line)
            if start or not mid_line:
                line = data[start:end]
                new = self._line(line)
                if new is not line:
                    out += [data[done:start], new]
                    done = end
            at = data.find(b'"id"', end)
        if not out:
            return data
        out.append(data[done:])
        return b"".join(out)

    def _rule_cancels(self, data: bytes, mid_line: bool) -> bytes:
        """A rule's cancel of its own request to the client names the id the client was
        sent (ours), not the rule's; every other byte stays."""
        out: list[bytes] = []
        done = 0
        at = data.find(b'"$/cancel_request"')
        while at != -1:
            start, end = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at)
            if end == -1:
                break
            found = self._rule_cancel(data[start:end]) if start or not mid_line else None
            if found is not None:
                ours, id_start, id_end = found
                out += [data[done:start + id_start], b"%d" % ours]
                done = start + id_end
            at = data.find(b'"$/cancel_request"', end)
        return b"".join([*out, data[done:]]) if out else data

    def _rule_cancel(self, line: bytes) -> tuple[int, int, int] | None:
        """Our id for the rule's request the cancel `line` names, and the span of the name."""
        where = members_of(line)
        if where is None or "id" in where or small_string(line, where.get("method")) != CANCEL_REQUEST:
            return None
        params = members_of(line, where["params"][0]) if "params" in where else None
        if params is None or "requestId" not in params:
            return None
        start, end = params["requestId"]
        ours = self.ids.emitted_of(id_key(line[start:end]))
        return None if ours is None else (ours, start, end)

    def _line(self, line: bytes) -> bytes:
        """One whole line toward the client, as the conductor must see it."""
        if self._ours(line):
            return line
        if b'"method"' in line and (request_id := _request_id(line)) is not None:
            return self._rule_request(line, *request_id)
        if self.initialize_id is None:
            return line
        where = members_of(line)
        if where is not None and "id" in where and "method" not in where \
                and id_key(line[slice(*where["id"])]) == self.initialize_id:
            self.initialize_id = None
            if "result" in where:
                return with_proxy_meta(line, *where["result"])
        return line

    def _ours(self, line: bytes) -> bool:
        """Is `line` the successor's request as the link unwrapped it (under an id of ours)?"""
        found = _UNWRAPPED_REQUEST.match(line)
        return found is not None and self.ids.first_sending(int(found.group(1)))

    def _rule_request(self, line: bytes, start: int, end: int) -> bytes:
        """A request toward the client: the successor's (ours already, in another spelling
        after a rule) goes as it is; a rule's own goes under an id of ours, which its answer
        gives back."""
        if self.ids.first_sending(our_id_in(line[start:end])):
            return line
        return line[:start] + b"%d" % self.ids.emitted_request(line[start:end]) + line[end:]
