"""JSON values for properties, and the spellings of them a peer may send."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def encoded(value: Any, spacing: int) -> bytes:
    """`value` as JSON, in one of several spellings (compact, spaced, \\u-escaped)."""
    if spacing == 0:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    if spacing == 1:
        return json.dumps(value, separators=(" , ", " : ")).encode()
    return json.dumps(value, separators=(",\t", " :  ")).encode()  # no newline: it stays one line
