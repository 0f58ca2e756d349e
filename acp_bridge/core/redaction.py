"""Redaction: what the capture must not hold in clear.

Owns: the default secrets of ACP messages (MCP server env and headers, `authenticate` and
`auth/login` params, `terminal/create` env), configured RFC 6901 pointers, the configured
system prompt text, and secret-looking command-line values. Must never: touch the bytes the
relay forwards (it masks copies, for the capture and the export only), or do IO.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_bridge.core import protocol as p

REDACTED = "<redacted>"
PROMPT_REDACTED = "<redacted: system prompt>"

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
# Methods whose messages may be masked beyond `_ALWAYS` and the configured pointers.
MASKED_METHODS = frozenset(_BY_METHOD) | _WHOLE_PARAMS

_BACKSLASH = ord("\\")  # an int: `in` tries an operand as an int before as bytes
_SECRET_OPTIONS = ("--system-prompt",)
_SECRET_WORDS = ("token", "secret", "password", "passwd", "auth", "key", "credential")


def parse_pointer(pointer: str) -> Path:
    """RFC 6901: "" is the whole document; "/a~1b/0" is ("a/b", "0")."""
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON pointer (RFC 6901: starts with /)")
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


def _escape(token: Any) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _array_index(token: str, size: int) -> int | None:
    # RFC 6901 section 4: decimal, no leading zeros; "-" (past the end) never exists.
    if not token.isdigit() or (token != "0" and token.startswith("0")):
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
        masked = _mask_path(obj[step], path, at + 1, f"{here}/{_escape(step)}", hits, mask)
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
            masked = _mask_text(value, text, f"{here}/{_escape(key)}", hits)
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


@dataclass(frozen=True)
class Redactor:
    """What the capture masks: the defaults, configured pointers, and maybe a private text.

    Args:
        pointers: RFC 6901 pointers matched against each whole message.
        secret: text (the configured system prompt) that must not appear in clear; None if
            it may.
    """

    pointers: tuple[str, ...] = ()
    secret: str | None = None
    _paths: tuple[Path, ...] = field(init=False, repr=False)
    _needles: tuple[bytes, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_paths", tuple(parse_pointer(ptr) for ptr in self.pointers))
        needles: tuple[bytes, ...] = ()
        if self.secret:
            # Without `\u` or `\/` escapes a JSON string has exactly one spelling, so these
            # two substrings (plain and JSON-escaped) find the text wherever it can be.
            plain = self.secret.encode("utf-8")
            needles = (plain, orjson.dumps(self.secret)[1:-1], b"\\u", b"\\/")
        object.__setattr__(self, "_needles", needles)

    def mask(self, msg: Any, *, text: bool = True) -> tuple[Any, list[str]]:
        """The message with secrets masked (the original is never changed), and where.

        `text=False` skips the search for the private text (the caller knows it is absent).
        """
        hits: list[str] = []
        if isinstance(msg, dict):
            for path in _ALWAYS:
                msg = _mask_path(msg, path, 0, "", hits, REDACTED)
            method = msg.get("method")
            if isinstance(method, str):
                for path in _BY_METHOD.get(method, ()):
                    msg = _mask_path(msg, path, 0, "", hits, REDACTED)
                params = msg.get("params")
                if method in _WHOLE_PARAMS and params is not None:
                    masked: Any = REDACTED
                    if isinstance(params, dict):
                        masked = {key: REDACTED for key in params}
                        hits.extend(f"/params/{_escape(key)}" for key in params)
                    else:
                        hits.append("/params")
                    msg = {**msg, "params": masked}
        for path in self._paths:
            msg = _mask_path(msg, path, 0, "", hits, REDACTED)
        if self.secret and text:
            msg = _mask_text(msg, self.secret, "", hits)
        return msg, hits

    def may_hold_secret(self, line: bytes) -> bool:
        """Cheap test: could this line contain the secret text? False is certain."""
        if not self._needles:
            return False
        plain, *escaped = self._needles
        if plain in line:
            return True
        # Every other spelling has a backslash, and a one-byte search runs at memchr speed
        # where the two-byte ones cost ~0.9 ns a byte: most runs are spared them.
        return _BACKSLASH in line and any(needle in line for needle in escaped)

    def mask_line(self, line: bytes, msg: Any) -> tuple[bytes, list[str]]:
        """The line with secrets masked; the very same bytes object if nothing was."""
        if msg is None:
            # Not JSON: only the private text can be found, as bytes.
            if not self.secret or not self.may_hold_secret(line):
                return line, []
            out = line
            for needle in self._needles[:2]:
                out = out.replace(needle, PROMPT_REDACTED.encode())
            return (line, []) if out == line else (out, [""])
        masked, hits = self.mask(msg, text=self.may_hold_secret(line))
        if not hits:
            return line, []
        return orjson.dumps(masked) + _terminator(line), hits


def _terminator(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if line.endswith(b"\n") else b""


def _secret_name(name: str) -> bool:
    if name in _SECRET_OPTIONS:
        return True
    looks_named = name.startswith("-") or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None
    return looks_named and any(word in name.lower() for word in _SECRET_WORDS)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """The command line with secret-looking values masked: `--system-prompt X`,
    `--api-key X`, `--token=X`, `API_KEY=X` (the bridge's options and the agent's alike)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if _secret_name(name):
            if eq:
                out.append(f"{name}={REDACTED}")
                continue
            hide_next = name.startswith("-")
        out.append(arg)
    return out
