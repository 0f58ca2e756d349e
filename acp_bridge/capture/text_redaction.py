"""Redaction of free text and command lines: secret-looking values where there is no message
to walk, only words.

Owns: `mask_text_secrets` (`key=value` text, HTTP credentials, a URL's user and secret-named
query parameters, and the configured system prompt in each of its JSON spellings) and
`mask_argv` (the bridge's and the agent's command lines, for the capture's header). The
agent's stderr tail the bridge puts in error answers (`shell/agent.py`) and telemetry's
text mask with it. Messages are masked by `redaction.Redactor`. Must never: do IO, or raise
on any text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence

from acp_bridge.capture.spellings import text_spellings

REDACTED = "<redacted>"  # what a masked value becomes (redaction re-exports it)
PROMPT_IN_TEXT = "<system prompt>"  # in free text: the agent's stderr tail in an error answer
_SECRET_OPTIONS = ("--system-prompt",)
_SECRET_WORDS = ("token", "secret", "password", "passwd", "auth", "key", "credential")

_SECRET_KEY = (r"(?:[a-z0-9_.-]*(?:api[_-]?key|token|secret|password|passwd|credential)s?"
               r"|(?:proxy-)?authorization)")
_AUTH_SCHEME = r"(?:bearer|basic|token|digest|negotiate)"
# `key=value`, `key: value`, `"key": "value"`, `Authorization: Bearer value`: group 2 is
# the value (up to a quote, a space, `,`, `;` or `&`).
_SECRET_VALUE = re.compile(
    rf"(?i)\b({_SECRET_KEY}[\"']?\s*[:=]\s*[\"']?(?:{_AUTH_SCHEME}\s+)?)([^\s'\",;&]+)")
# A secret's name and separator with the value still to come (the next argument).
_DANGLING = re.compile(rf"(?i)\b{_SECRET_KEY}[\"']?\s*[:=]\s*[\"']?(?:{_AUTH_SCHEME})?\s*$")
_COOKIE = re.compile(r"(?i)\b((?:set-)?cookie\s*:\s*)([^\r\n]+)")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
# A query parameter whose name says secret, in a URL or a path quoted alone (`?sig=`,
# `&api_key=`, `?X-Amz-Signature=`, `?access_token=`): names the KEY=value form above
# misses (key, auth, sig) are common in collector and webhook URLs.
_QUERY_SECRET = re.compile(
    r"(?i)([?&][a-z0-9_.-]*(?:token|key|secret|passw(?:or)?d|pwd|auth|sig|signature|credential)[a-z0-9_.-]*=)"
    r"([^&#\s'\",;]+)")


def mask_text_secrets(text: str, private: str | None = None) -> str:
    """`text` with secret-looking values masked: `KEY=value` and `"token": "value"` where
    the name says secret, HTTP `Authorization` (any scheme) and `Cookie` values, the
    user and password of a URL (`https://<redacted>@host`) and its query parameters whose
    name says secret (`?sig=<redacted>`); and `private` (the configured
    system prompt) in each of its JSON spellings, as `PROMPT_IN_TEXT`: an agent that logs
    the requests it receives logs the prompt escaped."""
    if private:
        for spelling in text_spellings(private):
            text = text.replace(spelling, PROMPT_IN_TEXT)
    low = _lower(text)
    if "://" in text and "@" in text:
        text = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    if "=" in text and ("?" in text or "&" in text):
        text = _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    if _mentions(low, ("cookie",)):
        text = _COOKIE.sub(lambda m: m.group(1) + REDACTED, text)
    if _mentions(low, _KEY_HINTS):
        text = _SECRET_VALUE.sub(lambda m: m.group(1) + REDACTED, text)
    return text


# What a text must hold for `_SECRET_VALUE` or `_DANGLING` to match in it. The patterns cost
# about 0.3 s a MiB (a terminal's command can be a script), a search for these a millisecond.
_KEY_HINTS = ("apikey", "api_key", "api-key", "token", "secret", "passw", "credential", "authorization")


def _lower(text: str) -> str | None:
    """`text` in lower case, to search for names before the patterns do; None when it is not
    ASCII: the patterns' IGNORECASE also matches `ſ` as `s` and `ı` as `i`, which `lower()`
    keeps, so only the patterns can tell."""
    return text.lower() if text.isascii() else None


def _mentions(low: str | None, words: Sequence[str]) -> bool:
    """Could the text `low` is the lower case of (None: not ASCII) hold one of `words`?"""
    return low is None or any(word in low for word in words)


def _secret_name(name: str) -> bool:
    if name in _SECRET_OPTIONS:
        return True
    looks_named = name.startswith("-") or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None
    return looks_named and any(word in name.lower() for word in _SECRET_WORDS)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """The command line with secret-looking values masked: `--system-prompt X`,
    `--api-key X`, `--token=X`, `API_KEY=X` (the bridge's options and the agent's alike),
    header values (`-H 'Authorization: Bearer X'`, `--header=X-Api-Key: X`, a header name
    whose value is the next argument), and what `mask_text_secrets` finds in any argument
    (a URL's user and password, `--env=API_KEY=X`)."""
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
            continue
        if _mentions(_lower(arg), _KEY_HINTS) and _DANGLING.search(arg):  # `Authorization:Bearer` `X`
            hide_next = True
            out.append(arg)
            continue
        masked = mask_text_secrets(arg)
        out.append(_mask_words(masked) if _SPACE.search(masked) else masked)
    return out


# A word of a command line held in one string (`sh -c 'agent --token X'`, a terminal's
# command): plain characters, escapes and quoted strings, as a shell reads it (a quote left
# open runs to the end).
_SPACE = re.compile(r"\s")
_WORD = re.compile(r"""(?:[^\s'"\\]+|\\.?|'[^']*'?|"(?:[^"\\]|\\.?)*"?)+""", re.S)
_QUOTING = re.compile(r"""\\(.?)|['"]""", re.S)


def _mask_words(text: str, *, every_word: bool = False) -> str:
    """`text`, a command line in one string, with its options' secrets masked as `mask_argv`
    masks separate arguments (`--token X`, `--author=X`, `API_KEY=X`): a word is replaced
    whole, quotes and all, and the spaces between words are kept. Only the words that hold
    a secret word or a quote are looked at (a script of a MiB has 200,000 words)."""
    low = None if every_word else _lower(text)  # every_word: the slow path, for the tests
    # a secret word, or a quote or backslash that may hide one (`--to''ken`)
    marks_of = (*_WORD_HINTS, "'", '"', "\\")
    if not _mentions(low, marks_of):
        return text
    # where they are (not ASCII: every word is looked at)
    marks = [] if low is None else sorted({at for hint in marks_of for at in _find_all(low, hint)})
    out: list[str] = []
    end = 0
    hide_next = False
    for word in _WORD.finditer(text):
        start, stop = word.span()
        if not hide_next and low is not None:
            at = bisect.bisect_left(marks, start)
            if at == len(marks) or marks[at] >= stop:  # no secret word, no quote: a word like any
                continue
            if text[start] not in "-'\"\\" and text.find("=", start, stop) < 0:  # no option, no NAME=
                continue
        out.append(text[end:start])
        end = stop
        name, eq, _ = _QUOTING.sub(r"\1", word.group()).partition("=")
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif _secret_name(name) and eq:
            out.append(f"{name}={REDACTED}")
        else:
            hide_next = _secret_name(name) and name.startswith("-")
            out.append(word.group())
    out.append(text[end:])
    return "".join(out)


_WORD_HINTS = (*_SECRET_WORDS, *_SECRET_OPTIONS)


def _find_all(text: str, needle: str) -> Iterator[int]:
    at = text.find(needle)
    while at >= 0:
        yield at
        at = text.find(needle, at + 1)
