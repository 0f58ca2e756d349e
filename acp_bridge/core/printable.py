"""Text from the wire made safe to show a person: every character that could act on a
terminal or disguise the text around it is written as an escape.

Owns: `printable`, the one escaping every person-facing output uses (log lines, `show`,
`check`, `stats`, the replay's reports, the JUnit file, diverted agent output: `stray_line`).
Must never: be applied to bytes that are relayed, recorded or written as JSON (those stay
exact; JSON encoders escape for themselves), or to the agent's stderr, which the bridge
copies byte for byte.
"""

from __future__ import annotations

import re

# Escaped: C0 controls (ESC starts terminal sequences, BEL ends some, CR and LF forge lines,
# TAB breaks columns), DEL, C1 controls (U+009B is an 8-bit CSI to some terminals), the
# line and paragraph separators, the bidirectional marks, embeddings, overrides and isolates
# (they reorder what is shown: "Trojan Source", CVE-2021-42574), lone surrogates (no UTF-8
# encoder writes them), and U+FFFE/U+FFFF (no XML 1.0 document may hold them).
_UNSAFE = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
_ESCAPED = re.compile(f"[{_UNSAFE}]")
_ESCAPED_OR_BACKSLASH = re.compile(f"[{_UNSAFE}\\\\]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def printable(text: str, *, quote_backslash: bool = True) -> str:
    """`text` with each unsafe character written as `\\t`, `\\n`, `\\r` or `\\uXXXX` (JSON's
    and Python's spelling), and each backslash doubled, so that two different texts never
    look alike: `a<ESC>b` shows as `a\\u001bb`, the literal text `a\\u001bb` as
    `a\\\\u001bb`. Text with no backslash and nothing unsafe comes back as it is (the same
    object).

    With `quote_backslash=False`, backslashes are left alone: for text that already holds
    escaped parts (a `repr()`, JSON, a finding's text or a log line quoting either), where
    doubling them would escape those twice. Such text is then safe to show but no longer
    tells a literal escape from the character it names; the exact text is in `--json`
    outputs and in the capture.
    """
    pattern = _ESCAPED_OR_BACKSLASH if quote_backslash else _ESCAPED
    if pattern.search(text) is None:  # nearly always: no copy
        return text
    return pattern.sub(_escape, text)


def printable_lines(text: str) -> str:
    """A text of several lines (a traceback, indented JSON), each line made `printable`
    without doubling backslashes, the line feeds between them kept."""
    return "\n".join(printable(line, quote_backslash=False) for line in text.split("\n"))


STRAY_SHOWN = 500  # bytes of a diverted line shown on stderr


def stray_line(raw: bytes, limit: int = STRAY_SHOWN, *, long: bool = False) -> str | None:
    """A line of the agent's stdout that the bridge diverts (bridge-rules 6.3), as the one
    line it writes on stderr instead: its first `limit` bytes made `printable`, with how
    long it was when that is not all of it. None for a blank line (nothing to show).
    `long`: `raw` is the first piece of a line over the parse limit, whose length is not known."""
    line = raw.removesuffix(b"\n").removesuffix(b"\r")
    if not line.strip():
        return None
    text = printable(line[:limit].decode("utf-8", "replace"))
    if long:
        text += " ... (a line over the parse limit)"
    elif len(line) > limit:
        text += f" ... ({len(line)} bytes)"
    return f"acp-bridge: agent stdout (not forwarded): {text}"
