"""Redaction: the bridge's one secret vocabulary, for what it writes beyond the relayed bytes.

Owns: the default secrets of ACP messages (MCP server env and headers, `authenticate` and
`auth/login` params, `terminal/create` env; the secrets on the command lines of MCP servers
and of `terminal/create`, masked by `command_redaction`), configured RFC 6901
pointers, the configured system prompt text, and the rule for lines that cannot be masked
precisely (they are withheld whole when they could hold a secret). The capture and the
export page mask messages with it; free text and command lines are masked with the same words in
`text_redaction`; how JSON spells a text, and the byte searches built on that, are in
`spellings`. Must never: touch the bytes the relay forwards (it masks copies),
do IO, or raise on anything read from the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.capture.command_redaction import mask_server_commands, mask_terminal_command
from acp_bridge.capture.spellings import BACKSLASH, any_in, ascii_view, has_duplicate_keys, spelled, spellings
from acp_bridge.capture.text_redaction import REDACTED as REDACTED  # re-exported: the one spelling
from acp_bridge.core import protocol as p
from acp_bridge.core.literals import exact_reading, inexact_numbers
from acp_bridge.core.pointer import escape_token, parse_pointer

PROMPT_REDACTED = "<redacted: system prompt>"
WHOLE = "whole"  # a record's `redacted` when its raw (and out) were withheld whole
WITHHELD = REDACTED.encode()  # what a record holds instead of a line withheld whole

# -- redaction ------------------------------------------------------------------------------

_ANY = object()  # a path step that matches every item of an array (internal patterns only)
Path = tuple[Any, ...]

# Secrets ACP carries in known places (schema: McpServer env/headers, terminal/create env).
_ALWAYS: tuple[Path, ...] = (
    ("params", "mcpServers", _ANY, "env", _ANY, "value"),
    ("params", "mcpServers", _ANY, "headers", _ANY, "value"),
)
_BY_METHOD: dict[str, tuple[Path, ...]] = {
    p.TERMINAL_CREATE: (("params", "env", _ANY, "value"),),
}
_WHOLE_PARAMS = frozenset({p.AUTHENTICATE, p.AUTH_LOGIN})  # every member of params is masked
# Methods whose params are a command line (`command`, `args`), masked as the bridge's own.
_COMMAND_LINES = frozenset({p.TERMINAL_CREATE})
# Methods whose messages may be masked beyond `_ALWAYS` and the configured pointers.
MASKED_METHODS = frozenset(_BY_METHOD) | _WHOLE_PARAMS | _COMMAND_LINES

# What a line must mention to hold one of the default secrets: the methods and the key that
# lead to them. A line that cannot be parsed is searched for these and for `_LOOSE` too
# (the keys right above a secret, which a message written over several lines has alone).
_KEYS = (*sorted(MASKED_METHODS), "mcpServers")
_LOOSE = ("env", "headers")



def _array_index(token: str, size: int) -> int | None:
    # RFC 6901 section 4: decimal, no leading zeros; "-" (past the end) never exists.
    if not token.isdigit() or not token.isascii() or (token != "0" and token.startswith("0")):
        return None
    index = int(token)
    return index if index < size else None


def _mask_path(obj: Any, path: Path, at: int, here: str, hits: list[str], mask: Any) -> Any:
    """`obj` with the value at `path` masked, copied only along the way; hits get pointers."""
    if at == len(path):
        hits.append(here)
        return mask
    step = path[at]
    if step is _ANY:
        if not isinstance(obj, list):
            return obj
        new: list[Any] | None = None
        for index, item in enumerate(obj):
            before = len(hits)
            masked = _mask_path(item, path, at + 1, f"{here}/{index}", hits, mask)
            if len(hits) != before:
                new = new if new is not None else list(obj)
                new[index] = masked
        return obj if new is None else new
    if isinstance(obj, dict):
        if step not in obj:
            return obj
        before = len(hits)
        masked = _mask_path(obj[step], path, at + 1, f"{here}/{escape_token(step)}", hits, mask)
        return obj if len(hits) == before else {**obj, step: masked}
    if isinstance(obj, list):
        position = _array_index(step, len(obj))
        if position is None:
            return obj
        before = len(hits)
        masked = _mask_path(obj[position], path, at + 1, f"{here}/{position}", hits, mask)
        if len(hits) == before:
            return obj
        copy = list(obj)
        copy[position] = masked
        return copy
    return obj


def _mask_text(obj: Any, text: str, here: str, hits: list[str]) -> Any:
    """`obj` with every string equal to or containing `text` replaced by PROMPT_REDACTED."""
    if isinstance(obj, str):
        if text in obj:
            hits.append(here)
            return PROMPT_REDACTED
        return obj
    if isinstance(obj, dict):
        new: Any = None
        for key, value in obj.items():
            before = len(hits)
            masked = _mask_text(value, text, f"{here}/{escape_token(key)}", hits)
            if len(hits) != before:
                new = new if new is not None else dict(obj)
                new[key] = masked
        return obj if new is None else new
    if isinstance(obj, list):
        new = None
        for index, item in enumerate(obj):
            before = len(hits)
            masked = _mask_text(item, text, f"{here}/{index}", hits)
            if len(hits) != before:
                new = new if new is not None else list(obj)
                new[index] = masked
        return obj if new is None else new
    return obj


def _pointer_needle(pointer: str) -> str:
    """The text a line must hold for `pointer` to find a value in it: its last step that is
    a name ("" when every step is an array index: any line may then hold it)."""
    names = [token for token in parse_pointer(pointer) if not token.isdigit()]
    return names[-1] if names else ""


@dataclass(frozen=True)
class Redactor:
    """What the capture masks: the defaults, configured pointers, and maybe a private text.

    Args:
        pointers: RFC 6901 pointers matched against each whole message (each message of a
            batch).
        secret: text (the configured system prompt) that must not appear in clear; None if
            it may.
    """

    pointers: tuple[str, ...] = ()
    secret: str | None = None
    _paths: tuple[Path, ...] = field(init=False, repr=False)
    _needles: tuple[bytes, ...] = field(init=False, repr=False)
    _spellings: tuple[bytes, ...] = field(init=False, repr=False)  # of the secret text
    _keys: tuple[bytes, ...] = field(init=False, repr=False)  # what a masked value hides behind
    _loose: tuple[bytes, ...] = field(init=False, repr=False)  # _keys and _LOOSE
    overlap: int = field(init=False, repr=False)  # bytes a spelled needle can span
    _spelled_exactly: bool = field(init=False, repr=False)  # see passes_unmasked

    def __post_init__(self) -> None:
        object.__setattr__(self, "_paths", tuple(parse_pointer(ptr) for ptr in self.pointers))
        needles: tuple[bytes, ...] = ()
        secret_spellings: tuple[bytes, ...] = ()
        if self.secret:
            # Without `\u` or `\/` escapes a JSON string has exactly one spelling, so these
            # two substrings (plain and JSON-escaped) find the text wherever it can be.
            plain, minimal, _ = (text.encode("utf-8", "surrogatepass") for text in spelled(self.secret))
            needles = (plain, minimal, b"\\u", b"\\/")
            secret_spellings = spellings(self.secret)
        object.__setattr__(self, "_needles", needles)
        object.__setattr__(self, "_spellings", secret_spellings)
        keys = [s for text in (*_KEYS, *map(_pointer_needle, self.pointers)) for s in spellings(text)]
        loose = keys + [s for text in _LOOSE for s in spellings(text)]
        object.__setattr__(self, "_keys", tuple(dict.fromkeys(keys)))
        object.__setattr__(self, "_loose", tuple(dict.fromkeys(loose)))
        longest = max(map(len, (*loose, *secret_spellings)))
        # Printable ASCII is spelled in JSON as itself or as \u00XX (`/` also as \/), and
        # `ascii_view` undoes these: for such names, not finding one is certain. Not so for `"`
        # and `\`: each also has a short escape (\" \\) that `ascii_view` keeps, so a name
        # with two of them, one spelled each way, matches none of its spellings.
        names = [*_KEYS, *_LOOSE, *map(_pointer_needle, self.pointers)]
        object.__setattr__(self, "_spelled_exactly", all(
            name and name.isascii() and name.isprintable() and '"' not in name and "\\" not in name
            for name in names))
        object.__setattr__(self, "overlap", 6 * longest)

    def mask(self, msg: Any, *, text: bool = True) -> tuple[Any, list[str]]:
        """The message with secrets masked (the original is never changed), and where.

        A batch (a list) has each of its messages masked. `text=False` skips the search for
        the private text (the caller knows it is absent). Raises RecursionError on a
        message nested deeper than Python's recursion allows.
        """
        hits: list[str] = []
        if isinstance(msg, list):
            new: list[Any] | None = None
            for index, item in enumerate(msg):
                before = len(hits)
                masked = self._mask_message(item, f"/{index}", hits)
                if len(hits) != before:
                    new = new if new is not None else list(msg)
                    new[index] = masked
            msg = msg if new is None else new
        else:
            msg = self._mask_message(msg, "", hits)
        if self.secret and text:
            msg = _mask_text(msg, self.secret, "", hits)
        return msg, hits

    def _mask_message(self, msg: Any, here: str, hits: list[str]) -> Any:
        if isinstance(msg, dict):
            params = msg.get("params")
            if isinstance(params, dict) and "mcpServers" in params:  # where every _ALWAYS path goes
                for path in _ALWAYS:
                    msg = _mask_path(msg, path, 0, here, hits, REDACTED)
                msg = mask_server_commands(msg, here, hits)
            method = msg.get("method")
            if isinstance(method, str):
                for path in _BY_METHOD.get(method, ()):
                    msg = _mask_path(msg, path, 0, here, hits, REDACTED)
                if method in _COMMAND_LINES:
                    msg = mask_terminal_command(msg, here, hits)
                params = msg.get("params")
                if method in _WHOLE_PARAMS and params is not None:
                    masked: Any = REDACTED
                    if isinstance(params, dict):
                        masked = dict.fromkeys(params, REDACTED)
                        hits.extend(f"{here}/params/{escape_token(key)}" for key in params)
                    else:
                        hits.append(f"{here}/params")
                    msg = {**msg, "params": masked}
        for path in self._paths:
            msg = _mask_path(msg, path, 0, here, hits, REDACTED)
        return msg

    def may_contain_secret_text(self, line: bytes) -> bool:
        """Cheap test: could this line contain the configured secret text, in any spelling
        (plain or escaped)? False is certain."""
        if not self._needles:
            return False
        plain, *escaped = self._needles
        if plain in line:
            return True
        # Every other spelling has a backslash, and a one-byte search runs at memchr speed
        # where the two-byte ones cost ~0.9 ns a byte: most runs are spared them.
        return BACKSLASH in line and any(needle in line for needle in escaped)

    def shows_secret_text(self, data: bytes) -> bool:
        """Does `data` hold the secret text in a spelling a reader would recognise?"""
        if not self._spellings:
            return False
        return any_in(self._spellings, data) or (
            BACKSLASH in data and any_in(self._spellings, ascii_view(data)))

    def may_hold_any_secret(self, data: bytes) -> bool:
        """Could `data`, not parsed (or not parsable), hold a secret? It could if it
        mentions what leads to one (a masked method, `mcpServers`, `env`, `headers`, a
        configured pointer's last name, also spelled with escapes) or the secret text.
        Errs towards yes: false is certain, true is often wrong."""
        return self._may_name_a_secret(data) or self.shows_secret_text(data)

    def _may_name_a_secret(self, data: bytes) -> bool:
        if any_in(self._loose, data):
            return True
        # a name not searched for every way it can be spelled may hide behind any escape
        return BACKSLASH in data and (not self._spelled_exactly or any_in(self._loose, ascii_view(data)))

    def passes_unmasked(self, line: bytes) -> bool:
        """Does `mask_line` certainly give `line` back as it is, with no hits, whatever it
        parses to? True when it names nothing that leads to a secret, in any spelling (no
        masked method, `mcpServers`, `env`, `headers` or configured pointer's last name):
        a byte search instead of a parse, for the many lines that hold none. With a secret
        text, or a pointer whose last name is not printable ASCII without `"` and `\\`,
        never: the spellings of those are not all known here, so every line is masked the
        exact way."""
        if self.secret or not self._spelled_exactly:
            return False
        return not self.may_hold_any_secret(line)

    def mask_line(self, line: bytes, msg: Any) -> tuple[bytes, list[str] | None]:
        """The line with secrets masked and where (the very same bytes and [] if nothing
        was); `msg` is the line parsed, None when it does not parse.

        Hits None: the line could hold a secret that cannot be masked precisely (it does not
        parse, it names a member twice, it cannot be re-encoded), so it is withheld whole:
        the bytes are `WITHHELD`. Never raises.
        """
        if msg is None:
            return self._mask_unparsed(line)
        maybe = bool(self._needles) and self.may_contain_secret_text(line)
        try:
            if type(msg) is dict and not maybe:  # the usual case, without the calls around it
                hits: list[str] = []
                masked = self._mask_message(msg, "", hits)
            else:
                masked, hits = self.mask(msg, text=maybe)
            if not hits:
                # orjson keeps the last of two members with one name: an earlier one could
                # hold what the parse shows no more.
                for key in self._keys:  # a loop, not any_in: this runs for most lines
                    if key in line:
                        keys = True
                        break
                else:  # a name not searched for every way it can be spelled may hide behind any escape
                    keys = BACKSLASH in line and (not self._spelled_exactly or any_in(self._keys, ascii_view(line)))
                if keys and has_duplicate_keys(line):
                    return WITHHELD, None
                if maybe and self.shows_secret_text(line) and has_duplicate_keys(line):
                    return WITHHELD, None
                return line, hits
            if inexact_numbers(line):
                # Mask an exact reading instead, so that every number stays as written.
                masked, hits = self.mask(exact_reading(line), text=maybe)
            out = orjson.dumps(masked) + _terminator(line)
        except (TypeError, ValueError, RecursionError):  # orjson.JSONEncodeError is a TypeError
            return WITHHELD, None  # nested too deep to mask or to write back
        return out, hits

    def _mask_unparsed(self, line: bytes) -> tuple[bytes, list[str] | None]:
        if self._may_name_a_secret(line):
            return WITHHELD, None
        if not self.may_contain_secret_text(line):
            return line, []
        out = line
        for spelling in self._spellings:
            out = out.replace(spelling, PROMPT_REDACTED.encode())
        if self.shows_secret_text(out):
            return WITHHELD, None
        return (line, []) if out == line else (out, [""])


def _terminator(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if line.endswith(b"\n") else b""


def valid_pointers(redact: Any) -> tuple[str, ...]:
    """A capture header's `redact` pointers, but any that is not one (a capture edited by
    hand): each of the others still masks."""
    found: list[str] = []
    for pointer in redact if isinstance(redact, list) else ():
        if isinstance(pointer, str):
            try:
                parse_pointer(pointer)
            except ValueError:
                continue
            found.append(pointer)
    return tuple(found)
