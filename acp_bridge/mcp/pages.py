"""What one tool answer may hold: items up to a count and a size, and a note saying how to
ask for the rest.

An agent reads every byte it is given into its context, so each answer is bounded twice:
by the `limit` the caller chose and by `MAX_TEXT`, about a megabyte of UTF-8 text. An answer
that stops early ends with one line saying where the next one starts (`offset=N`), so that
nothing is out of reach. An item bigger than a whole answer (a message with an embedded
file) is cut, and the note says so.

Must never: hold more than one answer's worth of rendered text, or render an item it skips.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

MAX_TEXT = 1_000_000  # bytes of UTF-8 text in one answer, its note aside


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def cut(text: str, budget: int) -> str:
    """The longest start of `text` whose UTF-8 takes at most `budget` bytes (never half a
    character)."""
    if len(text) * 4 <= budget:
        return text
    return text.encode("utf-8", "surrogatepass")[:budget].decode("utf-8", "ignore")


def page(items: Iterable[T], render: Callable[[T], str], *, offset: int, limit: int,
         call: str, max_text: int = MAX_TEXT, empty: str = "(nothing)", whole: str = "") -> str:
    """The items from `offset` on, each rendered as one entry (joined by newlines), until
    `limit` of them or `max_text` bytes; then, if any is left, a note naming the `offset` to
    `call` again with. Items before `offset` are skipped unrendered. `empty` is the whole
    answer when there is no item at all; `whole` says where to read an entry in full when
    one alone is more than an answer holds (it is then cut)."""
    shown: list[str] = []
    used = 0
    position = -1
    more = False
    cut_short = False
    for position, item in enumerate(items):
        if position < offset:
            continue
        if len(shown) == limit:
            more = True
            break
        text = render(item)
        size = utf8_size(text) + 1
        if used + size > max_text:
            if shown:  # it goes in the next answer
                more = True
                break
            text = cut(text, max_text)  # bigger than a whole answer: its start only
            cut_short = True
        shown.append(text)
        used += size
    if position < 0:
        return empty
    if not shown:
        return f"(nothing from offset {offset} on: there are {position + 1})"
    notes = []
    if cut_short:
        notes.append(f"(the entry at offset {offset} is cut at {max_text} bytes of text, more than one answer "
                     f"holds{'; ' + whole if whole else ''})")
    if more:
        next_offset = offset + len(shown)
        why = "the answer's size limit" if len(shown) < limit else f"limit={limit}"
        notes.append(f"(stopped at {why} after {len(shown)} entries; the rest: {call} with offset={next_offset})")
    return "\n".join(shown + notes)


def piece(text: str, offset: int, *, call: str, max_text: int = MAX_TEXT) -> str:
    """`text` from character `offset` on, at most `max_text` bytes of it; a note naming the
    offset to `call` again with when some is left."""
    if offset > len(text):
        return f"(nothing from offset {offset} on: the text has {len(text)} characters)"
    shown = cut(text[offset:], max_text)
    end = offset + len(shown)
    if end == len(text):
        return shown
    return (f"{shown}\n(characters {offset} to {end} of {len(text)}; the rest: {call} with offset={end})")
