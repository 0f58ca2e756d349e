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

import re
from collections.abc import Sequence

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
# What may follow the separator of `_DANGLING`, to the end.
_AFTER_SEPARATOR = re.compile(rf"(?i)\s*[\"']?(?:{_AUTH_SCHEME})?\s*")
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


def _lower(text: str) -> str:
    """`text` in lower case, of the same length, to search for names before the patterns
    do: where the patterns' IGNORECASE matches a letter `lower()` does not make ASCII
    (`ſ` as `s`, `ı` and `İ` as `i`), that letter; `lower()` makes `K` a `k` (`İ` it
    would make two characters)."""
    if not text.isascii():
        for odd, letter in _FOLDS:
            if odd in text:
                text = text.replace(odd, letter)
    return text.lower()


_FOLDS = (("\u017f", "s"), ("\u0131", "i"), ("\u0130", "i"))


def _mentions(low: str, words: Sequence[str]) -> bool:
    """Could the text `low` is the lower case of (`_lower`) hold one of `words`?"""
    return any(word in low for word in words)


def _dangling(arg: str) -> bool:
    """Does `arg` end with a secret's name and separator, its value the next argument
    (`_DANGLING`)? Its separator is the last `:` or `=`: only when what follows that could
    end the pattern is the pattern searched for (it costs about 0.2 s a MiB)."""
    cut = max(arg.rfind(":"), arg.rfind("="))
    if cut < 0 or _AFTER_SEPARATOR.fullmatch(arg, cut + 1) is None:
        return False
    return _mentions(_lower(arg), _KEY_HINTS) and _DANGLING.search(arg) is not None


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
            # `--token X` in one argument: its words, below (before `=`: the value may hold one)
            if len(name.split(maxsplit=1)) > 1:
                out.append(_mask_words(mask_text_secrets(arg)))
                continue
            if eq:
                out.append(f"{name}={REDACTED}")
                continue
            hide_next = name.startswith("-")
            out.append(arg)
            continue
        if _dangling(arg):  # `Authorization:Bearer` `X`
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
    a secret word, maybe spelled with quotes (`--to''ken`), are looked at (a script of a MiB
    has 200,000 words, and quotes in most lines)."""
    low = _lower(text)
    if not every_word and not _mentions(low.translate(_UNQUOTED), _WORD_HINTS):
        return text
    # where they are (every_word: each word is looked at, the slow path, for the tests)
    marks = None if every_word else iter([found.start() for found in _SPELLED.finditer(low)])
    mark = -1
    out: list[str] = []
    end = 0
    hide_next = False
    for word in _WORD.finditer(text):
        if not hide_next and marks is not None:
            stop = word.end()
            if stop <= mark:  # a word like any before the next secret word (most of them)
                continue
            start = word.start()
            while mark < start:
                mark = next(marks, len(text))
            if mark >= stop:
                continue
            if text[start] not in "-'\"\\" and text.find("=", start, stop) < 0:  # no option, no NAME=
                continue
        start, stop = word.span()
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
# A secret word as a word of a command line may spell it: quotes and backslashes between its
# letters, which the shell takes out (`--to''ken`, `to\\ken`).
_UNQUOTED = str.maketrans("", "", "'\"\\")
_SPELLED = re.compile("|".join("[\'\"\\\\]*".join(re.escape(letter) for letter in hint) for hint in _WORD_HINTS))
