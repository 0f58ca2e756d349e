"""JSON pointers (RFC 6901): the one parser of the package.

Owns: reading a pointer into its reference tokens, the errors that say why a string is not
a pointer, and writing a token back. The config checks `capture.redact` with it at load
time, and the redaction of the capture walks messages by the tokens it returns, so the two
cannot disagree on what a pointer means. Must never: look at a document (walking one is
the caller's business), or do IO.
"""

from __future__ import annotations

import re

Tokens = tuple[str, ...]

# "~" is only ever the start of "~0" ("~") or "~1" ("/") (RFC 6901 section 3).
_BAD_TILDE = re.compile(r"~(?![01])")


def parse_pointer(pointer: str) -> Tokens:
    """RFC 6901: "" is the whole document; "/a~1b/m~0n/0" is ("a/b", "m~n", "0").

    Raises ValueError, whose message names the pointer and the rule it breaks.
    """
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON pointer (RFC 6901: starts with /)")
    if _BAD_TILDE.search(pointer):
        raise ValueError(f"{pointer!r} is not a JSON pointer (RFC 6901: ~ is written ~0 and / is written ~1)")
    # "~1" first: "~01" is the token "~1", not "/" (RFC 6901 section 4).
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/"))


def escape_token(token: object) -> str:
    """One reference token as a pointer writes it: "a/b" is "a~1b", "m~n" is "m~0n"."""
    return str(token).replace("~", "~0").replace("/", "~1")
